"""An attempt's heartbeat (part of the core): its write, when a helper makes one, and the
details the next attempt of the activity resumes from.

A written heartbeat moves the attempt's deadline on and costs a write of its whole item
(a write unit per KB). It is worth that only when the deadline needs it or when it
carries news, so the helpers — ``ActivityRun.heartbeat``, the background thread of
``run_activity`` and ``whimbrel exec`` — write one only:

* when :data:`HEARTBEAT_WRITE_SHARE` (80%) of the heartbeat timeout has passed since the
  last one written (as Temporal throttles heartbeats): the deadline is always pushed
  before it comes, with a fifth of the timeout to spare;
* when its ``details`` changed (the progress a next attempt resumes from).

Between writes a helper asks whether the attempt must stop with one read, at most every
:data:`STOP_CHECK_SHARE` of the timeout (as often as the background thread used to
write, so a cancel is noticed as soon as before) or :data:`STOP_CHECK_SECONDS` without a
timeout. ``Whimbrel.heartbeat`` and a HEARTBEAT row always write: their caller asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from whimbrel.contract.errors import ActivityCancelled, ActivityTimedOut, StateConflict
from whimbrel.contract.records import ActivityRecord
from whimbrel.contract.states import ACTIVITY_ACTIVE, ACTIVITY_GAVE_UP, ActivityState
from whimbrel.engine import written
from whimbrel.engine.feature import Core

A = ActivityState

#: A helper writes a heartbeat once this share of the heartbeat timeout has passed since
#: the last one written.
HEARTBEAT_WRITE_SHARE = 0.8
#: Between writes, a helper reads whether to stop at most this often (share of the
#: timeout)...
STOP_CHECK_SHARE = 1 / 3
#: ...or, for an attempt without a heartbeat timeout, this often (seconds).
STOP_CHECK_SECONDS = 10.0


def _refuse(aeid: str, current: ActivityRecord | None) -> NoReturn:
    state = current.state if current else None
    if state in ACTIVITY_GAVE_UP and state is not None:
        raise ActivityTimedOut(aeid, state.value) from None
    if state is A.CANCELLED:
        raise ActivityCancelled(aeid, state.value) from None
    raise StateConflict(expected=sorted(s.value for s in ACTIVITY_ACTIVE),
                        actual=state.value if state else None, activity_exec_id=aeid,
                        transition="HEARTBEAT", current=current) from None


@dataclass
class Pace:
    """When a helper's next heartbeat writes, reads or does nothing (pure: the caller
    passes the time). Attributes: timeout: the attempt's heartbeat timeout (None: it has
    none). written_at: when its last heartbeat (or its start) was written. checked_at:
    when it last learned its state (a write or a read). details: the details last
    written (JSON text)."""

    timeout: float | None
    written_at: float
    checked_at: float
    details: str | None = None

    @classmethod
    def of(cls, image: ActivityRecord | None, now: float) -> Pace:
        if image is None:
            return cls(None, now, now)
        at = image.heartbeat_epoch or image.started_epoch or now
        return cls(image.heartbeat_timeout_seconds or None, at, at, image.heartbeat_details)

    @property
    def check_every(self) -> float:
        return self.timeout * STOP_CHECK_SHARE if self.timeout else STOP_CHECK_SECONDS

    def plan(self, now: float, details: str | None) -> str:
        """``"write"``, ``"check"`` (read whether to stop) or ``"skip"``."""
        if details is not None and details != self.details:
            return "write"
        if self.timeout and now >= self.written_at + HEARTBEAT_WRITE_SHARE * self.timeout:
            return "write"
        return "check" if now >= self.checked_at + self.check_every else "skip"

    def next_in(self, now: float) -> float:
        """Seconds until a write or a read is due (the background thread sleeps so)."""
        due = self.checked_at + self.check_every
        if self.timeout:
            due = min(due, self.written_at + HEARTBEAT_WRITE_SHARE * self.timeout)
        return max(0.0, due - now)

    def wrote(self, now: float, details: str | None) -> None:
        self.written_at = self.checked_at = now
        if details is not None:
            self.details = details

    def checked(self, now: float) -> None:
        self.checked_at = now


class Heartbeats:
    """Heartbeats of a running attempt, and what a worker checks between them. A part of
    the engine: ``engine.heartbeats.op(…)``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def heartbeat(self, aeid: str, image: ActivityRecord | None = None,
                  details: str | None = None,
                  written_epoch: float | None = None) -> ActivityState:
        """Record that the attempt is alive and push its heartbeat deadline forward (never
        past its close deadline); ``details`` (JSON text), when given, replace the ones it
        keeps. A beat is judged by when it was written (``written_epoch``, a row's stream
        time; else now): one written past the deadline times the attempt out (written.py).

        Raises:
            ActivityCancelled: it was cancelled (the heartbeat was still recorded when it
                is CANCELLED_RUNNING); stop work.
            ActivityTimedOut: the system gave up on it (TIMED_OUT, LOST), or does now.
            StateConflict: it is not running (never started, or finished).
        """
        item = image
        if item is None or item.state not in ACTIVITY_ACTIVE:
            item = self.core.reads.activity(aeid)
        now = self.core.clock()
        changes: dict[str, object] = {"heartbeat_epoch": now}
        if details is not None:
            changes["heartbeat_details"] = details
        if item.heartbeat_timeout_seconds:
            deadline = now + item.heartbeat_timeout_seconds
            if item.close_epoch is not None:
                deadline = min(deadline, item.close_epoch)
            # The real deadline only: the timers index entry stays where it was armed (0
            # index writes per heartbeat); the sweep re-arms it when it fires early.
            changes["deadline_epoch"] = deadline
        try:
            # Only a live attempt heartbeats; TIMED_OUT items keep their state forever.
            moved = self.core.store.set_activity(aeid, changes, states=ACTIVITY_ACTIVE,
                                              alive_at=written_epoch or now)
        except StateConflict as lost:
            written.late_heartbeat(self.core, lost.current, written_epoch or now)
            state = lost.current.state if lost.current else None
            if state in ACTIVITY_GAVE_UP and state is not None:
                # Still recorded (never its state): a timed-out attempt whose code runs on
                # keeps its pool slot while it beats (engine/pool_holders.py).
                self.core.store.try_set_activity(aeid, {"heartbeat_epoch": now}, states=[state])
            _refuse(aeid, lost.current)
        self.core.known.remember(moved)
        if moved.state is A.CANCELLED_RUNNING:
            raise ActivityCancelled(aeid)
        return moved.state or A.RUNNING

    def beat_after_time_out(self, aeid: str) -> bool:
        """Record that the code of an attempt the system gave up on still runs: its
        ``heartbeat_epoch`` only, on a TIMED_OUT or LOST attempt (never its state or
        deadline; one still RUNNING is left alone), which keeps its pool slot until the code
        stops (engine/pool_holders.py). False: not given up on."""
        return self.core.store.try_set_activity(aeid, {"heartbeat_epoch": self.core.clock()},
                                             states=ACTIVITY_GAVE_UP)

    def check_running(self, aeid: str) -> ActivityState:
        """One read, in place of a heartbeat not worth writing: whether the attempt may go on.

        Raises:
            ActivityCancelled / ActivityTimedOut / StateConflict: as :func:`heartbeat`.
        """
        item = self.core.store.get_activity(aeid)
        if item is None or item.state not in ACTIVITY_ACTIVE:
            _refuse(aeid, item)
        if item.state is A.CANCELLED_RUNNING:
            raise ActivityCancelled(aeid)
        return item.state

    def previous_details(self, wx: str, name: str, attempt: int) -> str | None:
        """The heartbeat details of the latest attempt before ``attempt`` of activity
        ``name`` that kept some (JSON text), or None: one Query of that activity's attempts."""
        earlier = [r for r in self.core.store.list_activities(wx, f"{name}:")
                   if r.activity_name == name and r.attempt < attempt
                   and r.heartbeat_details is not None]
        return max(earlier, key=lambda r: r.attempt).heartbeat_details if earlier else None
