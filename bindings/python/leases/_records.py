"""Observations returned by listings: frozen records without secrets, with
the field names of every JSON listing (times as aware UTC datetimes)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Dict, Generic, List, Optional, Tuple, Type, TypeVar, Union

from ._abi import MAX_ATTEMPTS, MAX_DELAY_US, MAX_RETENTION_US
from ._durations import datetime_from_unix_us, optional_datetime, us_within
from ._ffi import int_within

_E = TypeVar("_E", bound="_Spelled")


class _Spelled(str, enum.Enum):
    """A ``str`` enum of listing spellings: each member equals its spelling
    (``JobState.COMPLETED == "completed"``) and formats as it."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def parse(cls: Type[_E], text: str) -> Union[_E, str]:
        """The member spelled ``text``; a spelling added by a newer library
        is kept as the plain ``str`` it was listed as, so a listing never
        fails because of it."""
        try:
            return cls(text)
        except ValueError:
            return text


class JobState(_Spelled):
    """The state of a job. ``DEAD``: its attempts were used up (terminal,
    like ``FAILED``, the non-retryable failure; both can be redriven)."""

    REQUESTED = "requested"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    DEAD = "dead"


class AttemptEnding(_Spelled):
    """How an attempt (one claim) ended: ``RETRY`` is ``fail_retry``,
    ``FAILED`` the terminal ``fail``; ``EXPIRED`` a lapse the authority
    noticed; ``CANCELLED`` a coordinator's cancel of the claimed job."""

    COMPLETED = "completed"
    FAILED = "failed"
    RETRY = "retry"
    RELEASED = "released"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class RetryPolicy:
    """A production's policy for claims that end without completion
    (release, ``fail_retry``, a lapsed expiry): after ``max_attempts``
    claims so ended the job is ``DEAD``. The backoff after attempt n is
    ``backoff_base * 2**(n-1)``, scaled by a uniform factor within
    ±``jitter_percent``, then capped at ``backoff_cap``. ``RetryPolicy()``
    is the library's default (25 attempts, 1 s doubling to 1 h, ±20 %).
    Checked when made: max_attempts 1 .. 1000, backoff_base 0 .. backoff_cap
    (0: retry at once), backoff_cap .. 366 days, jitter_percent 0 .. 100."""

    max_attempts: int = 25
    backoff_base: timedelta = timedelta(seconds=1)
    backoff_cap: timedelta = timedelta(hours=1)
    jitter_percent: int = 20

    def __post_init__(self) -> None:
        int_within(self.max_attempts, "max_attempts", 1, MAX_ATTEMPTS)
        cap = us_within(self.backoff_cap, "backoff_cap", 0, MAX_DELAY_US)
        us_within(self.backoff_base, "backoff_base", 0, cap, "backoff_cap")
        int_within(self.jitter_percent, "jitter_percent", 0, 100)

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "RetryPolicy":
        return cls(
            max_attempts=int(o["max_attempts"]),
            backoff_base=timedelta(microseconds=int(o["backoff_base_us"])),
            backoff_cap=timedelta(microseconds=int(o["backoff_cap_us"])),
            jitter_percent=int(o["jitter_percent"]),
        )


@dataclass(frozen=True)
class RetentionPolicy:
    """How long a production keeps its finished jobs, by state (counted
    from when each finished), and its events (from when each was
    recorded); ``None`` keeps them for good. ``RetentionPolicy()`` is the
    library's default (completed and cancelled 7 days, failed and dead 30
    days, events 7 days). Checked when made: each None or a positive
    whole number of microseconds up to 36500 days."""

    completed: Optional[timedelta] = timedelta(days=7)
    failed: Optional[timedelta] = timedelta(days=30)
    dead: Optional[timedelta] = timedelta(days=30)
    cancelled: Optional[timedelta] = timedelta(days=7)
    events: Optional[timedelta] = timedelta(days=7)

    def __post_init__(self) -> None:
        for name in ("completed", "failed", "dead", "cancelled", "events"):
            v = getattr(self, name)
            if v is not None:
                us_within(v, name, 1, MAX_RETENTION_US)

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "RetentionPolicy":
        def keep(k: str) -> Optional[timedelta]:
            us = int(o[k])
            return None if us == 0 else timedelta(microseconds=us)

        return cls(completed=keep("completed_us"), failed=keep("failed_us"), dead=keep("dead_us"),
                   cancelled=keep("cancelled_us"), events=keep("events_us"))


