"""Observations returned by listings: frozen records without secrets, with
the field names of every JSON listing (times as aware UTC datetimes)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, Generic, List, Optional, Tuple, TypeVar, Union

from ._durations import datetime_from_unix_us, optional_datetime


class JobState(str, enum.Enum):
    """The state of a job. A ``str`` subclass: each member equals its
    listing spelling (``JobState.COMPLETED == "completed"``) and formats as
    it."""

    REQUESTED = "requested"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def parse(cls, text: str) -> Union["JobState", str]:
        """The member spelled ``text``; a state added by a newer library is
        kept as the plain ``str`` it was listed as, so a listing never fails
        because of it."""
        try:
            return cls(text)
        except ValueError:
            return text


@dataclass(frozen=True)
class Job:
    """One job as the authority sees it. ``state`` is a ``JobState`` (which
    compares equal to "requested", "claimed", "completed", "failed",
    "cancelled"), or the plain ``str`` of a state this package does not know."""

    id: str
    production: str
    key: Optional[str]
    state: Union[JobState, str]
    worker: Optional[str]
    claimed_at: Optional[datetime]
    expiry: Optional[datetime]
    attempts: int
    reason: Optional[str]

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
    changed, and its facts. Never a secret."""

    payload_size: int = 0
    requested_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    facts: Facts = field(default_factory=Facts)

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "JobRecord":
        job = Job.from_json(o)
        return cls(
            **{f: getattr(job, f) for f in Job.__dataclass_fields__},
            payload_size=int(o.get("payload_size") or 0),
            requested_at=optional_datetime(o.get("requested_at_unix_us")),
            updated_at=optional_datetime(o.get("updated_at_unix_us")),
            facts=Facts.from_json(o.get("facts") or {}),
        )


@dataclass(frozen=True)
class Production:
    """A production as listed: its id, name and creation time."""

    id: str
    name: str
    created_at: datetime

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "Production":
        return cls(id=o["id"], name=o["name"], created_at=datetime_from_unix_us(o["created_at_unix_us"]))


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
    productions. ``more`` (events) says whether more can be read now."""

    items: List[_T]
    next: Any
    more: bool = False


def parse_list(text: str) -> List[Dict[str, Any]]:
    value = json.loads(text)
    if not isinstance(value, list):
        raise ValueError("libleases returned a listing that is not a JSON array")
    return value
