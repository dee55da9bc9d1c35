"""The authority (one database and its private clock) and edits (one write
transaction each)."""

from __future__ import annotations

import ctypes
import json
import os
import re
import urllib.parse
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Dict, Generic, Iterable, Iterator, List, Optional, Sequence, Tuple, TypedDict, TypeVar, Union

from . import _ffi
from ._abi import (
    MAX_DELAY_US,
    MAX_PAGE_SIZE,
    MAX_PRIORITY,
    OPEN_MUST_EXIST,
    SYNCHRONOUS_EXTRA,
    SYNCHRONOUS_FULL,
    SYNCHRONOUS_NORMAL,
    MAX_RETENTION_US,
    PRUNE_DRY_RUN,
    leases_open_options,
    leases_prune_options,
    leases_request_options,
    leases_retention_policy,
    leases_retry_policy,
)
from ._durations import duration_us, unix_us, us_within, wait_us
from ._errors import BadTokenError, ClosedError, InvalidArgumentError, NothingToClaimError
from ._lease import JSONMapping, Lease, facts_json
from ._managed import Managed
from ._waiting import Canceller, canceller_handle, in_slices
from ._worker import WorkOptions, Worker

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations only, never evaluated
from ._records import (
    Event,
    Facts,
    Job,
    JobCounts,
    JobRecord,
    JobState,
    Page,
    Production,
    RetentionPolicy,
    RetryPolicy,
    parse_list,
)

PathArg = Union[str, "os.PathLike[str]"]
BytesLike = Union[bytes, bytearray, memoryview]


def is_postgres(location: str) -> bool:
    """Whether the library opens `location` as a PostgreSQL URL (its own
    rule: a postgres:// or postgresql:// prefix, any case)."""
    return location.lower().startswith(("postgres://", "postgresql://"))


def redact(location: str) -> str:
    """`location` for reprs: a PostgreSQL URL shown as the library shows it in
    its own messages (core/store/pgstore Redact, tests/vectors/redaction.json):
    any password, in the user info or a ``password`` parameter of any case,
    becomes ``xxxxx``, the scheme is lower-cased and the parameters come back
    sorted and re-encoded; a pair the library cannot parse is dropped. A
    SQLite path is shown unchanged."""
    if not is_postgres(location):
        return location
    try:
        parts = urllib.parse.urlsplit(location)
        parts.port  # noqa: B018 - raises ValueError for a port the library would refuse
    except ValueError:
        return "postgres://(unparsable URL)"
    userinfo, at, hostport = parts.netloc.rpartition("@")
    netloc = parts.netloc
    if at:
        user, colon, _ = userinfo.partition(":")
        # The user name is unescaped and escaped again, as the library does.
        user = urllib.parse.quote(urllib.parse.unquote(user), safe="$&+,;=")
        netloc = user + (":xxxxx" if colon else "") + "@" + hostport
    return urllib.parse.urlunsplit(
        (parts.scheme.lower(), netloc, parts.path, _redacted_query(parts.query), parts.fragment)
    )


_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _redacted_query(query: str) -> str:
    """The query as the library re-encodes it: pairs with ``;`` or a bad
    escape dropped, every value of a ``password`` parameter (any case)
    replaced by one ``xxxxx``, names sorted, values in their order."""
    values: Dict[str, List[str]] = {}
    for pair in query.split("&"):
        if not pair or ";" in pair or _BAD_ESCAPE.search(pair):
            continue
        name, _, value = pair.partition("=")
        name = urllib.parse.unquote_plus(name)
        values.setdefault(name, []).append(urllib.parse.unquote_plus(value))
    for name in values:
        if name.lower() == "password":
            values[name] = ["xxxxx"]
    return "&".join(
        urllib.parse.quote_plus(name, safe="") + "=" + urllib.parse.quote_plus(v, safe="")
        for name in sorted(values)
        for v in values[name]
    )


def _claim_args(production: str, worker: str, duration: timedelta) -> Tuple[bytes, bytes, int]:
    """The common arguments of every claim, checked in rejection order."""
    _ffi.ensure_not_forked()
    us = duration_us(duration)
    return _ffi.encode(production, "production"), _ffi.encode(worker, "worker"), us


