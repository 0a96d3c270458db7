"""A schedule as stored (pure; issues 22 and 31): its status and what its firings did.

The store reads it back through :func:`whimbrel.contract.stored.read_spec`, so a spec
this version cannot act on is still a record, with its ``problem``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.limits import NAME_PATTERN
from whimbrel.contract.schedules import Schedule

_ID = re.compile(NAME_PATTERN)


class ScheduleStatus(StrEnum):
    """Where a stored schedule is. Only ACTIVE ones are in the due index."""

    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    #: It fires no more (past ``end_at``); kept for the listing until deleted.
    ENDED = "ENDED"


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as stored (``Whimbrel.list_schedules``).

    Attributes:
        schedule: what was created.
        status: :class:`ScheduleStatus` value.
        last_fire_epoch: the last fire time handled (started, skipped or buffered); at
            creation and on resume, the time of that call (no firing for the past).
        next_fire_epoch: when the sweep next looks at it (None unless ACTIVE); the next
            fire time, or the current time while a buffered firing waits.
        last_run: the run id of the last firing started.
        buffered_fire_epoch: a firing (``buffer_one``) waiting for ``last_run`` to end.
        skipped: how many firings were skipped because the previous run was live.
        last_error: why the last firing that could not start did not (its workflow's
            definition gone, its input refused by a newer version), or None.
        created_epoch: when it was created.
        starting: firings a sweep decided to start whose runs it may not all have
            started yet (one write decides, the next records the runs); the schedule
            stays due until they are recorded.
        next_after_start: where ``next_fire_epoch`` goes once ``starting`` is recorded
            (None: the schedule ENDS then).
        problem: why this version cannot act on the stored item (a field of a wrong
            type, a value it does not know); the sweep skips it and says so. None when
            it can.
        ignored_fields: fields of the stored spec this version does not know (a newer
            version's, a hand edit): kept in the item, ignored here.
    """

    schedule: Schedule
    status: str = ScheduleStatus.ACTIVE.value
    last_fire_epoch: float | None = None
    next_fire_epoch: float | None = None
    last_run: str | None = None
    buffered_fire_epoch: float | None = None
    skipped: int = 0
    last_error: str | None = None
    created_epoch: float = 0.0
    starting: tuple[float, ...] = ()
    next_after_start: float | None = None
    problem: str | None = None
    ignored_fields: tuple[str, ...] = ()

    @property
    def schedule_id(self) -> str:
        return self.schedule.schedule_id

    def actionable(self, verb: str) -> ScheduleInfo:
        """Self, unless the stored item is one this version cannot act on (issue 31).

        Raises:
            InvalidInput: naming the item's problem (``verb``: what was asked).
        """
        if self.problem is not None:
            raise InvalidInput(f"schedule {self.schedule_id!r} cannot be {verb} by this "
                               f"version: {self.problem}"[:1000], field="schedule",
                               schedule_id=self.schedule_id)
        return self

    def starting_attribute(self) -> dict[str, Any]:
        """``starting`` as stored: the decided firings and the look after them."""
        out: dict[str, Any] = {"fires": list(self.starting)}
        if self.next_after_start is not None:
            out["next"] = self.next_after_start
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for the CLI's JSON and the console)."""
        out: dict[str, Any] = {"schedule_id": self.schedule_id, "status": self.status}
        out.update({k: v for k, v in self.schedule.to_dict().items() if k != "schedule_id"})
        for name in ("last_fire_epoch", "next_fire_epoch", "last_run",
                     "buffered_fire_epoch", "skipped", "last_error", "created_epoch",
                     "problem"):
            out[name] = getattr(self, name)
        out["ignored_fields"] = list(self.ignored_fields)
        if self.starting:
            out["starting"] = list(self.starting)
        return out


def checked_id(schedule_id: Any) -> str:
    """A schedule id as given, once it is one.

    Raises:
        InvalidInput: not a string matching ``NAME_PATTERN``.
    """
    if not isinstance(schedule_id, str) or not _ID.match(schedule_id):
        raise InvalidInput(f"schedule_id must match {NAME_PATTERN}, not {schedule_id!r}"[:200],
                           field="schedule_id")
    return schedule_id


def checked_time(value: Any, field: str) -> float:
    """Epoch seconds as given (a finite number, not a bool).

    Raises:
        InvalidInput: anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        raise InvalidInput(f"{field} must be epoch seconds or an aware datetime, not "
                           f"{value!r}"[:200], field=field)
    return float(value)
