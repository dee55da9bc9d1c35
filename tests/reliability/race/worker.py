"""Python worker of the multi-language race (tests/reliability/race_test.go).

Same loop and history schema as every other worker (race_worker_test.go):
one JSON line per call and per return, written unbuffered; it claims with a
wait one time in two and keeps a lease alive one time in three, as the
workers that can do both.
"""

import json
import os
import random
import sys
import time
from datetime import timedelta

import leases

PRODUCTION = "race"


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

    def write(obj: dict) -> None:
        os.write(log, (json.dumps(obj) + "\n").encode())

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

    deadline = time.monotonic() + run_ms / 1000
    it = 0
    while time.monotonic() < deadline:
        it += 1
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
        if rng.randrange(3) == 0:
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
        i = call(op, label, job)
        try:
            if op == "release":
                lease.release()
            elif op == "fail":
                lease.fail(f"race failure by {name}")
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
