"""Processes: a child fork()ed after the library was loaded cannot use it
(ForkedError from every call, before anything else); importing leases loads
nothing, so children forked before the first use (multiprocessing's fork
context, a prefork pool) open the authority themselves and work; spawned
processes work, handing leases across as tokens."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Callable, Dict, List

import pytest

import leases
from leases import _ffi

import _workers
from conftest import PRODUCTION, SECONDS_30


def in_forked_child(calls: Dict[str, Callable[[], object]], bypass_guard: bool = False) -> Dict[str, str]:
    """Runs each call in a fork()ed child; returns the exception class names."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report through the pipe, never return into pytest
        code = 1
        try:
            os.close(r)
            if bypass_guard:
                _ffi._forked = False  # reach the library's own check
            out: Dict[str, str] = {}
            for name, call in calls.items():
                try:
                    call()
                    out[name] = "no error"
                except BaseException as e:
                    out[name] = f"{type(e).__name__}: {e}"
            os.write(w, json.dumps(out).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    result: Dict[str, str] = json.loads(data)
    return result


def every_kind_of_call(
    auth: leases.Authority, lease: leases.Lease, db_path: str
) -> Dict[str, Callable[[], object]]:
    return {
        "open": lambda: leases.Authority(db_path),
        "create_production": lambda: auth.create_production("p2"),
        "request_job": lambda: auth.request_job(PRODUCTION),
        "claim": lambda: auth.claim(PRODUCTION, worker="w", duration=SECONDS_30),
        "jobs": lambda: auth.jobs(PRODUCTION),
        "events": lambda: auth.events(),
        "cancel": lambda: auth.cancel(PRODUCTION, lease.job_id),
        "edit": lambda: auth.edit(),
        "import": lambda: auth.import_token("lt1."),
        "renew": lambda: lease.renew(SECONDS_30),
        "renew_bad_duration": lambda: lease.renew(timedelta(0)),
        "expiry": lambda: lease.expiry,
        "export": lambda: lease.export_token(),
        "complete": lambda: lease.complete(),
        "execution": lambda: lease.execution(db_path + ".out"),
        "close": lambda: lease.close(),
    }


def test_every_call_in_a_forked_child_raises_ForkedError(
    auth: leases.Authority, lease: leases.Lease, db_path: str
) -> None:
    results = in_forked_child(every_kind_of_call(auth, lease, db_path))
    wrong = {k: v for k, v in results.items() if not v.startswith("ForkedError")}
    assert not wrong
    assert len(results) == 16


def test_the_library_itself_refuses_a_forked_child_when_the_guard_is_bypassed(
    auth: leases.Authority, lease: leases.Lease, db_path: str
) -> None:
    results = in_forked_child(
        {
            "jobs": lambda: auth.jobs(PRODUCTION),
            "renew": lambda: lease.renew(SECONDS_30),
            "open": lambda: leases.Authority(db_path),
        },
        bypass_guard=True,
    )
    assert all(v.startswith("ForkedError: forked:") for v in results.values()), results


def test_ForkedError_comes_before_closed_and_argument_errors(
    auth: leases.Authority, lease: leases.Lease, db_path: str
) -> None:
    lease.close()
    results = in_forked_child({"renew": lambda: lease.renew(timedelta(0))})
    assert results["renew"].startswith("ForkedError")


def test_the_parent_keeps_working_after_a_fork(
    auth: leases.Authority, lease: leases.Lease, db_path: str
) -> None:
    in_forked_child({"jobs": lambda: auth.jobs(PRODUCTION)})
    lease.renew(timedelta(minutes=1))
    lease.complete()
    assert [j.state for j in auth.jobs(PRODUCTION)] == ["completed"]


def test_a_finalizer_in_a_forked_child_does_not_call_the_library(
    auth: leases.Authority, job_id: str
) -> None:
    lease = auth.claim_job(PRODUCTION, job_id, worker="w", duration=SECONDS_30)

    def drop() -> None:
        nonlocal lease
        lease.__del__()
        if lease.closed:
            raise AssertionError("the finalizer acted in the child")

    results = in_forked_child({"drop": drop})
    assert results == {"drop": "no error"}
    lease.complete()


def test_spawned_workers_complete_jobs_from_exported_tokens(
    auth: leases.Authority, db_path: str
) -> None:
    for i in range(4):
        auth.request_job(PRODUCTION, key=f"frame-{i}")
    tokens: List[str] = []
    for _ in range(4):
        lease = auth.claim(PRODUCTION, worker="parent", duration=timedelta(minutes=1))
        assert lease is not None
        tokens.append(lease.export_token())
        lease.close()  # local memory only: the claim travels as the token
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        done = pool.starmap(_workers.complete_from_token, [(db_path, t) for t in tokens])
    jobs = auth.jobs(PRODUCTION)
    assert sorted(done) == sorted(j.id for j in jobs)
    assert all(j.state == "completed" for j in jobs)


def test_tokens_claimed_in_spawned_workers_complete_in_the_parent(
    auth: leases.Authority, db_path: str
) -> None:
    ids = [auth.request_job(PRODUCTION) for _ in range(2)]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        tokens = pool.starmap(
            _workers.claim_and_export, [(db_path, PRODUCTION, f"w{i}") for i in range(2)]
        )
    for token in tokens:
        assert token is not None
        auth.import_token(token).complete()
    jobs = auth.jobs(PRODUCTION)
    assert sorted(j.id for j in jobs) == sorted(ids)
    assert {j.worker for j in jobs} == {"w0", "w1"}
    assert all(j.state == "completed" for j in jobs)


# ---- forking before first use (a fresh interpreter each: this one has loaded) --

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def run_python(script: str, tmp_path: Path) -> str:
    """Runs a script in a new interpreter that imports leases from the same
    place and loads the same library; returns its stdout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(leases.__file__))), TESTS_DIR]
    )
    env["LEASES_LIBRARY"] = leases.library_path()
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_importing_leases_loads_nothing_and_starts_no_go_runtime(tmp_path: Path) -> None:
    out = run_python(
        """
        import leases, leases.aio
        from leases import _ffi
        threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
        print(_ffi.loaded(), "libleases" in open("/proc/self/maps").read(), threads)
        """,
        tmp_path,
    )
    assert out.split() == ["False", "False", "1"]


def test_multiprocessing_fork_children_before_first_use_work_and_after_it_get_ForkedError(
    tmp_path: Path,
) -> None:
    out = run_python(
        """
        import multiprocessing, os
        import leases, _workers
        from leases import _ffi

        db = os.path.abspath("jobs.db")
        _workers.create_in_another_process(db, "p")
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(3) as pool:  # the parent imported leases but never used it
            done = pool.starmap(_workers.open_and_complete, [(db, "p", f"w{i}") for i in range(6)])
        assert not _ffi.loaded()
        with leases.Authority(db) as auth:  # first use in the parent
            jobs = auth.jobs("p")
            assert sorted(j.id for j in jobs) == sorted(done), (jobs, done)
            assert {j.state for j in jobs} == {"completed"}
            assert {j.worker for j in jobs} == {f"w{i}" for i in range(6)}
            with ctx.Pool(1) as pool:  # forked after the first use
                print(pool.apply(_workers.list_jobs_or_error, (db, "p")))
        """,
        tmp_path,
    )
    assert out.startswith("ForkedError: forked:"), out


def test_a_prefork_pool_of_children_each_opening_the_authority_works(tmp_path: Path) -> None:
    out = run_python(
        """
        import os
        import leases, _workers

        db = os.path.abspath("jobs.db")
        _workers.create_in_another_process(db, "p")
        children = []
        for i in range(4):  # a prefork server: fork the workers, each opens for itself
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    _workers.open_and_complete(db, "p", f"child-{i}")
                    code = 0
                finally:
                    os._exit(code)
            children.append(pid)
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
        assert codes == [0, 0, 0, 0], codes
        with leases.Authority(db) as auth:
            jobs = auth.jobs("p")
        assert sorted(j.worker for j in jobs) == [f"child-{i}" for i in range(4)], jobs
        assert all(j.state == "completed" for j in jobs)
        print(len(jobs))
        """,
        tmp_path,
    )
    assert out.split() == ["4"]
