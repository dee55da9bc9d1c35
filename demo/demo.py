"""make demo: the product doing its job on an embedded database.

A coordinator (this script, over the Python binding) creates demo/leases.db
with one production of jobs, then shows, with real processes:
  1. a token handed from one process to another (Python claims and exports it
     into a 0600 file; the `leases complete` CLI imports it and completes);
  2. a worker killed with SIGKILL mid-job, whose claim recovers by expiry
     (another worker claims the job again: a claim_expired event);
  3. a job cancelled by the coordinator (`leases cancel`), and a coordinator's
     cancel reaching a Python worker that is working on its job, kept alive
     past its claim's duration (it learns of it within one renewal interval);
  4. workers in Python, Rust, C++ and the CLI's `leases work` draining the
     production, with live progress from the job listing;
  5. SIGTERM draining `leases work` half-way: its running program finishes
     and completes, it claims nothing more, and it exits 0;
while `leases serve` shows it all on the live status page, and ends with a
summary and the tail of the event log (`leases events`). The status page
stays up until the demo ends and for --linger after (make demo: DEMO_LINGER,
60s by default; Ctrl-C ends it sooner); its URL is the last line printed.
Nothing here ever prints a token: tokens live only in 0600 files of a 0700
directory. It exits non-zero when an expectation of the summary fails, and
writes the summary as JSON (--summary-json) for `make test-demo`.
"""

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import leases

PRODUCTION = "demo"
TERMINAL = {"completed", "failed", "dead", "cancelled"}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="the repository")
    p.add_argument("--db", default="demo/leases.db")
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--work-ms", type=int, default=150, help="each job's pretend work")
    p.add_argument("--expire-ms", type=int, default=3000, help="the doomed worker's claim duration")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between progress lines")
    p.add_argument("--deadline", type=float, default=120.0, help="give up after this many seconds")
    p.add_argument("--cpp-worker", required=True)
    p.add_argument("--rust-worker", required=True)
    p.add_argument("--summary-json", default="")
    p.add_argument("--serve", default="127.0.0.1:8080", metavar="ADDR",
                   help="serve the status page here while the demo runs (another free port if taken; '' for none)")
    p.add_argument("--linger", type=linger_seconds, default=60.0, metavar="DURATION",
                   help="keep the status page up this long after the demo ends, e.g. 60s, 5m, 0 (default 60s)")
    return p.parse_args()


