// Live updates for the status page: every few seconds, fetch this same page
// and swap in its live parts (the elements with data-live); the filter form
// and anything being typed stay as they are. A pause control stops it.
// No page data is ever built here: the server renders everything, escaped.
"use strict";

(function () {
  const body = document.body;
  const every = Number(body.dataset.refresh || 0);
  const pause = document.getElementById("pause");
  const status = document.getElementById("live-status");
  let paused = sessionStorage.getItem("leases-paused") === "1";
  let timer = 0;
  let busy = false;

  // Forms that ask first (a coordinator action).
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (e) => {
      if (!window.confirm(form.dataset.confirm)) e.preventDefault();
    });
  }

  if (!every || !pause) return;

  function show(text) {
    status.textContent = text;
  }

  function label() {
    pause.textContent = paused ? "Resume updates" : "Pause updates";
    pause.setAttribute("aria-pressed", paused ? "true" : "false");
    show(paused ? "paused" : "live");
  }

  async function refresh() {
    if (paused || busy) return;
    busy = true;
    try {
      const r = await fetch(window.location.href, { credentials: "same-origin", cache: "no-store" });
      if (!r.ok) {
        show("update failed (" + r.status + "); retrying");
        return;
      }
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      for (const el of document.querySelectorAll("[data-live]")) {
        const fresh = doc.getElementById(el.id);
        if (fresh) el.replaceWith(document.importNode(fresh, true));
      }
      show("live · updated " + new Date().toLocaleTimeString());
    } catch (e) {
      show("server unreachable; retrying");
    } finally {
      busy = false;
    }
  }

  function schedule() {
    clearInterval(timer);
    if (!paused) timer = setInterval(refresh, every);
  }

  pause.hidden = false;
  pause.addEventListener("click", () => {
    paused = !paused;
    sessionStorage.setItem("leases-paused", paused ? "1" : "0");
    label();
    schedule();
    if (!paused) refresh();
  });
  label();
  schedule();
})();
