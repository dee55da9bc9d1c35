"""Demo worker in Python: the package's work loop (leases.Authority.work) over
one production: it waits for each job without polling, keeps its claim alive
while it "works" (reads its payload, sleeps), and completes it with metadata;
SIGTERM or Ctrl-C drains it (the running job finishes, nothing more is
claimed) and it exits.

Modes besides the ordinary loop (used by demo.py to show the product's rules):
  --hang        claim one job, say so, then hang mid-job (demo.py kills it -9;
                the claim recovers when it expires)
  --export F    claim one job and export its token into F, created 0600 and
                exclusively; another process imports it and completes the job
  --until-lost  take one job through the loop and work on it, kept alive,
                until this process learns the claim is over (demo.py cancels
                it as the coordinator); print why and how long that took
Never prints a token: only job ids, worker names and counts.
"""

import argparse
import os
import sys
import time
from datetime import timedelta

import leases


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--production", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--work-ms", type=int, default=100)
    p.add_argument("--duration-ms", type=int, default=10000)
    p.add_argument("--hang", action="store_true")
    p.add_argument("--until-lost", action="store_true")
    p.add_argument("--export", default="")
    return p.parse_args()


def export_to_file(lease: leases.Lease, path: str) -> None:
    # O_EXCL + 0600: the token is a credential; it goes to a private file only.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(lease.export_token() + "\n")
        f.flush()
        os.fsync(f.fileno())


def main() -> int:
    a = parse()
    duration = timedelta(milliseconds=a.duration_ms)
    with leases.Authority(a.db) as auth:
        if a.hang or a.export:
            lease = auth.claim(a.production, worker=a.worker, duration=duration)
            if lease is None:
                print("nothing to claim", file=sys.stderr)
                return 3
            if a.export:
                export_to_file(lease, a.export)
            print(f"claimed {lease.job_id}", flush=True)
            if a.hang:
                time.sleep(3600)  # mid-job, never renewing: demo.py sends SIGKILL
            return 0

        if a.until_lost:
            for lease in auth.work(a.production, worker=a.worker, duration=duration, max_jobs=1):
                print(f"claimed {lease.job_id}", flush=True)
                why = lease.wait_lost(timedelta(minutes=1))  # the "work": until the claim is over
                print(f"lost {lease.job_id} {type(why).__name__}", flush=True)
            return 0

        done = 0
        for lease in auth.work(a.production, worker=a.worker, duration=duration):
            payload = lease.payload
            time.sleep(a.work_ms / 1000)
            try:
                lease.complete(metadata={"bytes": len(payload), "language": "python"},
                               provenance={"worker": a.worker})
                done += 1
            except leases.LeasesError as e:  # e.g. cancelled by the coordinator meanwhile
                print(f"{a.worker}: job {lease.job_id}: {e.__class__.__name__}", file=sys.stderr)
        print(f"{a.worker}: drained; {done} job(s) completed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
