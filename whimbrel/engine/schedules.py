"""Schedules (issue 22): workflows started on a cron or a rate, fired by the sweep.

A schedule is one item of the ``schedule`` table (store/schedules.py). While ACTIVE it
is in the sparse, sharded ``due_schedules`` index under the time the sweep must next
look at it; each sweep pass asks every shard at once for what is due (cost grows with
what is due, not with how many schedules exist) and, for each due schedule:

1. starts every due firing (the pure :func:`~whimbrel.contract.schedules.due_fires`,
   which applies ``catchup_seconds``) as ``start`` with the request id
   ``<schedule_id>@<fire time>``: a firing found due by two sweepers, or again after a
   crash, starts the same run (the run id derives from the request id), so **one run
   per fire time**;
2. applies the overlap policy to each firing (the previous firing's run still live:
   ``skip`` drops it and counts it, ``buffer_one`` keeps one to start when that run has
   ended, ``allow`` starts it anyway);
3. advances the schedule with one conditional write, on the fire it advanced from (the
   ``last_fire_epoch`` and ``next_fire_epoch`` it read, and ACTIVE): of several
   sweepers, one writes; the others' starts were the same runs.

A crash between 1 and 3 leaves the schedule due: the next sweep starts the same runs
(no-ops) and advances it.
"""

from __future__ import annotations

import logging
import math
import re
from typing import TYPE_CHECKING, Any

from whimbrel.contract.errors import (
    DefinitionNotFound,
    InvalidInput,
    NotAllowedNow,
    NotFound,
    WhimbrelError,
)
from whimbrel.contract.limits import NAME_PATTERN
from whimbrel.contract.records import REMOVE
from whimbrel.contract.schedules import (
    MAX_DUE_FIRES,
    OverlapAction,
    Schedule,
    ScheduleInfo,
    ScheduleStatus,
    backfill_fires,
    due_fires,
    fire_request_id,
    next_fire,
    overlap_action,
)
from whimbrel.contract.states import WORKFLOW_LIVE
from whimbrel.contract.waits import check_input
from whimbrel.engine.feature import Core, Feature

if TYPE_CHECKING:
    from whimbrel.engine.leases import SweepLeases

log = logging.getLogger("whimbrel.schedules")

S = ScheduleStatus
#: Due schedules one sweep pass takes from each shard (the rest wait for the next).
DUE_PER_SHARD = 100
_ID = re.compile(NAME_PATTERN)


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


class ScheduleNotFound(NotFound):
    """No schedule has this id."""

    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"no schedule {schedule_id!r}", schedule_id=schedule_id)


class ScheduleConflict(NotAllowedNow):
    """A schedule of this id exists with another spec (delete it first to change it)."""