_SYNCHRONOUS = {
    "NORMAL": SYNCHRONOUS_NORMAL,
    "FULL": SYNCHRONOUS_FULL,
    "EXTRA": SYNCHRONOUS_EXTRA,
}


def _open_options(
    must_exist: bool, synchronous: Optional[str], busy_timeout: Optional[timedelta]
) -> leases_open_options:
    """leases_open_options from keyword arguments (docs/c-api.md)."""
    o = leases_open_options()
    o.size = ctypes.sizeof(o)
    o.flags = OPEN_MUST_EXIST if must_exist else 0
    if synchronous is not None:
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNCHRONOUS)}")
        o.synchronous = _SYNCHRONOUS[synchronous]
    if busy_timeout is not None:
        o.busy_timeout_us = duration_us(busy_timeout)
    return o


def _retention(policy: RetentionPolicy) -> leases_retention_policy:
    """leases_retention_policy of a RetentionPolicy (None: 0, kept for good)."""
    if not isinstance(policy, RetentionPolicy):
        raise TypeError(f"policy must be a leases.RetentionPolicy, not {type(policy).__name__}")
    o = leases_retention_policy()
    o.size = ctypes.sizeof(o)
    for name in ("completed", "failed", "dead", "cancelled", "events"):
        v = getattr(policy, name)
        setattr(o, f"keep_{name}_us", 0 if v is None else us_within(v, name, 1, MAX_RETENTION_US))
    return o


def _policy(policy: RetryPolicy) -> leases_retry_policy:
    """leases_retry_policy of a RetryPolicy (checked when it was made)."""
    if not isinstance(policy, RetryPolicy):
        raise TypeError(f"policy must be a leases.RetryPolicy, not {type(policy).__name__}")
    o = leases_retry_policy()
    o.size = ctypes.sizeof(o)
    o.max_attempts = policy.max_attempts
    o.jitter_percent = policy.jitter_percent
    o.backoff_base_us = us_within(policy.backoff_base, "backoff_base", 0, MAX_DELAY_US)
    o.backoff_cap_us = us_within(policy.backoff_cap, "backoff_cap", 0, MAX_DELAY_US)
    return o


class RequestOptions(TypedDict, total=False):
    """The keyword options of a request (``Authority.request_job``; the
    Go core's RequestOptions): priority 0 .. 1000, and when the job
    becomes claimable on the authority's clock, after ``delay`` or at
    ``run_at`` (not both)."""

    priority: int
    delay: Optional[timedelta]
    run_at: Optional[datetime]


