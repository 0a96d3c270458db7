"""Nudge: the sweep's work for one run, now (``Whimbrel.nudge``, ``whimbrel nudge RUN``).

A run waits for the sweep to notice what went wrong with it: a lost attempt row until
its next reconcile visit (up to an hour apart for an old run), a due deadline until the
next pass, a slot its ended attempt never gave back until the slot's check. A nudge does
all of that for one run at once, costing what the run holds — one Query of its attempts,
the reads and writes of what is due — never a pass over every shard.

It is the sweep's own code (``sweep.fire_timer``, ``sweep.reconcile``, the pools' release
hooks) run on one run's rows, so it obeys the same conditional writes: a nudge racing
the sweep, a worker or another nudge repairs nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from whimbrel.contract.errors import WorkflowNotFound
from whimbrel.contract.pools import base_pool, parse_slot_ref, slot_ref
from whimbrel.contract.records import ActivityRecord, Due, WorkflowRecord
from whimbrel.contract.states import ActivityState
from whimbrel.engine.engine import Engine
from whimbrel.engine.pool_keys import lost_pool
from whimbrel.engine.pool_port import PoolPort
from whimbrel.engine.pools import Pools
from whimbrel.engine.sweep import SweepReport, fire_timer, reconcile

A = ActivityState


@dataclass
class NudgeReport:
    """What one nudge did to its run. Lists hold activity execution ids.

    Attributes:
        workflow_exec_id: the run.
        outcome: the reconcile visit's: ``"repaired"`` (something was left half done and
            now is done), ``"timed_out"`` (the run's own deadline had passed) or
            ``"checked"`` (in order).
        state: the run's state after the nudge.
        timed_out: attempts past a deadline, now TIMED_OUT.
        retries_launched: retries whose back-off had passed, now launched.
        timers_fired: timer waits that came due.
        cancelled: due attempts of a run that no longer runs, stopped.
        released: pool slots (``pool#k``) an ended attempt, or the ended run, still held.
    """

    workflow_exec_id: str
    outcome: str = "checked"
    state: str = ""
    timed_out: list[str] = field(default_factory=list)
    retries_launched: list[str] = field(default_factory=list)
    timers_fired: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether the nudge had anything to do."""
        return self.outcome != "checked" or bool(
            self.timed_out or self.retries_launched or self.timers_fired or self.cancelled
            or self.released)

    def to_dict(self) -> dict[str, object]:
        return {"workflow_exec_id": self.workflow_exec_id, "outcome": self.outcome,
                "state": self.state, "timed_out": self.timed_out,
                "retries_launched": self.retries_launched,
                "timers_fired": self.timers_fired, "cancelled": self.cancelled,
                "released": self.released}


def nudge(engine: Engine, wx: str, now: float | None = None) -> NudgeReport:
    """Reconcile run ``wx`` now: fire its attempts' due deadlines, then its reconcile
    visit (lost rows, dependents a lost follow-up never released, a half-done start,
    redrive or end), then give back the pool slots its ended attempts (or the ended run)
    still hold. Idempotent.

    Raises:
        WorkflowNotFound: no such execution.
    """
    now = engine.clock() if now is None else now
    wf = engine.store.get_workflow(wx)
    if wf is None:
        raise WorkflowNotFound(wx)
    report = NudgeReport(workflow_exec_id=wx)
    acts = engine.store.list_activities(wx)
    swept = SweepReport(now=now)
    for act in _due(acts, now):
        fire_timer(engine, Due(act.workflow_exec_id, act.activity_exec_id), now, swept)
    report.timed_out = swept.timed_out
    report.retries_launched = swept.retries_launched
    report.cancelled = swept.cancelled
    report.timers_fired = swept.timers_fired
    report.outcome = reconcile(engine, wx, now)
    if report.changed:  # what it changed may have ended attempts (or made LOST ones)
        acts = engine.store.list_activities(wx)
    fresh = engine.store.get_workflow(wx) or wf
    _release(engine, fresh, acts, report)
    report.state = fresh.state.value
    return report


def _release(engine: Engine, wf: WorkflowRecord, acts: list[ActivityRecord],
             report: NudgeReport) -> None:
    """Give back what ended attempts (and the ended run) still hold: a release lost to a
    crash between an end's write and its follow-up, or the slot of an attempt whose row
    vanished (its LOST tombstone does not know the slot: the pool's slots are asked)."""
    pools = engine.feature(Pools)
    defn = engine.definitions.definition_of(wf)
    for act in acts:
        if act.state is None or not act.state.is_terminal:
            continue  # a live attempt's slot is its own
        ref = _held_slot(engine, act.pool_slot, act.activity_exec_id)
        if ref is None and act.state is A.LOST and act.pool_slot is None:
            ref = _slot_of_lost(engine, lost_pool(engine, wf, defn, act),
                                act.activity_exec_id)
        if ref is not None:
            # The pools' own end hook: releases only this holder's slot (a conditional
            # write), then wakes the pool's first waiter.
            pools.attempt_ended(replace(act, pool_slot=ref))
            report.released.append(ref)
    if wf.state.is_terminal:
        ref = _held_slot(engine, wf.pool_slot, wf.workflow_exec_id)
        if ref is not None:  # a run's end whose release was lost (max_running)
            pools.ended(wf)
            report.released.append(ref)


def _due(acts: list[ActivityRecord], now: float) -> list[ActivityRecord]:
    """Attempts whose armed deadline has come (what the ``timers`` index would list)."""
    return sorted((a for a in acts if a.timer_epoch is not None and a.timer_epoch <= now),
                  key=lambda a: (float(a.timer_epoch or 0.0), a.activity_exec_id))


def _held_slot(engine: Engine, ref: str | None, holder: str) -> str | None:
    """``ref`` when the slot it names is still held by ``holder`` (one read)."""
    if not ref:
        return None
    pool, k = parse_slot_ref(ref)
    if k is None or engine.store.part(PoolPort).get_slot(pool, k).holder != holder:
        return None
    return ref


def _slot_of_lost(engine: Engine, pool: str | None, holder: str) -> str | None:
    """The slot of ``pool`` still held by ``holder`` (a lost attempt), if any."""
    if pool is None:
        return None
    info = engine.store.part(PoolPort).get_pool_settings(base_pool(pool))  # a key's: its pool's
    high = max(info.slots or 0, info.slots_high or 0) if info is not None else 0
    held = engine.store.part(PoolPort).held_slots(pool, high) if high else []
    return next((slot_ref(pool, s.k) for s in held if s.holder == holder), None)
