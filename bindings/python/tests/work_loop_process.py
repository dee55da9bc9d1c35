"""A worker process for the tests of waits and the work loop (run as a
script by test_workers.py, killed with signals there).

    work_loop_process.py LOCATION PRODUCTION WORKER MODE [SECONDS] [DRAIN_SECONDS] [CONCURRENCY]

MODE wait: one waiting claim of an hour; on Ctrl-C print "interrupted
<monotonic time>" and exit 0. MODE work: "looping" as the work loop starts;
the work loop; each job's body
prints "started <job id>", sleeps SECONDS and completes the job; the loop
ends on SIGTERM/SIGINT (drain timeout DRAIN_SECONDS, if given); "noticed
<monotonic time>" is printed when a signal reaches the loop, "stopping" once
the loop has taken it in (a further signal is a second one), "drained <jobs>"
when it ends, "ended <monotonic time>" on any exit. MODE run: the same
with Worker.run and a pool of CONCURRENCY threads (each job prints
"started <job id>", sleeps SECONDS and returns); "drained <jobs>" counts the
handlers that returned.
Nothing printed here is a secret.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from datetime import timedelta

import leases


class Noticed(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if "draining" in record.getMessage():
            print(f"noticed {time.monotonic()}", flush=True)


def main() -> int:
    # As in a foreground program: a test runner may have started us with
    # SIGINT ignored (a background job), which Python would leave ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    location, production, worker, mode = sys.argv[1:5]
    seconds = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    drain = timedelta(seconds=float(sys.argv[6])) if len(sys.argv) > 6 and sys.argv[6] else None
    concurrency = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    with leases.Authority(location) as auth:
        if mode == "wait":
            try:
                # Inside the try: a Ctrl-C however soon after this line is
                # caught (a stalled host may deliver it before the wait).
                print("waiting", flush=True)
                auth.claim(production, worker=worker, duration=timedelta(minutes=1), wait=timedelta(hours=1))
            except KeyboardInterrupt:
                print(f"interrupted {time.monotonic()}", flush=True)
                return 0
            return 3
        # The loop logs when a signal reaches it: print that moment.
        log = logging.getLogger("leases.worker")
        log.setLevel(logging.INFO)
        log.addHandler(Noticed())
        jobs = 0
        loop = auth.work(
            production, worker=worker, duration=timedelta(seconds=1), drain_timeout=drain, concurrency=concurrency
        )

        def report_stopping() -> None:
            while not loop.stopping:
                time.sleep(0.01)
            print("stopping", flush=True)

        threading.Thread(target=report_stopping, daemon=True).start()
        try:
            print("looping", flush=True)
            if mode == "run":
                done = threading.Lock()

                def handler(lease: leases.Lease) -> None:
                    nonlocal jobs
                    print(f"started {lease.job_id}", flush=True)
                    time.sleep(seconds)
                    with done:
                        jobs += 1

                loop.run(handler)
                print(f"drained {jobs}", flush=True)
                return 0
            for lease in loop:
                print(f"started {lease.job_id}", flush=True)
                time.sleep(seconds)
                lease.complete(metadata={"slept": seconds})
                jobs += 1
            print(f"drained {jobs}", flush=True)
        finally:
            print(f"ended {time.monotonic()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