@dataclass(frozen=True)
class Attempt:
    """One ended claim of a job (``JobRecord.attempt_history``): its
    ``number`` (the job's attempt count when it was claimed), who held it,
    when it was claimed and ended, how it ended (an ``AttemptEnding``, or
    the plain ``str`` of an ending a newer library adds) and the reason
    given, if any."""

    number: int
    worker: str
    claimed_at: datetime
    ended_at: datetime
    ending: Union[AttemptEnding, str]
    reason: Optional[str]

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "Attempt":
        return cls(
            number=int(o["number"]),
            worker=o["worker"],
            claimed_at=datetime_from_unix_us(o["claimed_at_unix_us"]),
            ended_at=datetime_from_unix_us(o["ended_at_unix_us"]),
            ending=AttemptEnding.parse(o["ending"]),
            reason=o.get("reason"),
        )


@dataclass(frozen=True)
class Job:
    """One job as the authority sees it. ``state`` is a ``JobState`` (which
    compares equal to "requested", "claimed", "completed", "failed",
    "cancelled", "dead"), or the plain ``str`` of a state this package does
    not know. ``attempts`` counts claims; ``priority`` is 0 .. 1000 (higher
    is claimed first); ``claimable_at`` is when a requested job is (or
    becomes) claimable — its run-at, the end of its delay or backoff — and
    when a claimed one becomes claimable again if its claim lapses; None
    once the job is finished."""

    id: str
    production: str
    key: Optional[str]
    state: Union[JobState, str]
    worker: Optional[str]
    claimed_at: Optional[datetime]
    expiry: Optional[datetime]
    attempts: int
    reason: Optional[str]
    priority: int = 0
    claimable_at: Optional[datetime] = None

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "Job":
        return cls(
            id=o["id"],
            production=o["production"],
            key=o.get("key"),
            state=JobState.parse(o["state"]),
            worker=o.get("worker"),
            claimed_at=optional_datetime(o.get("claimed_at_unix_us")),
            expiry=optional_datetime(o.get("expiry_unix_us")),
            attempts=int(o["attempts"]),
            reason=o.get("reason"),
            priority=int(o.get("priority") or 0),
            claimable_at=optional_datetime(o.get("claimable_at_unix_us")),
        )


@dataclass(frozen=True)
class Event:
    """One entry of the authority's event log (``kind`` is "requested",
    "claimed", "renewed", "completed", ...)."""

    seq: int
    at: datetime
    production: str
    job_id: Optional[str]
    kind: str
    worker: Optional[str]
    expiry: Optional[datetime]
    detail: Optional[str]

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "Event":
        return cls(
            seq=int(o["seq"]),
            at=datetime_from_unix_us(o["at_unix_us"]),
            production=o["production"],
            job_id=o.get("job_id"),
            kind=o["kind"],
            worker=o.get("worker"),
            expiry=optional_datetime(o.get("expiry_unix_us")),
            detail=o.get("detail"),
        )


@dataclass(frozen=True)
class Output:
    """A file a completion registered (the reference executor's output):
    its absolute path, size in bytes, SHA-256 (hex) and execution nonce."""

    path: str
    size: int
    sha256: str
    nonce: str

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "Output":
        return cls(path=o["path"], size=int(o["size"]), sha256=o["sha256"], nonce=o["nonce"])


