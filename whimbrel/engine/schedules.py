"""Schedules (issue 22): workflows started on a cron or a rate, fired by the sweep.

A schedule is one item of the ``schedule`` table (store/schedules.py). While ACTIVE it
is in the sparse, sharded ``due_schedules`` index under the time the sweep must next
look at it; each sweep pass asks every shard at once for what is due (cost grows with
what is due, not with how many schedules exist) and, for each due schedule:

1. finds the due firings (the pure :func:`~whimbrel.contract.schedules.due_fires`,
   which applies ``catchup_seconds``) and applies the overlap policy to each (the
   previous firing's run still live: ``skip`` drops it and counts it, ``buffer_one``
   keeps one to start when that run has ended, ``allow`` starts it anyway);
2. writes that decision with one conditional write, on the fire it advances from (the
   ``last_fire_epoch`` and ``next_fire_epoch`` it read, ACTIVE, no decision pending):
   of several sweepers, one decides, so two sweepers that saw the previous run live
   and ended never both act (issue 31). The firings to start are kept on the item
   (``starting``) and the schedule stays due;
3. starts them as ``start`` with the request id ``<schedule_id>@<fire time>``: a firing
   started again (by another sweeper that read the decision, or after a crash) starts
   the same run (the run id derives from the request id), so **one run per fire
   time**; then records them (``last_run``) and moves the schedule to its next look.

A crash after 2 leaves the decision on a due schedule: the next sweep starts the same
runs (no-ops) and records them. A stored item this version cannot read (a field of a
wrong type, a value it does not know) is skipped and reported, each pass, and every
other schedule fires (``whimbrel.contract.stored``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from whimbrel.contract.errors import (
    DefinitionNotFound,
    InvalidInput,
    NotAllowedNow,
    NotFound,
    WhimbrelError,
)
from whimbrel.contract.records import REMOVE
from whimbrel.contract.schedule_info import (
    ScheduleInfo,
    ScheduleStatus,
    checked_id,
    checked_time,
)
from whimbrel.contract.schedules import (
    MAX_DUE_FIRES,
    OverlapAction,
    Schedule,
    backfill_fires,
    due_fires,
    fire_request_id,
    next_fire,
    overlap_action,
)
from whimbrel.contract.states import WORKFLOW_LIVE
from whimbrel.contract.waits import check_input
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.metrics import report_sweep_error
from whimbrel.engine.schedule_port import SchedulePort

if TYPE_CHECKING:
    from whimbrel.engine.leases import SweepLeases

log = logging.getLogger("whimbrel.schedules")

S = ScheduleStatus
#: Due schedules one sweep pass takes from each shard (the rest wait for the next).
DUE_PER_SHARD = 100
#: How far past schedules left due (odd items) a pass reads a shard, in pages.
MAX_PAGES_PER_SHARD = 10


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
        #: The schedule table: the store's part for this feature's port.
        self.schedule_port = core.store.part(SchedulePort)
        #: Due schedules one sweep pass takes from each shard's first page.
        self.due_per_shard = DUE_PER_SHARD

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
        _, defn = self.core.definitions.definition(schedule.workflow_name)  # refuses an unknown one
        check_input(defn.activities, schedule.input)  # what every firing's start checks
        now = self.core.clock()
        existing = self.schedule_port.get_schedule(schedule.schedule_id)
        if existing is None:
            first = next_fire(schedule, now)
            if first is None:
                raise InvalidInput(f"schedule {schedule.schedule_id!r} fires no more after "
                                   f"now (end_at {schedule.end_at})", field="end_at")
            info = ScheduleInfo(schedule=schedule, status=S.ACTIVE.value, last_fire_epoch=now,
                                next_fire_epoch=first, created_epoch=now)
            if self.schedule_port.put_schedule(info, now):
                return info
            # a racing create
            existing = self.schedule_port.get_schedule(schedule.schedule_id)
        if existing is not None and existing.schedule.to_dict() == schedule.to_dict():
            return existing  # the same create again: nothing to do
        raise ScheduleConflict(
            f"schedule {schedule.schedule_id!r} exists with another spec; delete it and "
            "create it again to change it", schedule_id=schedule.schedule_id)

    def get(self, schedule_id: str) -> ScheduleInfo:
        info = self.schedule_port.get_schedule(checked_id(schedule_id))
        if info is None:
            raise ScheduleNotFound(schedule_id)
        return info

    def listed(self) -> list[ScheduleInfo]:
        """Every schedule, by id."""
        return sorted(self.schedule_port.list_schedules(), key=lambda i: i.schedule_id)

    def pause(self, schedule_id: str) -> ScheduleInfo:
        """Take an ACTIVE schedule out of the due index (idempotent; a buffered firing
        is kept for the resume)."""
        while True:
            info = self.get(schedule_id)
            if info.status != S.ACTIVE.value:
                return info
            if info.starting:  # firings decided before the pause start first
                self._record_starts(info)
                continue
            done = self.schedule_port.update_schedule(schedule_id, {
                "status": S.PAUSED.value, "next_fire_epoch": REMOVE,
                "updated_epoch": self.core.clock()},
                # Still ACTIVE, and no firing decided meanwhile (it would wait unstarted).
                expect={"status": S.ACTIVE.value, "starting": None})
            if done is not None:
                return done

    def resume(self, schedule_id: str) -> ScheduleInfo:
        """Put a PAUSED schedule back: it fires from its first fire time after now (the
        firings of the paused time are not started; a buffered one is). Idempotent.

        Raises:
            InvalidInput: its stored item is one this version cannot act on.
        """
        while True:
            info = self.get(schedule_id)
            if info.status != S.PAUSED.value:
                return info
            info.actionable("resumed")
            now = self.core.clock()
            after = max(now, info.last_fire_epoch or now)
            nxt = next_fire(info.schedule, after)
            look = now if info.buffered_fire_epoch is not None else nxt
            changes: dict[str, Any] = {"updated_epoch": now, "last_fire_epoch": after}
            if look is None:
                changes.update(status=S.ENDED.value)
            else:
                changes.update(status=S.ACTIVE.value, next_fire_epoch=look)
            done = self.schedule_port.update_schedule(schedule_id, changes,
                                                   expect={"status": S.PAUSED.value})
            if done is not None:
                return done

    def delete(self, schedule_id: str) -> None:
        """Delete a schedule; runs it started go on.

        Raises:
            ScheduleNotFound: no such schedule.
        """
        if not self.schedule_port.delete_schedule(checked_id(schedule_id)):
            raise ScheduleNotFound(schedule_id)

    def backfill(self, schedule_id: str, start: float, end: float) -> list[str]:
        """Start the firings of ``[start, end]`` (overlap and catch-up do not apply), each
        with its firing's request id: one a sweep started already is not started again.
        Returns their run ids, oldest first.

        Raises:
            ScheduleNotFound: no such schedule.
            InvalidInput: an empty range, one reaching past now, or too many firings; a
                stored item this version cannot act on.
        """
        start, end = checked_time(start, "start"), checked_time(end, "end")
        info = self.get(schedule_id).actionable("backfilled")
        now = self.core.clock()
        if end > now:
            raise InvalidInput(f"backfill of {schedule_id!r} ends at {end}, after now "
                               f"({now:.0f}); the schedule fires those itself", field="end")
        fires = backfill_fires(info.schedule, start, end)
        return [self._start(info.schedule, f) for f in fires]

    # -- firing ----------------------------------------------------------------------------

    def sweep(self, now: float, leases: SweepLeases) -> None:
        port = self.schedule_port
        seen = port.due_schedule_shards(now)  # one request (None: ask each shard)
        shards = [k for k in port.schedule_shards if seen is None or k in seen]
        reads = [self.core.threads.submit(port.due_schedules, shard, now,
                                          self.due_per_shard)
                 for shard in shards]
        for shard, read in zip(shards, reads, strict=True):
            due = read.result()
            # Another sweeper's shard: it fires these (fire() is safe twice; this saves
            # the reads).
            if due and leases.hold(shard):
                self._sweep_shard(shard, now, due)

    def _sweep_shard(self, shard: str, now: float, due: list[str]) -> None:
        """Fire the due schedules of one shard, oldest first. One left due (an odd item,
        skipped; one that raised) stays at the head of the shard's page, so past such
        ones the page is read further: however many there are (up to
        ``MAX_PAGES_PER_SHARD`` pages), every other due schedule fires."""
        done: set[str] = set()
        limit = self.due_per_shard
        while True:
            left_due = 0
            for schedule_id in due:
                if schedule_id in done:
                    continue
                done.add(schedule_id)
                try:
                    if self._fire(schedule_id, now) is None:
                        left_due += 1
                except Exception as exc:  # one schedule, whatever it raises, never stops
                    # the others (as a timer or a reconcile visit in sweep.py)
                    left_due += 1
                    log.warning("schedule %s: %s", schedule_id, exc,
                                exc_info=not isinstance(exc, WhimbrelError))
                    report_sweep_error(self.core.metrics, "schedule", schedule_id, exc)
            if not left_due or len(due) < limit \
                    or limit >= MAX_PAGES_PER_SHARD * self.due_per_shard:
                return
            limit += left_due
            due = self.schedule_port.due_schedules(shard, now, limit)

    def fire(self, schedule_id: str, now: float) -> list[str]:
        """Start what of one schedule is due at ``now`` and advance it; the run ids
        started (or found started). Safe to call from any number of sweepers at once.

        Two writes to the schedule when a firing starts a run (issue 31): the first
        *decides* (which firings start, which are skipped or buffered), conditional on
        the fire it advances from, so of several sweepers one decides; the runs are
        started after it, and the second write records them. A sweeper that lost the
        decision starts nothing of its own: ``overlap="skip"`` holds even when the
        previous run ends between two sweepers' reads of it."""
        return self._fire(schedule_id, now) or []

    def _fire(self, schedule_id: str, now: float) -> list[str] | None:
        """``fire``; None when the schedule was left due: its stored item is odd."""
        info = self.schedule_port.get_schedule(schedule_id)
        if info is None or info.next_fire_epoch is None or info.next_fire_epoch > now:
            return []  # gone, paused, ended or advanced since the index read
        if info.problem is not None:
            # Not this version's to act on (a field a newer version wrote, a hand edit):
            # skipped and said every pass, and left as it is for a version that can.
            log.warning("schedule %s skipped: %s", schedule_id, info.problem)
            self.core.incidents.count("schedule_skipped_odd")
            report_sweep_error(self.core.metrics, "schedule", schedule_id,
                               InvalidInput(info.problem, field="schedule"))
            return None
        if info.status != S.ACTIVE.value:
            return []
        if info.starting:  # decided, by this or another sweeper (maybe one that died)
            return self._record_starts(info)
        decided = self.schedule_port.update_schedule(
            schedule_id, self._decide(info, now),
            # From exactly the fire this sweeper read, and with no decision pending: one
            # sweeper's decision lands.
            expect={"status": S.ACTIVE.value, "next_fire_epoch": info.next_fire_epoch,
                    "last_fire_epoch": info.last_fire_epoch, "starting": None})
        if decided is None or not decided.starting:
            return []
        return self._record_starts(decided)

    def _decide(self, info: ScheduleInfo, now: float) -> dict[str, Any]:
        """The first write of a firing: the fires to start (kept in ``starting`` with
        the schedule's next look, the schedule left due until they are recorded), the
        ones skipped or buffered, and how far the schedule advances."""
        s = info.schedule
        buffered, skipped = info.buffered_fire_epoch, info.skipped
        start: list[float] = []
        # Whether the previous firing's run is live matters only to skip and buffer_one
        # (one read of its workflow item); allow never asks.
        live = (s.overlap != "allow" or buffered is not None) and self._live(info.last_run)
        if buffered is not None and not live:  # the buffered firing's turn has come
            start.append(buffered)
            buffered, live = None, True
        fires = due_fires(s, info.last_fire_epoch, now)
        for fire in fires:
            action = overlap_action(s.overlap, live, buffered is not None)
            if action is OverlapAction.START:
                start.append(fire)
                live = True
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
            "buffered_fire_epoch": buffered if buffered is not None else REMOVE,
            "updated_epoch": self.core.clock()}
        if start:
            # The look stays as read (due) until the runs are recorded.
            changes["starting"] = {"fires": start} if look is None else \
                {"fires": start, "next": look}
        elif look is None:
            changes.update(status=S.ENDED.value, next_fire_epoch=REMOVE)
        else:
            changes["next_fire_epoch"] = look
        return changes

    def _record_starts(self, info: ScheduleInfo) -> list[str]:
        """Start the decided firings (again: their request ids make that a no-op for
        those started) and record them; the schedule moves on to its next look."""
        started: list[str] = []
        last_run, error = info.last_run, info.last_error
        for fire in info.starting:
            wx, error = self._try_start(info.schedule, fire, started, error)
            last_run = wx or last_run
        changes: dict[str, Any] = {
            "starting": REMOVE, "last_run": last_run if last_run is not None else REMOVE,
            "last_error": error if error is not None else REMOVE,
            "updated_epoch": self.core.clock()}
        if info.next_after_start is None:
            changes.update(status=S.ENDED.value, next_fire_epoch=REMOVE)
        else:
            changes["next_fire_epoch"] = info.next_after_start
        # Only the decision these runs belong to (its look, still pending): of several
        # sweepers recording it, one writes.
        self.schedule_port.update_schedule(info.schedule_id, changes, expect={
            "status": S.ACTIVE.value, "next_fire_epoch": info.next_fire_epoch,
            "last_fire_epoch": info.last_fire_epoch, "starting": info.starting_attribute()})
        return started

    def _live(self, workflow_exec_id: str | None) -> bool:
        if workflow_exec_id is None:
            return False
        wf = self.core.store.get_workflow(workflow_exec_id)
        return wf is not None and wf.state in WORKFLOW_LIVE

    def _start(self, s: Schedule, fire: float) -> str:
        return self.core.starting.start(s.workflow_name, s.input,
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