def _request_options(options: RequestOptions) -> Optional[leases_request_options]:
    """leases_request_options of request_job's keywords, checked here (an
    int past int32 would wrap in ctypes); None when every one is its
    default, so a plain request stays leases_job_request."""
    unknown = set(options) - set(RequestOptions.__annotations__)
    if unknown:
        raise TypeError(f"request_job() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    priority = _ffi.int_within(options.get("priority", 0), "priority", 0, MAX_PRIORITY)
    delay, run_at = options.get("delay"), options.get("run_at")
    if delay is not None and run_at is not None:
        raise InvalidArgumentError(
            "give delay or run_at, not both: each says when the job becomes claimable"
        )
    if priority == 0 and delay is None and run_at is None:
        return None
    o = leases_request_options()
    o.size = ctypes.sizeof(o)
    o.priority = priority
    if delay is not None:
        # 0 is the library's "no delay", which is what a zero delay means.
        o.delay_us = us_within(delay, "delay", 0, MAX_DELAY_US)
    if run_at is not None:
        at = unix_us(run_at, "run_at")
        # 0 is the library's "none" (claimable at once), which is what the
        # epoch, a time long past, means too.
        o.run_at_unix_us = at if at > 0 else -1
    return o


# The states a redrive accepts (leases_production_redrive), checked before
# the first of several is redriven, so that a bad one changes nothing.
REDRIVABLE = (JobState.FAILED, JobState.DEAD, JobState.CANCELLED)


def _redrivable(states: Iterable[Union[JobState, str]]) -> List[str]:
    if isinstance(states, (str, bytes)) or not isinstance(states, Iterable):
        raise TypeError(f"states must be a collection of states (e.g. [JobState.DEAD]), not {type(states).__name__}")
    names: List[str] = []
    for state in states:
        if not isinstance(state, str):
            raise TypeError(f"states must hold JobState members or str, not {type(state).__name__}")
        if state not in REDRIVABLE:
            raise InvalidArgumentError(
                f"a redrive takes the states failed, dead and cancelled, not {str(state)!r}"
            )
        if str(state) not in names:
            names.append(str(state))
    if not names:
        raise InvalidArgumentError("states is empty: name the states to redrive (failed, dead, cancelled)")
    return names


def _names(values: Optional[Sequence[str]], what: str) -> Optional[bytes]:
    """A comma-separated filter list (states, kinds), or None for no filter.
    JobState members count as their names."""
    if values is None:
        return None
    if isinstance(values, str):
        raise TypeError(f"{what} must be a sequence of names, not a str")
    names = [str(v) if isinstance(v, JobState) else v for v in values]
    if not all(isinstance(v, str) for v in names):
        raise TypeError(f"{what} must be a sequence of str")
    return _ffi.encode(",".join(names), what)


def _page_limit(limit: object) -> int:
    """A page size: 0 (the default, 100) .. MAX_PAGE_SIZE, checked here."""
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise TypeError(f"a page limit must be an int, not {type(limit).__name__}")
    if not 0 <= limit <= MAX_PAGE_SIZE:
        raise InvalidArgumentError(f"a page limit must be 0 .. {MAX_PAGE_SIZE}, not {limit}")
    return limit


_T = TypeVar("_T")


class Pages(Generic[_T]):
    """A listing read a page at a time, each page starting where the last
    one said the next starts (a cursor, an event seq). ``done`` says the
    last page was read, so a reader stops without another call; iterating
    gives the items, reading nothing before the first next()."""

    def __init__(self, fetch: Callable[[Any], "Page[_T]"], start: Any, last: Callable[["Page[_T]"], bool]) -> None:
        self._fetch = fetch
        self._at = start
        self._last = last
        self.done = False

    def read(self) -> "Page[_T]":
        page = self._fetch(self._at)
        self._at = page.next
        self.done = self._last(page)
        return page

    def __iter__(self) -> Iterator[_T]:
        while not self.done:
            yield from self.read().items


def _no_cursor(page: "Page[Any]") -> bool:
    return page.next is None


def _json_object(fn: Any, *args: Any) -> Dict[str, Any]:
    """Calls an observation that writes JSON to its last argument; the
    parsed object."""
    out = ctypes.c_void_p()
    _ffi.call(fn, *args, ctypes.byref(out))
    value = json.loads(_ffi.take_string(out))
    assert isinstance(value, dict)
    return value


def _lease_or_none(status: int, out: Any, authority: "Authority", us: int) -> Optional[Lease]:
    if status == NothingToClaimError.status:
        return None
    _ffi.check(status)
    return Lease(out, authority, us)


class Authority(Managed):
    """An open authority database: creates the file if missing, migrates an
    older schema. Safe to share between threads.

    `path` is a SQLite file path, or a ``postgres://`` / ``postgresql://``
    connection URL (a str: ``pathlib.Path`` would fold its ``//``), passed to
    the library unchanged. The repr never shows a URL's password.

    Options (``leases_authority_open_v2``): ``must_exist`` refuses to create
    a missing authority (``NotFoundError``, nothing created); ``synchronous``
    is ``"NORMAL"``, ``"FULL"`` (the default) or ``"EXTRA"`` (SQLite only);
    ``busy_timeout`` bounds every wait for a lock (default 10 s)."""

    _what = "authority"

    def __init__(
        self,
        path: PathArg,
        *,
        must_exist: bool = False,
        synchronous: Optional[str] = None,
        busy_timeout: Optional[timedelta] = None,
    ) -> None:
        _ffi.ensure_not_forked()
        raw = _ffi.encode_path(path, "path")
        self.path: str = os.fspath(path)
        out = _ffi.AuthorityPtr()
        if not must_exist and synchronous is None and busy_timeout is None:
            _ffi.call(_ffi.lib.leases_authority_open, raw, ctypes.byref(out))
        else:
            o = _open_options(must_exist, synchronous, busy_timeout)
            _ffi.call(_ffi.lib.leases_authority_open_v2, raw, ctypes.byref(o), ctypes.byref(out))
        self._ptr = out

    def _release(self, ptr: Any) -> None:
        _ffi.lib.leases_authority_close(ptr)

    def create_production(self, name: str, *, policy: Optional[RetryPolicy] = None) -> None:
        """Creates a production. Without ``policy`` it gets the default
        ``RetryPolicy()`` and an existing name is fine whatever its policy;
        with one, an existing name is fine only with the same policy
        (``WrongStateError`` otherwise: change it with ``set_policy``)."""
        _ffi.ensure_not_forked()
        raw = _ffi.encode(name, "name")
        if policy is None:
            _ffi.call(_ffi.lib.leases_production_create, self._handle(), raw)
            return
        o = _policy(policy)
        _ffi.call(_ffi.lib.leases_production_create_v2, self._handle(), raw, ctypes.byref(o))

    def set_policy(self, production: str, policy: Optional[RetryPolicy]) -> None:
        """The coordinator's change of a production's retry policy (None:
        back to the default). It applies to every attempt that ends after
        it; a ``policy_changed`` event records it."""
        _ffi.ensure_not_forked()
        p = _ffi.encode(production, "production")
        o = None if policy is None else ctypes.byref(_policy(policy))
        _ffi.call(_ffi.lib.leases_production_set_policy, self._handle(), p, o)

    def set_retention(self, production: str, policy: Optional[RetentionPolicy]) -> None:
        """The coordinator's change of a production's retention policy
        (None: back to the default). Pruning applies it from its next
        batch; a ``retention_changed`` event records it."""
        _ffi.ensure_not_forked()
        p = _ffi.encode(production, "production")
        o = None if policy is None else ctypes.byref(_retention(policy))
        _ffi.call(_ffi.lib.leases_production_set_retention, self._handle(), p, o)

    def retention(self, production: str) -> RetentionPolicy:
        """A production's retention policy."""
        _ffi.ensure_not_forked()
        p = _ffi.encode(production, "production")
        o = leases_retention_policy()
        o.size = ctypes.sizeof(o)
        _ffi.call(_ffi.lib.leases_production_retention, self._handle(), p, ctypes.byref(o))
        return RetentionPolicy.from_json({f"{n}_us": getattr(o, f"keep_{n}_us")
                                          for n in ("completed", "failed", "dead", "cancelled", "events")})

    def prune(
        self,
        production: Optional[str] = None,
        *,
        older_than: Optional[timedelta] = None,
        archive: Optional[PathArg] = None,
        dry_run: bool = False,
    ) -> Tuple[int, int]:
        """Deletes the finished jobs and events past their production's
        retention (or ``older_than``, for every finished state and the
        events), of one production or of every one, in small batches; never
        a requested or claimed job. ``archive``: a JSON Lines file that what
        is deleted is written and synced to first. ``dry_run`` deletes
        nothing. Returns (jobs, events) deleted (or that would be)."""
        _ffi.ensure_not_forked()
        p = _ffi.encode_optional(production, "production")
        a = None if archive is None else _ffi.encode(os.fspath(archive), "archive")
        o = leases_prune_options()
        o.size = ctypes.sizeof(o)
        o.flags = PRUNE_DRY_RUN if dry_run else 0
        o.older_than_us = 0 if older_than is None else us_within(older_than, "older_than", 1, MAX_RETENTION_US)
        jobs, events = ctypes.c_int64(), ctypes.c_int64()
        _ffi.call(_ffi.lib.leases_prune, self._handle(), p, a, ctypes.byref(o), ctypes.byref(jobs),
                  ctypes.byref(events))
        return jobs.value, events.value

    def request_job(
        self,
        production: str,
        key: Optional[str] = None,
        payload: BytesLike = b"",
        **options: Unpack[RequestOptions],
    ) -> str:
        """Requests a job and returns its id. With a key the request is
        idempotent (same key and payload: the same job, whose first
        request's options stand).

        Keyword options: ``priority`` (0 .. 1000, default 0; higher is
        claimed first), and when the job becomes claimable, on the
        authority's clock: after ``delay`` (a timedelta up to 366 days) or
        at ``run_at`` (an aware datetime at most 366 days ahead of the
        authority's now; a time past means now), not both; neither: at
        once. Claim-next serves priority, then claimable time, then request
        order."""
        _ffi.ensure_not_forked()
        p = _ffi.encode(production, "production")
        k = _ffi.encode_optional(key, "key")
        data = _ffi.payload_bytes(payload)
        o = _request_options(options)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data) if data else None
        out = ctypes.c_void_p()
        if o is None:
            _ffi.call(
                _ffi.lib.leases_job_request, self._handle(), p, k, buf, len(data), ctypes.byref(out)
            )
        else:
            _ffi.call(
                _ffi.lib.leases_job_request_v2, self._handle(), p, k, buf, len(data), ctypes.byref(o),
                ctypes.byref(out),
            )
        return _ffi.take_string(out)

    def claim(
        self,
        production: str,
        *,
        worker: str,
        duration: timedelta,
        wait: Optional[timedelta] = None,
        canceller: Optional[Canceller] = None,
    ) -> Optional[Lease]:
        """Claims the next claimable job (FIFO); None when there is none.

        With ``wait`` (a timedelta up to 24 h) it waits that long for a job
        to become claimable and claims it as soon as one is, writing nothing
        meanwhile; None when the wait passed. The wait runs in slices of
        100 ms, so Ctrl-C raises KeyboardInterrupt within 200 ms, and other
        threads run (the GIL is released). A cancelled ``canceller`` ends it
        with ``InterruptedError`` (from any thread, at once); closing the
        authority ends it with ``ClosedError``. Nothing is claimed by a wait
        that ends without a lease."""
        p, w, us = _claim_args(production, worker, duration)
        bound = 0 if wait is None else wait_us(wait)
        self._handle()
        claimed: List[Optional[Lease]] = [None]

        def attempt(slice_us: int) -> bool:
            claimed[0] = self._claim_slice(p, w, us, slice_us, canceller)
            return claimed[0] is not None

        in_slices(bound, attempt)
        return claimed[0]

    def _claim_slice(
        self, p: bytes, w: bytes, us: int, slice_us: int, canceller: Optional[Canceller]
    ) -> Optional[Lease]:
        """One leases_claim_wait. A claim the caller never receives (an
        exception, Ctrl-C's included, between the C call and the Lease) is
        released: nobody else could finish it. An authority closed by
        another thread between two slices ends the wait as ClosedError, as
        one closed during a slice does."""
        out = _ffi.LeasePtr()
        handle = self._handle()
        try:
            if slice_us == 0 and canceller is None:
                status = _ffi.lib.leases_claim(handle, p, w, us, ctypes.byref(out))
            else:
                status = _ffi.lib.leases_claim_wait(
                    handle, p, w, us, slice_us, canceller_handle(canceller), ctypes.byref(out)
                )
            if status != 0 and self._ptr is None:
                raise ClosedError("closed: the authority was closed while the claim waited")
            return _lease_or_none(status, out, self, us)
        except BaseException:
            if out and _ffi.usable():
                _ffi.lib.leases_lease_release(out)
                _ffi.lib.leases_lease_free(out)
            raise

    def claim_job(
        self, production: str, job_id: str, *, worker: str, duration: timedelta
    ) -> Lease:
        """Claims one given job."""
        p, w, us = _claim_args(production, worker, duration)
        j = _ffi.encode(job_id, "job_id")
        out = _ffi.LeasePtr()
        _ffi.call(_ffi.lib.leases_claim_job, self._handle(), p, j, w, us, ctypes.byref(out))
        return Lease(out, self, us)

    def cancel(self, production: str, job_id: str) -> None:
        """Coordinator cancel (no secret); works on requested and claimed jobs."""
        _ffi.ensure_not_forked()
        p = _ffi.encode(production, "production")
        j = _ffi.encode(job_id, "job_id")
        _ffi.call(_ffi.lib.leases_cancel, self._handle(), p, j)

    def retry_job(self, production: str, job_id: str) -> None:
        """The coordinator's redrive of one failed, dead or cancelled job
        (no secret): it is requested and claimable at once, its attempts
        reset to 0 (``attempt_history`` keeps the old ones); a ``redriven``
        event records it. Any other state: ``WrongStateError``."""
        _ffi.ensure_not_forked()
        p = _ffi.encode(production, "production")
        j = _ffi.encode(job_id, "job_id")
        _ffi.call(_ffi.lib.leases_job_retry, self._handle(), p, j)

    def redrive(self, production: str, *, states: Iterable[Union[JobState, str]]) -> int:
        """Redrives every job of the production in ``states`` (``FAILED``,
        ``DEAD``, ``CANCELLED``; another is ``InvalidArgumentError``, before
        anything is redriven), as ``retry_job`` does each, and returns how
        many. Each job's redrive is atomic, the whole is not (it commits a
        few hundred jobs at a time): after a failure, list the jobs."""
        _ffi.ensure_not_forked()
        p = _ffi.encode(production, "production")
        names = _redrivable(states)
        handle = self._handle()
        total = 0
        for name in names:
            count = ctypes.c_int64()
            _ffi.call(_ffi.lib.leases_production_redrive, handle, p, _ffi.encode(name, "state"), ctypes.byref(count))
            total += count.value
        return total

    def import_token(self, token: str) -> Lease:
        """Turns a token exported by another process back into an active lease."""
        _ffi.ensure_not_forked()
        if isinstance(token, str) and "\0" in token:
            # A C string would end at the NUL; the decoder never sees the rest.
            raise BadTokenError("the token contains a NUL byte")
        raw = _ffi.encode(token, "token")
        out = _ffi.LeasePtr()
        _ffi.call(_ffi.lib.leases_lease_import, self._handle(), raw, ctypes.byref(out))
        return Lease(out, self)

    def jobs(self, production: str) -> List[Job]:
        """The production's jobs in request order (no secrets)."""
        _ffi.ensure_not_forked()
        p = _ffi.encode(production, "production")
        out = ctypes.c_void_p()
        _ffi.call(_ffi.lib.leases_jobs_json, self._handle(), p, ctypes.byref(out))
        return [Job.from_json(o) for o in parse_list(_ffi.take_string(out))]

    def events(self, production: Optional[str] = None, after: int = 0) -> List[Event]:
        """Events with seq > after, oldest first; every production when None."""
        _ffi.ensure_not_forked()
        p = _ffi.encode_optional(production, "production")
        after = _ffi.int64_at_least_zero(after, "after")
        out = ctypes.c_void_p()
        _ffi.call(_ffi.lib.leases_events_json, self._handle(), p, after, ctypes.byref(out))
        return [Event.from_json(o) for o in parse_list(_ffi.take_string(out))]

    # ---- observations, paged (C ABI revision 1): typed records ----

    def jobs_page(
        self,
        production: str,
        *,
        states: Optional[Sequence[str]] = None,
        key: Optional[str] = None,
        job_id: Optional[str] = None,
        cursor: Optional[str] = None,
        limit: int = 0,
        facts: bool = False,
    ) -> "Page[Job]":
        """One page of the production's jobs in request order (``limit``
        0: 100, at most 1000), filtered by state (``JobState`` members or
        their names), key or id; ``page.next`` is the cursor of the next
        page, None after the last. With ``facts``, ``page.facts`` holds the
        facts of each completed job of the page, read in the same call
        (not one ``job()`` per job)."""
        _ffi.ensure_not_forked()
        call = _ffi.lib.leases_jobs_page_facts_json if facts else _ffi.lib.leases_jobs_page_json
        o = _json_object(
            call, self._handle(), _ffi.encode(production, "production"),
            _names(states, "states"), _ffi.encode_optional(key, "key"),
            _ffi.encode_optional(job_id, "job_id"), _ffi.encode_optional(cursor, "cursor"), _page_limit(limit),
        )
        got = {k: Facts.from_json(v or {}) for k, v in (o.get("facts") or {}).items()}
        return Page([Job.from_json(j) for j in o["jobs"]], o.get("next"), facts=got)

    def iter_jobs(
        self,
        production: str,
        *,
        states: Optional[Sequence[str]] = None,
        key: Optional[str] = None,
        page_size: int = 0,
    ) -> Iterator[Job]:
        """Every job of the production (with the filters), in request order,
        a page at a time: constant memory however many there are, and each
        job listed once even while states change (docs/c-api.md). Arguments
        are checked at the call, before any store access."""
        return iter(self._job_pages(production, states, key, page_size))

    def _job_pages(
        self, production: str, states: Optional[Sequence[str]], key: Optional[str], page_size: int
    ) -> Pages[Job]:
        # iter_jobs's pages; leases.aio reads them a page per thread hop.
        _ffi.encode(production, "production")
        _names(states, "states")
        _ffi.encode_optional(key, "key")
        _page_limit(page_size)
        return Pages(
            lambda cursor: self.jobs_page(production, states=states, key=key, cursor=cursor, limit=page_size),
            None,
            _no_cursor,
        )

    def events_page(
        self,
        production: Optional[str] = None,
        *,
        job_id: Optional[str] = None,
        kinds: Optional[Sequence[str]] = None,
        after: int = 0,
        limit: int = 0,
    ) -> "Page[Event]":
        """One page of events with seq > after, oldest first; ``page.next``
        is the ``after`` of the next call and ``page.more`` whether more
        can be read now."""
        _ffi.ensure_not_forked()
        o = _json_object(
            _ffi.lib.leases_events_page_json, self._handle(),
            _ffi.encode_optional(production, "production"), _ffi.encode_optional(job_id, "job_id"),
            _names(kinds, "kinds"), _ffi.int64_at_least_zero(after, "after"), _page_limit(limit),
        )
        return Page([Event.from_json(e) for e in o["events"]], int(o["next"]), bool(o["more"]))

    def iter_events(
        self,
        production: Optional[str] = None,
        *,
        job_id: Optional[str] = None,
        kinds: Optional[Sequence[str]] = None,
        after: int = 0,
        page_size: int = 0,
    ) -> Iterator[Event]:
        """The events with seq > after that can be read now, a page at a
        time, oldest first; it ends when no more can be read yet (continue
        later from the last event's ``seq``)."""
        return iter(self._event_pages(production, job_id, kinds, after, page_size))

    def _event_pages(
        self,
        production: Optional[str],
        job_id: Optional[str],
        kinds: Optional[Sequence[str]],
        after: int,
        page_size: int,
    ) -> Pages[Event]:
        # iter_events's pages; leases.aio reads them a page per thread hop.
        _ffi.encode_optional(production, "production")
        _ffi.encode_optional(job_id, "job_id")
        _names(kinds, "kinds")
        _ffi.int64_at_least_zero(after, "after")
        _page_limit(page_size)
        return Pages(
            lambda start: self.events_page(production, job_id=job_id, kinds=kinds, after=start, limit=page_size),
            after,
            lambda page: not page.more,
        )

    def job(self, production: str, job_id: str) -> JobRecord:
        """One job read back: its listing fields, payload size, times and
        the facts its completion published (``JobRecord``); never a secret."""
        _ffi.ensure_not_forked()
        return JobRecord.from_json(
            _json_object(
                _ffi.lib.leases_job_json, self._handle(), _ffi.encode(production, "production"),
                _ffi.encode(job_id, "job_id"),
            )
        )

    def productions_page(self, *, cursor: Optional[str] = None, limit: int = 0) -> "Page[Production]":
        """One page of productions, by name."""
        _ffi.ensure_not_forked()
        o = _json_object(
            _ffi.lib.leases_productions_page_json, self._handle(),
            _ffi.encode_optional(cursor, "cursor"), _page_limit(limit),
        )
        return Page([Production.from_json(p) for p in o["productions"]], o.get("next"))

    def iter_productions(self, *, page_size: int = 0) -> Iterator[Production]:
        """Every production, by name, a page at a time."""
        return iter(self._production_pages(page_size))

    def _production_pages(self, page_size: int) -> Pages[Production]:
        # iter_productions's pages; leases.aio reads them a page per thread hop.
        _page_limit(page_size)
        return Pages(lambda cursor: self.productions_page(cursor=cursor, limit=page_size), None, _no_cursor)

    def job_counts(self, production: str) -> JobCounts:
        """The production's jobs by state at one moment of the authority's
        clock (``counts["requested"]``, ``counts.expired``, ...)."""
        _ffi.ensure_not_forked()
        return JobCounts.from_json(
            _json_object(_ffi.lib.leases_job_counts_json, self._handle(), _ffi.encode(production, "production"))
        )

    def work(self, production: str, *, worker: str, duration: timedelta, **options: Unpack[WorkOptions]) -> Worker:
        """The worker loop of a production (docs/python.md, "Writing a worker")::

            for lease in auth.work("render", worker="w1", duration=timedelta(minutes=2)):
                render(lease.payload)          # kept alive meanwhile
                lease.complete(metadata=...)   # or leave it: the loop completes it,
                                               # claiming the next job in the same commit

        or ``auth.work(...).run(handler)``, which publishes the metadata the
        handler returns and fails a raising handler's job for a retry.

        Each job is claimed as soon as one is claimable (no polling) and
        kept alive (renewed every ``interval``, default a third of
        ``duration``) while the body runs. SIGINT/SIGTERM (main thread) or
        ``stop()`` drain the loop; ``drain_timeout`` bounds how long a
        running job may take then. ``max_jobs`` bounds the claims;
        ``exit_when_empty`` ends the loop once the production has nothing
        claimable. ``handle_signals`` (default: in the main thread) says
        whether SIGINT/SIGTERM drain it. Arguments are checked here, before
        any store access."""
        return Worker(self, production, worker=worker, duration=duration, **options)

    def edit(self) -> "Edit":
        """Begins an edit (one write transaction holding the writer lock)."""
        return Edit(self)

    def __repr__(self) -> str:
        state = " closed" if self._ptr is None else ""
        return f"<leases.Authority path={redact(self.path)!r}{state}>"


