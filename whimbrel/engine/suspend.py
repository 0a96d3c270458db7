"""Suspend and resume a run (a feature; docs/contract.md, "Waits and suspension").

``SUSPEND`` (RUNNING → SUSPENDED) pauses a run without touching what is in flight:
nothing new is queued, launched or claimed, activities already running run to their end
and their ends are recorded (dependents become READY, and wait there), signals and
decisions are still received, and deadlines of attempts that have not started are held
by the sweep. ``RESUME`` (SUSPENDED → RUNNING) lets it go on: what became due while it
was suspended starts at once.

Each is one conditional write on the workflow item, then a pass over its activities that
the reconciler redoes if the process dies in between: the suspend takes READY pull
attempts out of the ``claimable`` index; the resume is a reconcile visit (READY attempts
launched or made claimable again, held deadlines re-armed, due retries launched, a run
whose activities all completed ends), then fires the deadlines that fell due.

While the run is SUSPENDED the sweep *holds* the deadlines of attempts that have not
started (READY, REQUESTED) instead of acting on them: ``held_epoch`` keeps the deadline
and the timer is disarmed, so held items cost the sweep nothing; the reconcile pass after
a resume re-arms them (``rearm``) and the resume fires what is due.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import NotAllowedNow, StateConflict
from whimbrel.contract.records import REMOVE, ActivityRecord, Due, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_NOT_LAUNCHED,
    WORKFLOW_PAUSABLE,
    ActivityState,
    WorkflowState,
    WorkflowTransition,
    next_workflow_state,
    workflow_sources,
)
from whimbrel.engine.admission import claim_intent
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.sweep import SweepReport, fire_timer, reconcile

A = ActivityState
W = WorkflowState
WT = WorkflowTransition


class Suspend(Feature):
    """What a SUSPENDED run changes: no claims, held deadlines (and their repair)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def ready(self, spec: ActivityDefinition, wf: WorkflowRecord, now: float,
              changes: dict[str, Any]) -> None:
        if wf.state is W.SUSPENDED:  # the resume puts it in the claimable index
            changes.pop("claimable", None)

    def due(self, item: ActivityRecord, defn: WorkflowDefinition, run: Callable[[], Any],
            now: float, actor: str) -> str | None:
        if item.state not in ACTIVITY_NOT_LAUNCHED:
            return None
        wf = run()
        if wf is None or wf.state is not W.SUSPENDED:
            return None
        hold(self.core, item)
        return "held"

    def reconcile(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        """Make the ``claimable`` index agree with the run's state (after a suspend or
        resume that died half-way); a RUNNING run's held deadlines are re-armed."""
        if wf.state not in WORKFLOW_PAUSABLE:
            return False
        changed = repair_claims(self.core, wf, defn, acts)
        if wf.state is W.RUNNING:
            for act in acts:
                changed |= rearm(self.core, act)
        return changed

    # -- its operations (engine.feature(Suspend).op) -----------------------------------

    def suspend(self, workflow_exec_id: str, *,
                actor: str | None = None) -> WorkflowRecord:
        """Suspend a RUNNING run (a SUSPENDED one: nothing to do). Idempotent.

        Raises:
            WorkflowNotFound: no such run.
            NotAllowedNow: the run is neither RUNNING nor SUSPENDED.
        """
        wf = _move(self.core, workflow_exec_id, WT.SUSPEND, actor)
        # The move first, then the activities: an external readied by a hand-off that read
        # the workflow before the move is seen here and leaves the claimable index.
        repair_claims(self.core, wf, self.core.definitions.definition_of(wf),
                            self.core.store.list_activities(workflow_exec_id))
        return wf

    def resume(self, workflow_exec_id: str, *,
               actor: str | None = None) -> WorkflowRecord:
        """Resume a SUSPENDED run (a RUNNING one: its resume is finished, if a crash left it
        half done). Idempotent.

        Raises:
            WorkflowNotFound: no such run.
            NotAllowedNow: the run is neither SUSPENDED nor RUNNING.
        """
        _move(self.core, workflow_exec_id, WT.RESUME, actor)
        now = self.core.clock()
        reconcile(self.core, workflow_exec_id, now)
        fire_due(self.core, workflow_exec_id, now)
        return self.core.reads.workflow(workflow_exec_id)


def _move(engine: Core, workflow_exec_id: str, move: WorkflowTransition,
          actor: str | None) -> WorkflowRecord:
    """Make ``move`` (SUSPEND or RESUME) if the run is where it starts; the record as it
    is now, which must be where the move leads (it was there already, or got there).

    Raises:
        WorkflowNotFound: no such run.
        NotAllowedNow: the run is elsewhere (ended, failing, cancelled...).
    """
    wf = engine.reads.workflow(workflow_exec_id)
    sources = workflow_sources(move)
    target = next_workflow_state(next(iter(sources)), move)
    if wf.state in sources:
        try:
            wf = engine.store.move_workflow(workflow_exec_id, sources, target, {},
                                            now=engine.clock(), actor=actor or engine.actor,
                                            workflow_name=wf.workflow_name)
        except StateConflict as lost:
            wf = lost.current if isinstance(lost.current, WorkflowRecord) \
                else engine.reads.workflow(workflow_exec_id)
    if wf.state is not target:
        sources_text = "/".join(sorted(s.value for s in sources))
        raise NotAllowedNow(
            f"workflow {workflow_exec_id} is {wf.state.value}: only a {sources_text} "
            f"workflow can be {'suspended' if move is WT.SUSPEND else 'resumed'}",
            workflow_exec_id=workflow_exec_id, workflow_state=wf.state.value)
    return wf


def fire_due(engine: Core, workflow_exec_id: str, now: float) -> SweepReport:
    """Fire the run's deadlines that are due (those held while it was suspended), as the
    next sweep would."""
    report = SweepReport(now=now)
    if engine.reads.workflow(workflow_exec_id).state is not W.RUNNING:
        return report
    for act in engine.store.list_activities(workflow_exec_id):
        if act.state in ACTIVITY_NOT_LAUNCHED and act.timer_epoch is not None \
                and act.timer_epoch <= now:
            fire_timer(engine, Due(workflow_exec_id, act.activity_exec_id), now, report)
    return report


# -- held deadlines and claims ------------------------------------------------------------

def hold(engine: Core, item: ActivityRecord) -> None:
    """Keep a due deadline of a SUSPENDED run aside (``held_epoch``) and disarm it.

    Written first, then the workflow read again: a resume that listed the activities
    before this write landed is seen here, and the deadline is re-armed at once.
    """
    state = item.state
    assert state is not None and item.timer_epoch is not None
    held = {"held_epoch": item.timer_epoch, "timer_epoch": REMOVE}
    if not engine.store.try_set_activity(item.activity_exec_id, held, states=[state]):
        return  # it moved on since the index read
    fresh = engine.store.get_workflow(item.workflow_exec_id)
    if fresh is not None and fresh.state is not W.SUSPENDED:
        rearm(engine, item.with_changes(held_epoch=item.timer_epoch))


def rearm(engine: Core, item: ActivityRecord) -> bool:
    """Arm a held deadline again (on resume, or by the reconciler); True if it did."""
    if item.held_epoch is None or item.state is None:
        return False
    return engine.store.try_set_activity(
        item.activity_exec_id, {"timer_epoch": item.held_epoch, "held_epoch": REMOVE},
        states=[item.state])


def repair_claims(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord]) -> bool:
    """Make the ``claimable`` index agree with the run's state: READY pull attempts are
    in it while the run is RUNNING and out of it while SUSPENDED. True if it changed
    anything (after a suspend or resume that died half-way, or a hand-off racing them)."""
    claimable = wf.state is W.RUNNING
    changed = False
    for act in acts:
        spec = defn.activity(act.activity_name)  # a map's item: its map's
        if act.state is not A.READY or not (spec.launcher.is_pull
                                            or spec.launcher.needs_worker):
            continue
        if claimable == (act.claim_key is not None) or (
                claimable and spec.pool is not None and act.pool_slot is None):
            continue  # as it should be, or not admitted by its pool (engine/pools.py)
        # The key a claim filters on: the activity's name (a map item's: its map's), then
        # where it is served (priority, then the longest waiting).
        intent: Any = (act.workflow_name, spec.name,
                       *claim_intent(spec, wf, act.ready_epoch)) if claimable else REMOVE
        changed |= engine.store.try_set_activity(act.activity_exec_id,
                                                 {"claimable": intent}, states=[A.READY])
    return changed
