"""The PostgreSQL server of the tests: $LEASES_TEST_PG_URL (tests/pg/cluster.sh
sets it, with LEASES_REQUIRE_PG=1), one fresh schema per test, created and
dropped with psql (installed with the server; no Python driver needed)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import uuid
from contextlib import contextmanager
from typing import Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest


def server_url() -> str:
    """The server's URL; without one a test fails under LEASES_REQUIRE_PG and
    is skipped otherwise."""
    url = os.environ.get("LEASES_TEST_PG_URL", "")
    if url:
        return url
    message = "LEASES_TEST_PG_URL is not set (run under tests/pg/cluster.sh run -- ...)"
    if os.environ.get("LEASES_REQUIRE_PG"):
        pytest.fail(f"LEASES_REQUIRE_PG is set but {message}")
    pytest.skip(f"PostgreSQL tests skipped: {message}")


def psql_binary() -> str:
    found = shutil.which("psql") or next(
        iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"), reverse=True)), None
    )
    if found is None:
        pytest.fail("psql is missing: it comes with the PostgreSQL server tests/pg/cluster.sh installs")
    return found


def psql(url: str, sql: str) -> str:
    """Runs sql on url; returns the unaligned, tuples-only output."""
    done = subprocess.run(
        [psql_binary(), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise AssertionError(f"psql failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout.strip()


def with_param(url: str, key: str, value: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{key}={value}"


class Schema:
    """A fresh schema on the test server; `url` makes it the connection's
    current schema, where the store creates its tables."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.name = "leases_py_" + uuid.uuid4().hex[:16]
        self.url = with_param(server, "search_path", self.name)

    def query(self, sql: str) -> str:
        """Runs sql with this schema as the current one."""
        return psql(self.server, f"SET search_path TO {self.name}; {sql}")


def fresh_schema() -> Iterator[Schema]:
    schema = Schema(server_url())
    psql(schema.server, f"CREATE SCHEMA {schema.name}")
    try:
        yield schema
    finally:
        psql(schema.server, f"DROP SCHEMA {schema.name} CASCADE")


@contextmanager
def holding(url: str, sql: str) -> Iterator[None]:
    """Runs sql in a transaction on url's server, with url's search_path as
    the current schema, and keeps the transaction open (its locks held)
    until the block ends; then rolls it back."""
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query))
    schema = params.pop("search_path", "public")
    server = urlunsplit(parts._replace(query=urlencode(params)))
    p = subprocess.Popen(
        [psql_binary(), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", server],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdin is not None and p.stdout is not None
    try:
        p.stdin.write(f"SET search_path TO {schema}; BEGIN; {sql}; SELECT 'held';\n")
        p.stdin.flush()
        line = p.stdout.readline().strip()
        if line != "held":
            why = p.stderr.read() if p.stderr is not None and p.poll() is not None else ""
            raise AssertionError(f"psql did not hold {sql!r}: {line!r} {why}")
        yield
    finally:
        try:
            p.stdin.write("ROLLBACK;\n")
            p.stdin.close()
        except BrokenPipeError:
            pass
        p.wait(timeout=60)
