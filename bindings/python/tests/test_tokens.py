"""Tokens carry a lease to another process: export/import round trips, and the
shared vectors (tests/vectors/tokens.json) decode or reject as in every
other language."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import leases

from conftest import PRODUCTION, load_vectors

TOKENS = load_vectors("tokens.json")


def test_an_exported_token_imports_as_the_same_claim(
    auth: leases.Authority, lease: leases.Lease
) -> None:
    token = lease.export_token()
    assert token.startswith("lt1.") and len(token) <= TOKENS["max_token_len"]
    again = auth.import_token(token)
    assert (again.job_id, again.production, again.worker) == (
        lease.job_id,
        lease.production,
        lease.worker,
    )
    assert again.expiry == lease.expiry
    again.complete()
    with pytest.raises(leases.WrongStateError):  # the other handle of the same claim
        lease.complete()


@pytest.mark.parametrize("vector", TOKENS["valid"], ids=lambda v: v["job_id"])
def test_valid_vector_tokens_decode_and_are_checked_against_the_store(
    auth: leases.Authority, vector: Any
) -> None:
    # They decode (not BadTokenError); their production does not exist here.
    with pytest.raises(leases.NotFoundError):
        auth.import_token(vector["token"])


@pytest.mark.parametrize("vector", TOKENS["invalid"], ids=lambda v: v["why"])
def test_invalid_vector_tokens_raise_TokenError(auth: leases.Authority, vector: Any) -> None:
    with pytest.raises(leases.BadTokenError) as err:
        auth.import_token(vector["token"])
    if len(vector["token"]) > 8:
        assert vector["token"][4:] not in str(err.value)  # never echoed


def test_a_token_of_a_finished_claim_is_refused(
    auth: leases.Authority, lease: leases.Lease
) -> None:
    token = lease.export_token()
    lease.release()
    with pytest.raises(leases.WrongStateError):
        auth.import_token(token)


def test_a_token_must_be_a_str(auth: leases.Authority) -> None:
    with pytest.raises(TypeError):
        auth.import_token(b"lt1.")  # type: ignore[arg-type]


def test_a_freed_lease_cannot_export(lease: leases.Lease) -> None:
    lease.close()
    with pytest.raises(leases.ClosedError):
        lease.export_token()


def test_a_token_is_refused_by_an_authority_without_its_production(
    tmp_path: Path, lease: leases.Lease
) -> None:
    with leases.Authority(str(tmp_path / "other.db")) as other:
        other.create_production(PRODUCTION)  # same name, another production id
        with pytest.raises(leases.NotFoundError):
            other.import_token(lease.export_token())
    lease.complete()  # the refusal changed nothing
