"""Python worker of the multi-language race (tests/reliability/race_test.go).

Same loop and history schema as every other worker (race_worker_test.go):
one JSON line per call and per return, written unbuffered; it claims with a
wait one time in two and keeps a lease alive one time in three, as the
workers that can do both, fails retryably (after a delay or the backoff)
half of its failures, and one time in five before a claim acts as a
coordinator (request with a priority and a delay or run-at, cancel, retry
one job, redrive).

Loaded from the test library (LEASES_LIBRARY=build/test/libleases.so), it
also makes clock faults through the clock seam, as the C worker does: one
iteration in eight its clock steps a little back (1-5 ms), jumps forward
(5-30 ms) or goes right again, and one request in four is sampled a day
ahead with priority 5. Under a fault the seam freezes the clock at the wall
clock plus the skew, set just after each call line (which carries the
skew, skew_us), and no lease is kept alive. LEASES_RACE_CLOCK_FAULTS=0
turns the faults off.
"""

import json
import os
import random
import sys
import time
from datetime import timedelta

import leases
from leases import _abi, _ffi

PRODUCTION = "race"
AHEAD_US = 24 * 3600 * 1_000_000


def now_us() -> int:
    return time.time_ns() // 1000


def main() -> int:
    name = os.environ["LEASES_RACE_WORKER"]
    log = os.open(os.environ["LEASES_RACE_LOG"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    tokens = os.open(os.environ["LEASES_RACE_TOKENS"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    run_ms = int(os.environ["LEASES_RACE_RUN_MS"])
    rng = random.Random(int(os.environ["LEASES_RACE_SEED"]))
    auth = leases.Authority(os.environ["LEASES_RACE_DB"])
    n = 0
    faults = hasattr(_ffi.lib, "leases_testing_set_clock") and os.environ.get("LEASES_RACE_CLOCK_FAULTS") != "0"
    if faults:
        # Without their argtypes ctypes would pass the clock as a C int,
        # truncated to 32 bits: a clock in 1970, behind every mark.
        _ffi.declare(_ffi.lib, _abi.TESTING_SIGNATURES)
    skew = 0  # the clock fault in force, µs

    def write(obj: dict) -> None:
        if obj["ev"] == "call":
            obj["skew_us"] = skew
        os.write(log, (json.dumps(obj) + "\n").encode())
        if obj["ev"] == "call" and faults:
            # The seam freezes the clock for this call (0: the real clock).
            _ffi.call(_ffi.lib.leases_testing_set_clock, auth._handle(), now_us() + skew if skew else 0)

    def call(op: str, lease: str = "", job: str = "", dur_us: int = 0) -> int:
        nonlocal n
        n += 1
        line = {"w": name, "n": n, "ev": "call", "op": op, "t": now_us()}
        if lease:
            line["lease"] = lease
        if job:
            line["job"] = job
        if dur_us:
            line["dur_us"] = dur_us
        write(line)
        return n

    def ret(i: int, err: "leases.LeasesError | None", job: str = "", expiry: int = 0) -> None:
        t = now_us()
        line = {"w": name, "n": i, "ev": "ret", "kind": "ok" if err is None else err.status_name, "t": t}
        if job:
            line["job"] = job
        if expiry:
            line["expiry_unix_us"] = expiry
        if err is not None:
            line["msg"] = str(err)
        write(line)

    def expiry_us(lease: "leases.Lease") -> int:
        e = lease.expiry
        return (e - EPOCH) // timedelta(microseconds=1)

    mine: list = []  # the jobs it requested
    failed: list = []  # and those it failed

    def coordinate() -> None:
        nonlocal n, skew
        r = rng.randrange(10)
        if r < 5:
            n += 1
            key = f"{name}-{n}"
            line = {"w": name, "n": n, "ev": "call", "op": "request", "key": key, "prio": rng.randint(0, 2)}
            was = skew
            if faults and rng.randrange(4) == 0:  # sampled a day ahead
                skew, line["prio"] = AHEAD_US, 5
            opts = {"priority": line["prio"]}
            how = rng.randrange(12)
            if how < 4:
                line["dur_us"] = rng.randint(1, 200) * 1000
                opts["delay"] = timedelta(microseconds=line["dur_us"])
            elif how < 7:
                line["run_at_us"] = now_us() + rng.randint(0, 200) * 1000
                opts["run_at"] = EPOCH + timedelta(microseconds=line["run_at_us"])
            line["t"] = now_us()
            write(line)
            try:
                job = auth.request_job(PRODUCTION, key, key.encode(), **opts)
                ret(line["n"], None, job)
                mine.append(job)
            except leases.LeasesError as e:
                ret(line["n"], e)
            skew = was
        elif r < 9:
            op = "cancel" if r < 7 else "retry_job"
            pool = failed if op == "retry_job" and failed else mine
            if not pool:
                return
            job = rng.choice(pool)
            i = call(op, job=job)
            try:
                if op == "cancel":
                    auth.cancel(PRODUCTION, job)
                else:
                    auth.retry_job(PRODUCTION, job)
                ret(i, None, job)
            except leases.LeasesError as e:
                ret(i, e, job)
        else:
            n += 1
            state = rng.choice(["failed", "dead", "cancelled"])
            write({"w": name, "n": n, "ev": "call", "op": "redrive", "state": state, "t": now_us()})
            try:
                auth.redrive(PRODUCTION, states=[state])
                ret(n, None)
            except leases.LeasesError as e:
                ret(n, e)

    deadline = time.monotonic() + run_ms / 1000
    it = 0
    while time.monotonic() < deadline:
        it += 1
        if faults and rng.randrange(8) == 0:
            f = rng.randrange(3)
            skew = -rng.randint(1, 5) * 1000 if f == 0 else rng.randint(5, 30) * 1000 if f == 1 else 0
        if rng.randrange(5) == 0:
            coordinate()
        if it % 25 == 0:
            print(json.dumps({"jobs": [repr(j) for j in auth.jobs(PRODUCTION)],
                              "events": [repr(e) for e in auth.events(PRODUCTION)]}), flush=True)
        d = rng.randint(30, 150) * 1000
        waiting = rng.randrange(2) == 0  # one claim in two waits, 0-300 ms
        i = call("claim_wait" if waiting else "claim", dur_us=d)
        label = f"{name}:{i}"
        wait = timedelta(milliseconds=rng.randint(0, 300)) if waiting else None
        try:
            lease = auth.claim(PRODUCTION, worker=name, duration=timedelta(microseconds=d), wait=wait)
        except leases.LeasesError as e:
            ret(i, e)
            continue
        if lease is None:
            ret(i, leases.NothingToClaimError("nothing_to_claim: no claimable job", 4))
            if not waiting:
                time.sleep(0.005)
            continue
        job = lease.job_id
        ret(i, None, job, expiry_us(lease))
        os.write(tokens, (lease.export_token() + "\n").encode())
        time.sleep(rng.randint(0, 60) / 1000)
        if rng.randrange(3) == 0 and skew == 0:
            # Kept alive while it works; its renewals are not in the history,
            # and stopping it reports the last confirmed expiry.
            i = call("keep_alive", label, job, d)
            try:
                lease.keep_alive(timedelta(microseconds=d))
                ret(i, None, job)
            except leases.LeasesError as e:
                ret(i, e, job)
            time.sleep(rng.randint(50, 300) / 1000)
            i = call("stop_keep_alive", label, job)
            lease.stop_keep_alive()
            ret(i, None, job, expiry_us(lease))
        if rng.randrange(3) == 0:
            d = rng.randint(30, 200) * 1000
            i = call("renew", label, job, d)
            try:
                lease.renew(timedelta(microseconds=d))
                ret(i, None, job, expiry_us(lease))
            except leases.LeasesError as e:
                ret(i, e, job)
        time.sleep(rng.randint(0, 40) / 1000)
        r = rng.randrange(10)
        op = "release" if r < 2 else "fail" if r < 3 else "complete"
        delay = 0
        if op == "fail" and rng.randrange(2) == 0:
            op = "fail_retry"
            delay = rng.choice([0, rng.randint(1, 50) * 1000])
        i = call(op, label, job, delay)
        try:
            if op == "release":
                lease.release()
            elif op == "fail_retry":
                lease.fail_retry(f"race retry by {name}", delay=timedelta(microseconds=delay) if delay else None)
            elif op == "fail":
                lease.fail(f"race failure by {name}")
                failed.append(job)
            else:
                lease.complete(metadata={"by": name, "lease": label})
            ret(i, None, job)
        except leases.LeasesError as e:
            ret(i, e, job)
        lease.close()
    return 0


if __name__ == "__main__":
    from datetime import datetime, timezone

    EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
    sys.exit(main())