@dataclass(frozen=True)
class Facts:
    """What a job's completion published: metadata and provenance as the
    JSON values given (dicts; empty when none), and the outputs."""

    metadata: Dict[str, Any] = field(default_factory=dict)
    provenance: Dict[str, Any] = field(default_factory=dict)
    outputs: Tuple[Output, ...] = ()

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "Facts":
        return cls(
            metadata=dict(o.get("metadata") or {}),
            provenance=dict(o.get("provenance") or {}),
            outputs=tuple(Output.from_json(x) for x in o.get("outputs") or ()),
        )


@dataclass(frozen=True)
class JobRecord(Job):
    """One job read back (``Authority.job``): the listing's fields, the
    payload's size (never the payload), when it was requested and last
    changed, its facts and ``attempt_history``, the newest 20 claims
    that ended, oldest first (``Attempt``; empty before the first ends).
    Never a secret."""

    payload_size: int = 0
    requested_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    facts: Facts = field(default_factory=Facts)
    attempt_history: Tuple[Attempt, ...] = ()

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "JobRecord":
        job = Job.from_json(o)
        return cls(
            **{f: getattr(job, f) for f in Job.__dataclass_fields__},
            payload_size=int(o.get("payload_size") or 0),
            requested_at=optional_datetime(o.get("requested_at_unix_us")),
            updated_at=optional_datetime(o.get("updated_at_unix_us")),
            facts=Facts.from_json(o.get("facts") or {}),
            attempt_history=tuple(Attempt.from_json(a) for a in o.get("attempt_history") or ()),
        )


@dataclass(frozen=True)
class Production:
    """A production as listed: its id, name, creation time, retry policy
    and retention policy (None only from a library that lists none)."""

    id: str
    name: str
    created_at: datetime
    policy: Optional[RetryPolicy] = None
    retention: Optional[RetentionPolicy] = None

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "Production":
        policy = o.get("policy")
        retention = o.get("retention")
        return cls(
            id=o["id"], name=o["name"], created_at=datetime_from_unix_us(o["created_at_unix_us"]),
            policy=RetryPolicy.from_json(policy) if isinstance(policy, dict) else None,
            retention=RetentionPolicy.from_json(retention) if isinstance(retention, dict) else None,
        )


@dataclass(frozen=True)
class JobCounts:
    """A production's jobs by state at one moment of the authority's clock
    (``at``); ``expired`` counts the claimed jobs whose claim had expired
    (claimable again; in ``claimed`` too). ``by_state`` holds every state
    listed, a newer library's too."""

    by_state: Dict[str, int]
    expired: int
    oldest_requested: Optional[datetime]
    at: datetime

    def __getitem__(self, state: str) -> int:
        return self.by_state.get(str(state), 0)

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "JobCounts":
        rest = {k: v for k, v in o.items() if k not in ("expired", "oldest_requested_unix_us", "at_unix_us")}
        return cls(
            by_state={k: int(v) for k, v in rest.items() if isinstance(v, int) and not isinstance(v, bool)},
            expired=int(o.get("expired") or 0),
            oldest_requested=optional_datetime(o.get("oldest_requested_unix_us")),
            at=datetime_from_unix_us(o["at_unix_us"]),
        )


_T = TypeVar("_T")


@dataclass(frozen=True)
class Page(Generic[_T]):
    """One page of a listing: its items and where the next page starts
    (a cursor, or an event seq), None after the last page of jobs or
    productions. ``more`` (events) says whether more can be read now.
    ``facts`` (a page of jobs read with ``facts=True``) maps each completed
    job's id to the facts its completion published, read in the same call."""

    items: List[_T]
    next: Any
    more: bool = False
    facts: Dict[str, Facts] = field(default_factory=dict)


def parse_list(text: str) -> List[Dict[str, Any]]:
    value = json.loads(text)
    if not isinstance(value, list):
        raise ValueError("libleases returned a listing that is not a JSON array")
    return value
