"""The Python rows of `make bench`, through the public `leases` package.

    pybench.py probe             exits 0 when the binding imports and opens a file
    pybench.py cycle DB N        claim -> complete of N jobs, two commits each
    pybench.py boundary DB N     ns per call: leases_abi_version through the
                                 package's ctypes declaration, and Lease.expiry
                                 (the public property: one leases_lease_expiry
                                 call plus the datetime conversion)
    pybench.py worker DB N C     the N jobs already requested at DB (a file or
                                 a postgres:// URL) drained by the worker loop,
                                 auth.work(..., exit_when_empty=True).run(), a
                                 no-op handler, concurrency C; timed from
                                 work() to run()'s return
    pybench.py probe-concurrency exits 0 when work() runs handlers
                                 concurrently (concurrency=N), else 3 saying so

Prints one JSON line like every row of the bench.
"""

import itertools
import json
import os
import resource
import sys
import tempfile
import time
from datetime import timedelta

PROD = "bench"
HOUR = timedelta(hours=1)
PAYLOAD = b"payload-0123456789"


def cpu_ns():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime + ru.ru_stime) * 1e9


def vcsw():
    """Voluntary context switches of this process (all threads) so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw


def filled(leases, db, n):
    auth = leases.Authority(db)
    auth.create_production(PROD)
    for _ in range(n):
        auth.request_job(PROD, payload=PAYLOAD)
    return auth


def main(argv):
    import leases  # noqa: E402 (the probe reports an import failure)
    from leases import _ffi

    mode = argv[1]
    if mode == "probe":
        with tempfile.TemporaryDirectory() as d:
            with filled(leases, os.path.join(d, "probe.db"), 1) as auth:
                lease = auth.claim(PROD, worker="w", duration=HOUR)
                lease.complete()
        print(json.dumps({"ops": 0}))
        return 0
    if mode == "probe-concurrency":
        with tempfile.TemporaryDirectory() as d:
            with filled(leases, os.path.join(d, "probe.db"), 0) as auth:
                w = auth.work(PROD, worker="w", duration=HOUR, concurrency=2, exit_when_empty=True)
                if getattr(w, "concurrency", None) != 2:
                    print("the Python face in this tree runs one job at a time: work() takes no concurrency option")
                    return 3
        return 0
    db, n = argv[2], int(argv[3])
    if mode == "worker":
        c = int(argv[4])
        options = {"concurrency": c} if c > 1 else {}
        handled = itertools.count()  # next() is atomic under the GIL
        with leases.Authority(db) as auth:
            cpu0, cs0, t = cpu_ns(), vcsw(), time.perf_counter()
            w = auth.work(PROD, worker="w", duration=timedelta(minutes=1), exit_when_empty=True, **options)
            if c > 1 and getattr(w, "concurrency", None) != c:
                print("pybench: work() runs one job at a time (no concurrency option)", file=sys.stderr)
                return 3
            def handler(lease):
                next(handled)

            w.run(handler)
            secs = time.perf_counter() - t
            cpu, cs = (cpu_ns() - cpu0) / n, (vcsw() - cs0) / n
            got = next(handled)
            if got != n:
                print(f"pybench: the handler ran {got} times for {n} jobs", file=sys.stderr)
                return 1
        print(json.dumps({"ops": n, "secs": secs, "cpu_ns": cpu, "extra": {"vcsw": cs}}))
        return 0
    if mode == "cycle":
        with filled(leases, db, n) as auth:
            cpu0, t = cpu_ns(), time.perf_counter()
            for _ in range(n):
                lease = auth.claim(PROD, worker="w", duration=HOUR)
                lease.complete()
            secs = time.perf_counter() - t
            cpu = (cpu_ns() - cpu0) / n
        print(json.dumps({"ops": n, "secs": secs, "cpu_ns": cpu}))
        return 0
    if mode == "boundary":
        with filled(leases, db, 1) as auth:
            lease = auth.claim(PROD, worker="w", duration=HOUR)
            abi = _ffi.lib.leases_abi_version
            t = time.perf_counter()
            for _ in range(n):
                abi()
            abi_ns = (time.perf_counter() - t) * 1e9 / n
            t = time.perf_counter()
            for _ in range(n):
                lease.expiry
            exp_ns = (time.perf_counter() - t) * 1e9 / n
        print(json.dumps({"ops": n, "ns_op": abi_ns, "extra": {"expiry_ns": exp_ns}}))
        return 0
    print("pybench: unknown mode " + mode, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