class Edit(Managed):
    """One write transaction. As a context manager it commits when the block
    succeeds and aborts when it raises. Leases claimed inside stay pending
    (``ClosedError`` for other operations) until the commit."""

    _what = "edit (committed or aborted)"

    def __init__(self, authority: Authority) -> None:
        _ffi.ensure_not_forked()
        out = _ffi.EditPtr()
        _ffi.call(_ffi.lib.leases_edit_begin, authority._handle(), ctypes.byref(out))
        self._ptr = out
        self._authority = authority

    def _release(self, ptr: Any) -> None:
        _ffi.lib.leases_edit_abort(ptr)

    def claim(self, production: str, *, worker: str, duration: timedelta) -> Optional[Lease]:
        """Claims the next job inside the edit: a pending lease, or None."""
        p, w, us = _claim_args(production, worker, duration)
        out = _ffi.LeasePtr()
        status = _ffi.lib.leases_edit_claim(self._handle(), p, w, us, ctypes.byref(out))
        return _lease_or_none(status, out, self._authority, us)

    def complete(
        self,
        lease: Lease,
        metadata: Optional[JSONMapping] = None,
        provenance: Optional[JSONMapping] = None,
    ) -> None:
        """Completes a lease (pending in this edit, or active) inside the
        edit; its facts are published only by the commit."""
        _ffi.ensure_not_forked()
        if not isinstance(lease, Lease):
            raise TypeError(f"lease must be a leases.Lease, not {type(lease).__name__}")
        facts = facts_json(metadata, provenance)
        _ffi.call(_ffi.lib.leases_edit_complete, self._handle(), lease._handle(), facts)

    def commit(self) -> None:
        """Commits and consumes the edit (also when the commit fails)."""
        ptr = self._handle()
        self._ptr = None
        _ffi.check(_ffi.lib.leases_edit_commit(ptr))

    def abort(self) -> None:
        """Rolls back and consumes the edit; idempotent."""
        self.close()

    _succeed = commit

    def __repr__(self) -> str:
        state = "consumed" if self._ptr is None else "open"
        return f"<leases.Edit path={redact(self._authority.path)!r} {state}>"
