"""make test-demo: checks the quick demo's summary and scans its output.

Usage: check.py SUMMARY_JSON OUTPUT_TXT [WORK_DIR [README]]
The demo must have left every job terminal, had every worker kind (Python,
Rust, C++, the CLI) complete work, recovered the killed worker's claim by
expiry (a claim_expired event, completed by another worker), cancelled the
coordinator's job, had a cancel reach a running kept-alive Python worker,
served the status page while it ran and stopped it, and printed nothing that
looks like a token (neither on
its output nor in the workers' logs in WORK_DIR), and printed the status
page's URL last. With README, the README's sample of the demo's output must
have the shape of this real run (demo/readme_sample.py): `make demo-readme`
rewrites a sample that no longer does.
"""
import json
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "demo"))
import readme_sample  # noqa: E402

summary = json.load(open(sys.argv[1]))
output = open(sys.argv[2]).read()
failures = []


def expect(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


states = summary["states"]
per = summary["completed_per_worker"]
expect(summary["jobs"] == 40, "the production has the 40 jobs of the quick mode")
expect(sum(states.get(s, 0) for s in ("completed", "failed", "cancelled")) == summary["jobs"],
       "every job is terminal")
expect(states.get("failed", 0) == 0, "no job failed")
for worker in ("python-1", "rust-1", "cpp-1", "cli-1"):
    expect(per.get(worker, 0) > 0, f"worker {worker} completed at least one job")
expect(summary["handoff"] == {**summary["handoff"], "state": "completed", "worker": "python-handoff"},
       "the job whose token crossed processes was completed")
k = summary["killed"]
expect(k["claim_expired_events"] == 1 and k["state"] == "completed" and k["worker"] != "python-doomed"
       and k["attempts"] >= 2, "the killed worker's claim expired and another worker completed the job")
expect(summary["cancelled"]["state"] == "cancelled", "the coordinator's job is cancelled")
r = summary["cancelled_running"]
# Within one renewal interval (1 s); the bound leaves seconds for a stalled CI host.
expect(r["held_before_cancel"] and r["reached"] and r["state"] == "cancelled" and r["latency_s"] < 30,
       "a coordinator's cancel reached a running, kept-alive Python worker")
d = summary.get("cli_drain", {})
expect(d.get("exit") == 0 and d.get("given_back") == 0 and "SIGTERM to cli-1" in output,
       "SIGTERM drained leases work mid-run: exit 0, nothing given back")
expect(all(summary["checks"].values()), "the demo's own checks all passed")
# Tokens are "lt1." + 70 base64url characters (docs/tokens.md); no secret-like
# text at all may appear, so any "lt1." is a failure.
expect(not re.search(r"lt1\.", output), "no token text in the demo's output")
if len(sys.argv) > 3:
    logs = sorted(pathlib.Path(sys.argv[3]).glob("*.log"))
    expect(len(logs) >= 4, f"the workers' logs are there ({len(logs)})")
    expect(not any("lt1." in p.read_text(errors="replace") for p in logs), "no token text in the workers' logs")
expect(re.search(r"status page: http://127\.0\.0\.1:\d+/ ", output) is not None,
       "the demo served the status page and printed its URL")
expect(summary.get("status_page_stopped") is True, "the status page stopped with the demo")
lines = [ln for ln in output.splitlines() if ln.strip()]
expect(bool(lines) and readme_sample.LAST.match(lines[-1]) is not None,
       "the status page's URL is the last line the demo prints")
if len(sys.argv) > 4:
    try:
        problems = readme_sample.check(pathlib.Path(sys.argv[4]).read_text(), output)
    except ValueError as e:
        problems = [str(e)]
    for p in problems:
        print(f"     {p}")
    expect(not problems, "the README's sample output has the shape of a real run (make demo-readme rewrites it)")
for needle in ("claim_expired", "== summary ==", "== event log"):
    expect(needle in output, f"the output shows {needle!r}")
# Not a speed check (make bench measures speed): a demo that hangs or crawls.
# It takes well under a minute; a loaded or stalled CI host may take longer.
expect(summary["elapsed_s"] < 300, f"the quick demo finished in under five minutes ({summary['elapsed_s']}s)")

if failures:
    print(f"test-demo: {len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("test-demo: all checks passed")
