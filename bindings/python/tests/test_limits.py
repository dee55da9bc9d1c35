"""Sizes and ranges are checked before anything large is copied or converted
(a huge payload, name or facts document is refused without costing its size
in memory; an int that ctypes would wrap is refused), and the shared names
vectors: the names every surface accepts and refuses, refused before any
store access."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Callable, Dict

import pytest

import leases

from conftest import PRODUCTION, SECONDS_30, load_vectors


def test_a_one_gib_payload_is_refused_before_it_is_copied(db_path: str) -> None:
    # An untouched anonymous mapping costs no memory until it is read, so the
    # child's peak RSS shows whether anything copied the payload.
    code = textwrap.dedent(
        """
        import mmap, resource, sys
        import leases
        with leases.Authority(sys.argv[1]) as auth:
            auth.create_production("p")
            huge = mmap.mmap(-1, 1 << 30)
            try:
                auth.request_job("p", payload=memoryview(huge))
            except leases.InvalidArgumentError as e:
                print("refused", e)
            print("jobs", len(auth.jobs("p")))
        print("maxrss_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        """
    )
    done = subprocess.run([sys.executable, "-c", code, db_path], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert "payload is 1073741824 bytes, over the limit" in lines["refused"] and "LEASES_MAX_PAYLOAD_LEN" in lines["refused"]
    assert lines["jobs"] == "0"
    assert int(lines["maxrss_kib"]) < 100 * 1024, f"peak RSS {lines['maxrss_kib']} KiB"


def test_oversize_text_is_refused_before_it_is_encoded(auth: leases.Authority, job_id: str) -> None:
    before = auth.events()
    huge = "x" * (1 << 20)
    with pytest.raises(leases.InvalidArgumentError, match="LEASES_MAX_NAME_LEN"):
        auth.create_production(huge)
    with pytest.raises(leases.InvalidArgumentError, match="LEASES_MAX_NAME_LEN"):
        auth.request_job(PRODUCTION, key=huge)
    with pytest.raises(leases.InvalidArgumentError, match="LEASES_MAX_NAME_LEN"):
        auth.claim(PRODUCTION, worker=huge, duration=SECONDS_30)
    with pytest.raises(leases.BadTokenError, match="LEASES_MAX_TOKEN_LEN"):
        auth.import_token(huge)
    lease = auth.claim_job(PRODUCTION, job_id, worker="w", duration=SECONDS_30)
    with pytest.raises(leases.InvalidArgumentError, match="LEASES_MAX_REASON_LEN"):
        lease.fail(huge * 8)
    with pytest.raises(leases.InvalidArgumentError, match="LEASES_MAX_FACTS_LEN"):
        lease.complete(metadata={"blob": ["y" * 1000] * 2000})
    with pytest.raises(leases.InvalidArgumentError, match="LEASES_MAX_PATH_LEN"):
        leases.Authority("/tmp/" + huge)
    assert [e.kind for e in auth.events()] == [e.kind for e in before] + ["claimed"]
    lease.complete(metadata={"ok": True})  # the lease was untouched by the refusals


def test_an_events_cursor_outside_int64_is_refused_not_wrapped(auth: leases.Authority, job_id: str) -> None:
    for bad in (2**64, 2**63, -1, -(2**63)):
        with pytest.raises(leases.InvalidArgumentError, match="int64_t"):
            auth.events(after=bad)
    with pytest.raises(TypeError):
        auth.events(after=1.5)  # type: ignore[arg-type]
    assert auth.events(after=2**63 - 1) == []
    assert [e.kind for e in auth.events(after=0)][-1] == "requested"


def name_surfaces(auth: leases.Authority) -> Dict[str, Callable[[str], object]]:
    auth.request_job(PRODUCTION, key="held")
    held = auth.claim(PRODUCTION, worker="holder", duration=SECONDS_30)
    assert held is not None
    return {
        "production name": auth.create_production,
        "job key": lambda n: auth.request_job(PRODUCTION, key=n),
        "worker name": lambda n: auth.claim(PRODUCTION, worker=n, duration=SECONDS_30),
        "metadata key": lambda n: held.complete(metadata={n: 1}),
        "provenance key": lambda n: held.complete(provenance={n: 1}),
    }


def test_new_names_must_be_nfc_without_invisible_characters_or_space_at_either_end(auth: leases.Authority) -> None:
    vectors = load_vectors("names.json")
    surfaces = name_surfaces(auth)
    before = [(e.kind, e.job_id) for e in auth.events()]
    for case in vectors["refused"]:
        for surface, call in surfaces.items():
            with pytest.raises(leases.InvalidArgumentError) as e:
                call(case["name"])
            for needle in case["error_contains"]:
                assert needle in e.value.message, (surface, case["why"], e.value.message)
    assert [(e.kind, e.job_id) for e in auth.events()] == before, "a refused name changed the store"


def test_the_names_every_surface_accepts_are_created_as_given(auth: leases.Authority) -> None:
    for case in load_vectors("names.json")["accepted"]:
        name = case["name"]
        auth.create_production(name)
        job = auth.request_job(name, key=name)
        lease = auth.claim(name, worker=name, duration=SECONDS_30)
        assert lease is not None and lease.production == name and lease.worker == name, case["why"]
        lease.complete(metadata={name: 1}, provenance={name: 2})
        [listed] = auth.jobs(name)
        assert (listed.id, listed.key, listed.worker, listed.production) == (job, name, name, name), case["why"]