class Schedules(Feature):
    """The schedules feature: the sweep fires due schedules; the calls below manage them."""

    def __init__(self, core: Core) -> None:
        self.core = core

    # -- management ------------------------------------------------------------------------

    def create(self, schedule: Schedule) -> ScheduleInfo:
        """Store a new schedule; it first fires at its first fire time after now.

        Raises:
            InvalidInput: the schedule is invalid, fires no more after now, or its input
                is refused by the workflow (a timer's time missing).
            DefinitionNotFound: its workflow is not registered.
            ScheduleConflict: the id exists with another spec.
        """
        schedule.validate()
        _, defn = self.core.definition(schedule.workflow_name)  # refuses an unknown one
        check_input(defn.activities, schedule.input)  # what every firing's start checks
        now = self.core.clock()
        existing = self.core.store.get_schedule(schedule.schedule_id)
        if existing is None:
            first = next_fire(schedule, now)
            if first is None:
                raise InvalidInput(f"schedule {schedule.schedule_id!r} fires no more after "
                                   f"now (end_at {schedule.end_at})", field="end_at")
            info = ScheduleInfo(schedule=schedule, status=S.ACTIVE.value, last_fire_epoch=now,
                                next_fire_epoch=first, created_epoch=now)
            if self.core.store.put_schedule(info, now):
                return info
            existing = self.core.store.get_schedule(schedule.schedule_id)  # a racing create
        if existing is not None and existing.schedule.to_dict() == schedule.to_dict():
            return existing  # the same create again: nothing to do
        raise ScheduleConflict(
            f"schedule {schedule.schedule_id!r} exists with another spec; delete it and "
            "create it again to change it", schedule_id=schedule.schedule_id)

    def get(self, schedule_id: str) -> ScheduleInfo:
        info = self.core.store.get_schedule(checked_id(schedule_id))
        if info is None:
            raise ScheduleNotFound(schedule_id)
        return info

    def pause(self, schedule_id: str) -> ScheduleInfo:
        """Take an ACTIVE schedule out of the due index (idempotent; a buffered firing
        is kept for the resume)."""
        while True:
            info = self.get(schedule_id)
            if info.status != S.ACTIVE.value:
                return info
            done = self.core.store.update_schedule(schedule_id, {
                "status": S.PAUSED.value, "next_fire_epoch": REMOVE,
                "updated_epoch": self.core.clock()}, expect={"status": S.ACTIVE.value})
            if done is not None:
                return done

    def resume(self, schedule_id: str) -> ScheduleInfo:
        """Put a PAUSED schedule back: it fires from its first fire time after now (the
        firings of the paused time are not started; a buffered one is). Idempotent."""
        while True:
            info = self.get(schedule_id)
            if info.status != S.PAUSED.value:
                return info
            now = self.core.clock()
            after = max(now, info.last_fire_epoch or now)
            nxt = next_fire(info.schedule, after)
            look = now if info.buffered_fire_epoch is not None else nxt
            changes: dict[str, Any] = {"updated_epoch": now, "last_fire_epoch": after}
            if look is None:
                changes.update(status=S.ENDED.value)
            else:
                changes.update(status=S.ACTIVE.value, next_fire_epoch=look)
            done = self.core.store.update_schedule(schedule_id, changes,
                                                   expect={"status": S.PAUSED.value})
            if done is not None:
                return done

    def delete(self, schedule_id: str) -> None:
        """Delete a schedule; runs it started go on.

        Raises:
            ScheduleNotFound: no such schedule.
        """
        if not self.core.store.delete_schedule(checked_id(schedule_id)):
            raise ScheduleNotFound(schedule_id)

    def backfill(self, schedule_id: str, start: float, end: float) -> list[str]:
        """Start the firings of ``[start, end]`` (overlap and catch-up do not apply), each
        with its firing's request id: one a sweep started already is not started again.
        Returns their run ids, oldest first.

        Raises:
            ScheduleNotFound: no such schedule.
            InvalidInput: an empty range, one reaching past now, or too many firings.
        """
        start, end = checked_time(start, "start"), checked_time(end, "end")
        info = self.get(schedule_id)
        now = self.core.clock()
        if end > now:
            raise InvalidInput(f"backfill of {schedule_id!r} ends at {end}, after now "
                               f"({now:.0f}); the schedule fires those itself", field="end")
        fires = backfill_fires(info.schedule, start, end)
        return [self._start(info.schedule, f) for f in fires]

    # -- firing ----------------------------------------------------------------------------

    def sweep(self, now: float, leases: SweepLeases) -> None:
        store = self.core.store
        seen = store.due_schedule_shards(now)  # one request (None: ask each shard)
        shards = [k for k in store.schedule_shards if seen is None or k in seen]
        reads = [self.core.submit(store.due_schedules, shard, now, DUE_PER_SHARD)
                 for shard in shards]
        for shard, read in zip(shards, reads, strict=True):
            due = read.result()
            # Another sweeper's shard: it fires these (fire() is safe twice; this saves
            # the reads).
            if not due or not leases.hold(shard):
                continue
            for schedule_id in due:
                try:
                    self.fire(schedule_id, now)
                except WhimbrelError as exc:  # one schedule must not stop the others
                    log.warning("schedule %s: %s", schedule_id, exc)

    def fire(self, schedule_id: str, now: float) -> list[str]:
        """Start what of one schedule is due at ``now`` and advance it; the run ids
        started (or found started). Safe to call from any number of sweepers at once."""
        info = self.core.store.get_schedule(schedule_id)
        if info is None or info.status != S.ACTIVE.value or info.next_fire_epoch is None \
                or info.next_fire_epoch > now:
            return []  # gone, paused, ended or advanced since the index read
        s = info.schedule
        started: list[str] = []
        last_run, buffered, skipped = info.last_run, info.buffered_fire_epoch, info.skipped
        error = info.last_error
        # Whether the previous firing's run is live matters only to skip and buffer_one
        # (one read of its workflow item); allow never asks.
        live = (s.overlap != "allow" or buffered is not None) and self._live(last_run)
        if buffered is not None and not live:  # the buffered firing's turn has come
            wx, error = self._try_start(s, buffered, started, error)
            last_run, buffered, live = wx or last_run, None, wx is not None
        fires = due_fires(s, info.last_fire_epoch, now)
        for fire in fires:
            action = overlap_action(s.overlap, live, buffered is not None)
            if action is OverlapAction.START:
                wx, error = self._try_start(s, fire, started, error)
                if wx is not None:
                    last_run, live = wx, True
            elif action is OverlapAction.BUFFER:
                buffered = fire
            else:
                skipped += 1
        last = fires[-1] if fires else info.last_fire_epoch
        after = fires[-1] if len(fires) == MAX_DUE_FIRES else max(now, last or now)
        nxt = next_fire(s, after)
        look = nxt if buffered is None else min(now, nxt if nxt is not None else now)
        changes: dict[str, Any] = {
            "last_fire_epoch": last if last is not None else now, "skipped": skipped,
            "last_run": last_run if last_run is not None else REMOVE,
            "buffered_fire_epoch": buffered if buffered is not None else REMOVE,
            "last_error": error if error is not None else REMOVE,
            "updated_epoch": self.core.clock()}
        if look is None:
            changes.update(status=S.ENDED.value, next_fire_epoch=REMOVE)
        else:
            changes["next_fire_epoch"] = look
        # Advance from exactly the fire this sweeper read: one sweeper's write lands.
        self.core.store.update_schedule(schedule_id, changes, expect={
            "status": S.ACTIVE.value, "next_fire_epoch": info.next_fire_epoch,
            "last_fire_epoch": info.last_fire_epoch})
        return started

    def _live(self, workflow_exec_id: str | None) -> bool:
        if workflow_exec_id is None:
            return False
        wf = self.core.store.get_workflow(workflow_exec_id)
        return wf is not None and wf.state in WORKFLOW_LIVE

    def _start(self, s: Schedule, fire: float) -> str:
        return self.core.start(s.workflow_name, s.input,
                               request_id=fire_request_id(s.schedule_id, fire),
                               source=f"schedule:{s.schedule_id}", write_request=False,
                               attributes=s.attributes)

    def _try_start(self, s: Schedule, fire: float, started: list[str],
                   error: str | None) -> tuple[str | None, str | None]:
        """Start one firing: its run id (None if it can never start) and the schedule's
        last error (this firing's reason, recorded on the schedule; the firings after it
        go on)."""
        try:
            wx = self._start(s, fire)
        except (DefinitionNotFound, InvalidInput) as exc:
            log.warning("schedule %s: firing %s not started: %s", s.schedule_id,
                        fire_request_id(s.schedule_id, fire), exc)
            return None, f"{fire_request_id(s.schedule_id, fire)}: {exc}"[:1000]
        started.append(wx)
        return wx, error

