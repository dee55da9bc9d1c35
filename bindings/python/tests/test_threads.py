"""Threads: an authority and its leases are shared between threads, every job
is claimed once, and each thread's exception carries its own call's message
(leases_last_error is per thread and read right after the failed call)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import List

import leases

from conftest import PRODUCTION, SECONDS_30


def test_threads_sharing_an_authority_claim_each_job_exactly_once(
    auth: leases.Authority,
) -> None:
    ids = {auth.request_job(PRODUCTION) for _ in range(40)}

    def work(worker: int) -> List[str]:
        done: List[str] = []
        while True:
            lease = auth.claim(PRODUCTION, worker=f"t{worker}", duration=SECONDS_30)
            if lease is None:
                return done
            lease.complete()
            done.append(lease.job_id)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(work, range(4)))
    claimed = [j for r in results for j in r]
    assert sorted(claimed) == sorted(ids)
    assert {j.state for j in auth.jobs(PRODUCTION)} == {"completed"}


def test_each_thread_reports_the_message_of_its_own_failed_call(auth: leases.Authority) -> None:
    barrier = threading.Barrier(4)
    wrong: List[str] = []

    def fail_repeatedly(n: int) -> None:
        name = f"missing-{n}"
        barrier.wait()
        for _ in range(200):
            try:
                auth.request_job(name)
            except leases.NotFoundError as e:
                if name not in str(e):
                    wrong.append(str(e))
            else:
                wrong.append("no error")

    threads = [threading.Thread(target=fail_repeatedly, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
