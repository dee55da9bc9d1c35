"""Observations returned by listings: frozen records without secrets, with
the field names of every JSON listing (times as aware UTC datetimes)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, List, Optional, Union

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


def parse_list(text: str) -> List[Dict[str, Any]]:
    value = json.loads(text)
    if not isinstance(value, list):
        raise ValueError("libleases returned a listing that is not a JSON array")
    return value
