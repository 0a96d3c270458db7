"""Suspend and resume a run (docs/contract.md, "Waits and suspension").

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
"""

from __future__ import annotations

from whimbrel.contract.errors import NotAllowedNow, StateConflict
from whimbrel.contract.records import Due, WorkflowRecord
from whimbrel.contract.states import (
    WorkflowState,
    WorkflowTransition,
    next_workflow_state,
    workflow_sources,
)
from whimbrel.engine import waits
from whimbrel.engine.engine import Engine
from whimbrel.engine.sweep import SweepReport, fire_timer, reconcile

W = WorkflowState
WT = WorkflowTransition


def _move(engine: Engine, workflow_exec_id: str, move: WorkflowTransition,
          actor: str | None) -> WorkflowRecord:
    """Make ``move`` (SUSPEND or RESUME) if the run is where it starts; the record as it
    is now, which must be where the move leads (it was there already, or got there).

    Raises:
        WorkflowNotFound: no such run.
        NotAllowedNow: the run is elsewhere (ended, failing, cancelled...).
    """
    wf = engine.workflow(workflow_exec_id)
    sources = workflow_sources(move)
    target = next_workflow_state(next(iter(sources)), move)
    if wf.state in sources:
        try:
            wf = engine.store.move_workflow(workflow_exec_id, sources, target, {},
                                            now=engine.clock(), actor=actor or engine.actor,
                                            workflow_name=wf.workflow_name)
        except StateConflict as lost:
            wf = lost.current if isinstance(lost.current, WorkflowRecord) \
                else engine.workflow(workflow_exec_id)
    if wf.state is not target:
        sources_text = "/".join(sorted(s.value for s in sources))
        raise NotAllowedNow(
            f"workflow {workflow_exec_id} is {wf.state.value}: only a {sources_text} "
            f"workflow can be {'suspended' if move is WT.SUSPEND else 'resumed'}",
            workflow_exec_id=workflow_exec_id, workflow_state=wf.state.value)
    return wf


def suspend(engine: Engine, workflow_exec_id: str, *,
            actor: str | None = None) -> WorkflowRecord:
    """Suspend a RUNNING run (a SUSPENDED one: nothing to do). Idempotent.

    Raises:
        WorkflowNotFound: no such run.
        NotAllowedNow: the run is neither RUNNING nor SUSPENDED.
    """
    wf = _move(engine, workflow_exec_id, WT.SUSPEND, actor)
    # The move first, then the activities: an external readied by a hand-off that read
    # the workflow before the move is seen here and leaves the claimable index.
    waits.repair_claims(engine, wf, engine.definition_of(wf),
                        engine.store.list_activities(workflow_exec_id))
    return wf


def resume(engine: Engine, workflow_exec_id: str, *,
           actor: str | None = None) -> WorkflowRecord:
    """Resume a SUSPENDED run (a RUNNING one: its resume is finished, if a crash left it
    half done). Idempotent.

    Raises:
        WorkflowNotFound: no such run.
        NotAllowedNow: the run is neither SUSPENDED nor RUNNING.
    """
    _move(engine, workflow_exec_id, WT.RESUME, actor)
    now = engine.clock()
    reconcile(engine, workflow_exec_id, now)
    fire_due(engine, workflow_exec_id, now)
    return engine.workflow(workflow_exec_id)


def fire_due(engine: Engine, workflow_exec_id: str, now: float) -> SweepReport:
    """Fire the run's deadlines that are due (those held while it was suspended), as the
    next sweep would."""
    report = SweepReport(now=now)
    if engine.workflow(workflow_exec_id).state is not W.RUNNING:
        return report
    for act in engine.store.list_activities(workflow_exec_id):
        if act.state in waits.NOT_LAUNCHED and act.timer_epoch is not None \
                and act.timer_epoch <= now:
            fire_timer(engine, Due(workflow_exec_id, act.activity_exec_id), now, report)
    return report