def linger_seconds(text: str) -> float:
    """A duration as people write it: 0, 90 (seconds), 250ms, 60s, 5m, 1h."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: write it as 0, 60s, 5m or 1h")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2) or "s"]


class Demo:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.root = Path(a.root).resolve()
        self.db = (self.root / a.db).resolve()
        self.cli = str(self.root / "build" / "leases")
        self.work = self.db.parent / "work"  # logs, stop file, outputs
        self.out = self.work / "out"
        self.stop = self.work / "stop"
        # Tokens only ever live here: a fresh 0700 directory, files 0600.
        self.secrets = Path(tempfile.mkdtemp(prefix="leases-demo-"))
        self.t0 = time.monotonic()
        self.procs: Dict[str, subprocess.Popen] = {}
        self.drain: Dict[str, object] = {}  # the CLI worker's SIGTERM drain, once sent
        self.server: Optional[subprocess.Popen] = None
        self.url = ""
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = str(self.root / "bindings" / "python")
        self.env["LEASES_LIBRARY"] = str(self.root / "build" / "libleases.so")
        self.env["LEASES_DB"] = str(self.db)

    def rel(self, p: Path) -> str:
        return str(p.relative_to(self.root)) if self.root in p.parents else str(p)

    def say(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t0:5.1f}s] {msg}", flush=True)

    def run_cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.cli, "--db", str(self.db), *args], env=self.env,
                              capture_output=True, text=True, timeout=60)

    def python_worker(self, worker: str, *extra: str) -> List[str]:
        return [sys.executable, str(self.root / "demo" / "worker.py"), "--db", str(self.db),
                "--production", PRODUCTION, "--worker", worker, *extra]

    # ---- set-up ------------------------------------------------------------

    def setup(self, auth: leases.Authority) -> List[str]:
        auth.create_production(PRODUCTION)
        ids = [auth.request_job(PRODUCTION, key=f"frame-{i:03d}", payload=f"frame {i:03d} of the demo".encode())
               for i in range(self.a.jobs)]
        self.say(f"created {self.rel(self.db)}: production '{PRODUCTION}' with {len(ids)} requested jobs")
        return ids

    # ---- the status page ------------------------------------------------------

    def serve(self) -> str:
        """Starts `leases serve` (read-only, loopback) on the demo's database
        and returns its URL, once /healthz answers. A taken address falls back
        to a free port: the demo never fails for want of port 8080."""
        for addr in dict.fromkeys([self.a.serve, "127.0.0.1:0"]):
            log = open(self.work / "serve.log", "w")
            p = subprocess.Popen([self.cli, "--db", str(self.db), "serve", "--listen", addr], env=self.env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True)
            line = p.stdout.readline() if p.stdout else ""
            if not line.startswith("leases serve: http://"):
                p.wait()
                continue
            self.server = p
            url = self.url = line.split()[2]
            with urllib.request.urlopen(url + "healthz", timeout=10) as r:
                if r.status != 200:
                    raise RuntimeError(f"the status page at {url} answers {r.status}")
            return url
        raise RuntimeError(f"leases serve did not start; see {self.work / 'serve.log'}")

    def stop_serving(self) -> None:
        if self.server and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()

    # ---- 1. a token handed from one process to another ----------------------

    def handoff(self) -> str:
        token_file = self.secrets / "handoff.token"
        claimer = subprocess.run(self.python_worker("python-handoff", "--duration-ms", "30000",
                                                    "--export", str(token_file)),
                                 env=self.env, capture_output=True, text=True, timeout=60)
        if claimer.returncode != 0:
            raise SystemExit(f"demo: the handoff claimer failed:\n{claimer.stderr}")
        job = claimer.stdout.split()[-1]
        mode = f"{token_file.stat().st_mode & 0o777:04o}"
        self.say(f"token handoff: a Python process claimed job {job[:8]} as 'python-handoff' and exported "
                 f"its token into a {mode} file (the token is never shown)")
        done = self.run_cli("complete", "--token-file", str(token_file),
                            "--metadata", "handoff=true", "--provenance", 'completed_by="leases complete"')
        token_file.unlink()
        if done.returncode != 0:
            raise SystemExit(f"demo: `leases complete` of the handed-off token failed:\n{done.stderr}")
        self.say(f"token handoff: another process, `leases complete --token-file`, imported it and completed job {job[:8]}")
        return job

    # ---- 2. a worker killed mid-job ------------------------------------------

    def doomed(self) -> str:
        log = open(self.work / "python-doomed.log", "w")
        p = subprocess.Popen(self.python_worker("python-doomed", "--hang", "--duration-ms", str(self.a.expire_ms)),
                             env=self.env, stdout=subprocess.PIPE, stderr=log, text=True)
        line = p.stdout.readline() if p.stdout else ""
        if not line.startswith("claimed "):
            p.kill()
            raise SystemExit("demo: the doomed worker did not claim a job")
        job = line.split()[1]
        time.sleep(0.2)
        p.send_signal(signal.SIGKILL)
        p.wait()
        self.say(f"kill -9: worker 'python-doomed' (pid {p.pid}) claimed job {job[:8]} for "
                 f"{self.a.expire_ms / 1000:g}s and was killed mid-job; the claim stays until it expires")
        return job

    # ---- 3. the coordinator cancels a job ------------------------------------

    def cancel(self, job: str) -> None:
        r = self.run_cli("cancel", "--production", PRODUCTION, "--job", job)
        if r.returncode != 0:
            raise SystemExit(f"demo: leases cancel failed:\n{r.stderr}")
        self.say(f"coordinator: `leases cancel --production {PRODUCTION} --job {job[:8]}…` cancelled the last job")

    def cancel_running(self, auth: leases.Authority) -> Dict[str, object]:
        """A Python worker takes a job through its work loop and works on it,
        kept alive, for longer than its claim's duration; the coordinator
        cancels it, and the worker learns of it within one renewal interval."""
        log = open(self.work / "python-kept-alive.log", "w")
        p = subprocess.Popen(self.python_worker("python-kept-alive", "--until-lost",
                                                "--duration-ms", str(self.a.expire_ms)),
                             env=self.env, stdout=subprocess.PIPE, stderr=log, text=True)
        self.procs["python-kept-alive"] = p
        line = p.stdout.readline() if p.stdout else ""
        if not line.startswith("claimed "):
            p.kill()
            raise SystemExit("demo: the kept-alive worker did not claim a job")
        job = line.split()[1]
        time.sleep(1.5 * self.a.expire_ms / 1000)  # past the claim's duration: only renewals keep it
        held = next(j for j in auth.jobs(PRODUCTION) if j.id == job)
        sent = time.monotonic()
        auth.cancel(PRODUCTION, job)
        lost = p.stdout.readline().split() if p.stdout else []
        latency = time.monotonic() - sent
        p.wait(timeout=30)
        del self.procs["python-kept-alive"]
        reached = lost[:3] == ["lost", job, "CancelledError"]
        self.say(f"cancel of a running job: 'python-kept-alive' worked on job {job[:8]} for "
                 f"{1.5 * self.a.expire_ms / 1000:g}s on a {self.a.expire_ms / 1000:g}s claim, kept alive "
                 f"(still {held.state}); the coordinator cancelled it and the worker learned of it "
                 f"{latency:.2f}s later ({lost[2] if len(lost) > 2 else 'nothing'})")
        return {"job": job, "held_before_cancel": str(held.state) == "claimed", "reached": reached,
                "latency_s": round(latency, 3)}

    # ---- 4. the workers --------------------------------------------------------

    def start_workers(self) -> None:
        w = str(self.a.work_ms)
        commands = {
            "python-1": self.python_worker("python-1", "--work-ms", w),
            "rust-1": [self.a.rust_worker, str(self.db), PRODUCTION, "rust-1", w, str(self.stop)],
            "cpp-1": [self.a.cpp_worker, str(self.db), PRODUCTION, "cpp-1", w, str(self.stop), str(self.out)],
            "cli-1": ["bash", str(self.root / "demo" / "cli_worker.sh"), self.cli, str(self.db), PRODUCTION,
                      "cli-1", w, str(self.out)],
        }
        env = dict(self.env, TMPDIR=str(self.secrets))
        for name, cmd in commands.items():
            log = open(self.work / f"{name}.log", "w")
            self.procs[name] = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.say("started workers: python-1 (Python), rust-1 (Rust), cpp-1 (C++, reference executor), "
                 "cli-1 (leases work: the reference executor, claims kept alive)")

    # ---- 5. SIGTERM drains the CLI worker ----------------------------------------

    def drain_cli(self) -> None:
        self.procs["cli-1"].send_signal(signal.SIGTERM)
        self.drain = {"sent_at": time.monotonic()}
        self.say("SIGTERM to cli-1 (`leases work`): it drains — claims nothing more, lets its running program finish")

    def drained_cli(self) -> None:
        """Reports the drain once `leases work` has exited: its exit status, the job that was
        running when SIGTERM came (completed after it), and that nothing was given back."""
        p = self.procs["cli-1"]
        log = (self.work / "cli-1.log").read_text(errors="replace")
        after = log.split("draining", 1)[1] if "draining" in log else ""
        finished = re.findall(r"completed job ([0-9a-f-]{36})", after)
        stopped = re.search(r"work stopped: (\d+) completed, (\d+) failed, (\d+) given back, (\d+) lost", log)
        self.drain.update({"exit": p.returncode, "finished_after_sigterm": finished,
                           "given_back": int(stopped.group(3)) + int(stopped.group(4)) if stopped else -1,
                           "seconds": round(time.monotonic() - float(self.drain["sent_at"]), 2)})
        ran = f"its running job {finished[0][:8]} finished and completed" if finished else "no job was running"
        self.say(f"cli-1 drained in {self.drain['seconds']}s: {ran}; exit status {p.returncode}; "
                 f"{stopped.group(0) if stopped else 'no summary line'}")

    def stop_workers(self) -> None:
        self.stop.touch()
        for name, p in self.procs.items():  # Python's and the CLI's work loops drain on SIGTERM
            if (name.startswith("python-") or name == "cli-1") and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for name, p in self.procs.items():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                self.say(f"worker {name} did not stop in time: killed")

    # ---- progress and summary ------------------------------------------------

    def progress(self, jobs: List[leases.Job]) -> str:
        states = collections.Counter(j.state for j in jobs)
        terminal = terminal_count(jobs)
        per = collections.Counter(j.worker for j in jobs if j.state == "completed")
        width = 24
        filled = width * terminal // max(1, len(jobs))
        bar = "#" * filled + "." * (width - filled)
        workers = "  ".join(f"{w} {per[w]}" for w in ("python-1", "rust-1", "cpp-1", "cli-1"))
        return (f"done {terminal:3d}/{len(jobs)} [{bar}] requested {states['requested']:3d} "
                f"claimed {states['claimed']:2d} | {workers}")

    def run(self) -> int:
        for p in (self.db, Path(str(self.db) + "-wal"), Path(str(self.db) + "-shm")):
            p.unlink(missing_ok=True)
        shutil.rmtree(self.work, ignore_errors=True)
        self.out.mkdir(parents=True)
        lib = Path(leases.library_path()).resolve()
        shown = lib.relative_to(self.root) if self.root in lib.parents else lib
        self.say(f"libleases {leases.library_version()} (release library {shown}), "
                 f"{self.a.jobs} jobs, ~{self.a.work_ms} ms of work each")

        with leases.Authority(self.db) as auth:
            ids = self.setup(auth)
            if self.a.serve:
                self.say(f"status page: {self.serve()} (live while the demo runs, and for "
                         f"{self.a.linger:g}s after it ends)")
            handed = self.handoff()
            doomed = self.doomed()
            cancelled = ids[-1]
            self.cancel(cancelled)
            running = self.cancel_running(auth)
            self.start_workers()

            recovered_by: Optional[str] = None
            last = 0.0
            while True:
                jobs = auth.jobs(PRODUCTION)
                by_id = {j.id: j for j in jobs}
                d = by_id[doomed]
                if recovered_by is None and d.worker != "python-doomed":
                    recovered_by = d.worker
                    self.say(f"recovery: job {doomed[:8]}'s claim expired; '{recovered_by}' claimed it again")
                all_terminal = all(j.state in TERMINAL for j in jobs)
                now = time.monotonic()
                if all_terminal or now - last >= self.a.interval:
                    self.say(self.progress(jobs))
                    last = now
                if all_terminal:
                    break
                if not self.drain and terminal_count(jobs) * 2 >= len(jobs) and any(
                        j.worker == "cli-1" and j.state == "completed" for j in jobs):
                    self.drain_cli()
                if self.drain and "exit" not in self.drain and self.procs["cli-1"].poll() is not None:
                    self.drained_cli()
                dead = [n for n, p in self.procs.items() if p.poll() is not None and not (n == "cli-1" and self.drain)]
                if dead or now - self.t0 > self.a.deadline:
                    self.stop_workers()
                    why = f"worker(s) {', '.join(dead)} exited early" if dead else "the deadline passed"
                    print(f"demo: FAILED: {why}; logs in {self.work}", file=sys.stderr)
                    return 1
                time.sleep(0.1)
            self.stop_workers()
            code, summary = self.summary(auth, ids, handed, doomed, cancelled, running)
        self.linger()
        if self.a.summary_json:
            summary["status_page_stopped"] = self.server is not None and self.server.poll() is not None
            Path(self.a.summary_json).write_text(json.dumps(summary, indent=2))
        return code

    def linger(self) -> None:
        """Keeps the status page up for --linger after the demo's end, then
        stops it; its URL is the last line printed either way."""
        if not self.server:
            return
        again = f"build/leases --db {self.rel(self.db)} serve"
        if self.a.linger > 0:
            print(f"\nstatus page: {self.url} stays up for {self.a.linger:g}s more "
                  f"(DEMO_LINGER; Ctrl-C ends it now; later: {again})", flush=True)
            try:
                time.sleep(self.a.linger)
            except KeyboardInterrupt:
                pass
            self.stop_serving()
        else:
            self.stop_serving()
            print(f"\nstatus page: {self.url} stopped with the demo (DEMO_LINGER=0; to look again: {again})",
                  flush=True)

    def summary(self, auth: leases.Authority, ids: List[str], handed: str, doomed: str, cancelled: str,
                running: Dict[str, object]) -> Tuple[int, Dict[str, object]]:
        jobs = {j.id: j for j in auth.jobs(PRODUCTION)}
        events = auth.events(production=PRODUCTION)
        states = collections.Counter(j.state for j in jobs.values())
        per = collections.Counter(j.worker for j in jobs.values() if j.state == "completed")
        expired = [e for e in events if e.kind == "claim_expired" and e.job_id == doomed]
        outputs = len(list(self.out.iterdir()))
        elapsed = time.monotonic() - self.t0

        print()
        print("== summary ==")
        print(f"jobs: {len(jobs)} — " + ", ".join(f"{s} {states[s]}" for s in
                                                 ("completed", "failed", "cancelled", "requested", "claimed")))
        print("completed per worker: " + ", ".join(f"{w} {n}" for w, n in sorted(per.items())))
        h = jobs[handed]
        print(f"token handoff: job {handed[:8]} claimed by '{h.worker}' in one process, "
              f"completed from another: {h.state}")
        d = jobs[doomed]
        print(f"killed worker: job {doomed[:8]} ({d.attempts} claims): 'python-doomed' killed -9, claim expired "
              f"({len(expired)} claim_expired event), then completed by '{d.worker}': {d.state}")
        print(f"coordinator cancel: job {cancelled[:8]}: {jobs[cancelled].state}")
        r = jobs[str(running["job"])]
        print(f"cancel of a running, kept-alive job: {str(running['job'])[:8]}: {r.state}, the worker learned of it "
              f"after {running['latency_s']}s")
        print(f"output files written by executions (C++ and leases exec): {outputs}, in {self.rel(self.out)}")
        print(f"worker logs: {self.rel(self.work)}/*.log")
        print(f"elapsed: {elapsed:.1f}s")

        tail = self.run_cli("events", "--production", PRODUCTION)
        lines = tail.stdout.splitlines()
        print()
        print(f"== event log: last 12 of {len(lines) - 1} (leases events --production {PRODUCTION}) ==")
        print("\n".join(lines[:1] + lines[-12:]))
        print()
        print("== the three shown-on-the-way jobs in the event log ==")
        print("\n".join(lines[:1] + [ln for ln in lines[1:] if any(j in ln for j in (handed, doomed, cancelled))]))

        if self.drain and "exit" not in self.drain:
            self.drained_cli()
        cli_claimed = [j for j in jobs.values() if j.worker == "cli-1" and j.state == "claimed"]
        if self.drain:
            ran = self.drain.get("finished_after_sigterm") or []
            print(f"SIGTERM drain of cli-1 (leases work): exit status {self.drain.get('exit')} after "
                  f"{self.drain.get('seconds')}s; job(s) finished after the signal: "
                  f"{', '.join(j[:8] for j in ran) or 'none'}; given back or lost: {self.drain.get('given_back')}")
        else:
            print("SIGTERM drain of cli-1 (leases work): not sent (the jobs ran out first)")
        kinds = {"python": "python-1", "rust": "rust-1", "c++": "cpp-1", "cli": "cli-1"}
        checks = {
            "all jobs terminal": all(j.state in TERMINAL for j in jobs.values()),
            "every worker kind did work": all(per[w] > 0 for w in kinds.values()),
            "the handed-off job completed": h.state == "completed" and h.worker == "python-handoff",
            "the killed worker's claim expired and recovered": bool(expired) and d.state == "completed"
                                                               and d.worker != "python-doomed",
            "the cancelled job is cancelled": jobs[cancelled].state == "cancelled",
            "a cancel reached the running, kept-alive worker": bool(running["held_before_cancel"])
                                                              and bool(running["reached"])
                                                              and r.state == "cancelled",
            "nothing failed": states["failed"] == 0,
            "SIGTERM drained the CLI worker: exit 0, nothing given back, no claim left":
                self.drain.get("exit") == 0 and self.drain.get("given_back") == 0 and not cli_claimed,
        }
        print()
        for name, ok in checks.items():
            print(f"{'ok  ' if ok else 'FAIL'} {name}")
        return (0 if all(checks.values()) else 1), {
            "jobs": len(jobs), "states": dict(states), "completed_per_worker": dict(per),
            "handoff": {"job": handed, "state": h.state, "worker": h.worker},
            "killed": {"job": doomed, "state": d.state, "worker": d.worker, "attempts": d.attempts,
                       "claim_expired_events": len(expired)},
            "cancelled": {"job": cancelled, "state": jobs[cancelled].state},
            "cancelled_running": {**running, "state": r.state},
            "cli_drain": {k: v for k, v in self.drain.items() if k != "sent_at"},
            "checks": checks, "elapsed_s": round(elapsed, 2)}


def terminal_count(jobs: List[leases.Job]) -> int:
    return sum(1 for j in jobs if j.state in TERMINAL)


def main() -> int:
    demo = Demo(parse())
    try:
        return demo.run()
    finally:
        for p in [*demo.procs.values(), *([demo.server] if demo.server else [])]:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(demo.secrets, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
