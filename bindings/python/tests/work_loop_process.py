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
handlers that returned. SECONDS "until-stop": instead of sleeping, a job
runs until the loop says it is stopping (it then claims nothing more);
"until-lost": until the job's lease is lost (given back), printing
"lost <job id>" then. With SECOND_SIGINT_WHEN_NOTICED set in the
environment, the process sends itself a second SIGINT as it prints
"noticed". MODE aio-run: the same with leases.aio under asyncio.run,
AsyncWorker.run and CONCURRENCY tasks; MODE aio-for: ``async for`` inside
``async with`` (each job completed by the body); both print "restored" when
the loop ended and the handlers of SIGINT (asyncio.run's) and SIGTERM are
those from before it ran.
Nothing printed here is a secret.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from datetime import timedelta
from typing import Any, Optional

import leases
import leases.aio


_say = threading.RLock()  # reentrant: a signal handler may print inside say()


def say(line: str) -> None:
    """Prints one line in one write: the pool's threads print too."""
    with _say:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Noticed(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if "draining" in record.getMessage():
            say(f"noticed {time.monotonic()}")
            if os.environ.get("SECOND_SIGINT_WHEN_NOTICED"):
                # Delivered before kill returns: its handler runs inside the
                # first signal's, which is still logging.
                os.kill(os.getpid(), signal.SIGINT)


def report_stopping(loop: Any) -> None:
    """Says "stopping" once the loop has begun to stop (a signal drains it)."""

    def watch() -> None:
        while not loop.stopping:
            time.sleep(0.01)
        say("stopping")

    threading.Thread(target=watch, daemon=True).start()


async def aio_main(location: str, production: str, worker: str, mode: str, how_long: str,
                   drain: Optional[timedelta], concurrency: int) -> int:
    """The aio-run and aio-for modes, in asyncio.run's main task."""
    jobs = 0
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    async with await leases.aio.AsyncAuthority.open(location) as auth:
        loop = auth.work(
            production, worker=worker, duration=timedelta(seconds=1), drain_timeout=drain, concurrency=concurrency
        )

        async def work_on(lease: leases.aio.AsyncLease) -> None:
            if how_long == "until-stop":
                while not loop.stopping:
                    await asyncio.sleep(0.01)
            elif how_long == "until-lost":
                await lease.wait_lost(timedelta(seconds=600))
                say(f"lost {lease.job_id}")
            else:
                await asyncio.sleep(float(how_long))

        report_stopping(loop)
        try:
            say("looping")
            if mode == "aio-run":

                async def handler(lease: leases.aio.AsyncLease) -> None:
                    nonlocal jobs
                    say(f"started {lease.job_id}")
                    await work_on(lease)
                    jobs += 1

                await loop.run(handler)
            else:
                async with loop as steps:
                    async for lease in steps:
                        say(f"started {lease.job_id}")
                        await work_on(lease)
                        await lease.complete(metadata={"worked": how_long})
                        jobs += 1
            say(f"drained {jobs}")
            if (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before:
                say("restored")
        finally:
            say(f"ended {time.monotonic()}")
    return 0


def main() -> int:
    # As in a foreground program: a test runner may have started us with
    # SIGINT ignored (a background job), which Python would leave ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # A test that finds us hung asks for every thread's stack before it kills us.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    location, production, worker, mode = sys.argv[1:5]
    how_long = sys.argv[5] if len(sys.argv) > 5 else "0"
    drain = timedelta(seconds=float(sys.argv[6])) if len(sys.argv) > 6 and sys.argv[6] else None
    concurrency = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    if mode.startswith("aio-"):
        logging.getLogger("leases.worker").setLevel(logging.INFO)
        logging.getLogger("leases.worker").addHandler(Noticed())
        return asyncio.run(aio_main(location, production, worker, mode, how_long, drain, concurrency))
    with leases.Authority(location) as auth:
        if mode == "wait":
            try:
                # Inside the try: a Ctrl-C however soon after this line is
                # caught (a stalled host may deliver it before the wait).
                say("waiting")
                auth.claim(production, worker=worker, duration=timedelta(minutes=1), wait=timedelta(hours=1))
            except KeyboardInterrupt:
                say(f"interrupted {time.monotonic()}")
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

        def work_on(lease: leases.Lease) -> None:
            if how_long == "until-stop":
                while not loop.stopping:
                    time.sleep(0.01)
            elif how_long == "until-lost":
                lease.wait_lost(timedelta(seconds=600))
                say(f"lost {lease.job_id}")
            else:
                time.sleep(float(how_long))

        report_stopping(loop)
        try:
            say("looping")
            if mode == "run":
                done = threading.Lock()

                def handler(lease: leases.Lease) -> None:
                    nonlocal jobs
                    say(f"started {lease.job_id}")
                    work_on(lease)
                    with done:
                        jobs += 1

                loop.run(handler)
                say(f"drained {jobs}")
                return 0
            for lease in loop:
                say(f"started {lease.job_id}")
                work_on(lease)
                lease.complete(metadata={"worked": how_long})
                jobs += 1
            say(f"drained {jobs}")
        finally:
            say(f"ended {time.monotonic()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
