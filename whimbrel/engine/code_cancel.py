"""A cancelled code run's clean-up (docs/code-workflows.md, "Clean-up on cancel").

A cancel moves the run to CANCEL_REQUESTED and stops its steps, as for any run. Where a
DAG run would then end CANCELLED (nothing runs any more), a code run makes one more
decision instead: the replay raises ``Cancelled`` at the wait the cancel cut
(contract/code/cancel.py), so the function's ``finally`` and ``except Cancelled`` run.
Steps the clean-up asks for are scheduled as ordinary attempts of the run, marked on
their rows (``step``'s ``cleanup``) so that the run's settle does not stop them; each
one's end settles the run again, which decides again; and once the function ends
(``Cancelled`` let out, another exception, a return) the run ends CANCELLED.

Exactly once, as for every decision: a clean-up step's first attempt is created with
``attribute_not_exists`` under its ``<name>#<k>`` (the replay numbers it from the run's
history), and the end is the conditional CANCEL_REQUESTED → CANCELLED; a decision left
for a worker is keyed by what asked for it (how many clean-up steps had ended, the
run's reconcile visit), so a redelivered settle leaves one entry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from whimbrel.contract.code import CodeDefinition, Decision, History, is_cleanup_step
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.engine.feature import Core

log = logging.getLogger("whimbrel.engine.code")

W = WorkflowState

#: The error a run ends with when a caller cancels it again during its clean-up.
CANCELLED_AGAIN = "cancelled again while its code cleaned up"

#: Makes (or leaves for a worker) a decision of a run: ``(wf, defn, why)``.
Decide = Callable[[WorkflowRecord, CodeDefinition, str], None]


def cleaning(wf: WorkflowRecord) -> bool:
    """Whether a decision of ``wf`` is a clean-up decision (its run is being cancelled)."""
    return wf.state is W.CANCEL_REQUESTED


def cleans_up(wf: WorkflowRecord) -> bool:
    """Whether a cancelled run's code gets its clean-up: it ran (a run cancelled while
    QUEUED or starting has no code under way) and had not failed (a failing run's code
    already ended, with its error; it ends CANCELLED as any run does)."""
    return not wf.error and any(h.state == W.RUNNING.value for h in wf.history)


def moving(wf: WorkflowRecord) -> WorkflowRecord:
    """``wf`` as a clean-up step's move sees it: a clean-up step is planned, admitted and
    launched as a step of a running run is (its run is CANCEL_REQUESTED only because its
    code is cleaning up); every other run as it is."""
    return replace(wf, state=W.RUNNING) if cleaning(wf) else wf


def settle(core: Core, wf: WorkflowRecord, defn: CodeDefinition, decide: Decide, *,
           again: bool, actor: str | None = None) -> None:
    """Settle a code run in CANCEL_REQUESTED: stop what ran before the cancel (clean-up
    steps run on), and once nothing runs, its next clean-up decision. ``again``: a
    caller (``actor``: the end is recorded under it, so that a redelivery of its row is
    recognised) cancelled it once more, which ends it CANCELLED at once (what its
    clean-up still runs is asked to stop)."""
    wx = wf.workflow_exec_id
    if again:
        core.ending.end_workflow(wf, defn, [W.CANCEL_REQUESTED], W.CANCELLED,
                                 error=CANCELLED_AGAIN, actor=actor)
        core.ending.settle(wx)  # ended: its clean-up steps are stopped like any straggler
        return
    acts = core.store.list_activities(wx)
    cleanup = [a for a in acts if is_cleanup_step(a.step)]
    # Every attempt from before the cancel is asked to stop (no short cut: all of them).
    running = [a for a in acts if not is_cleanup_step(a.step)
               and core.ending.stop_activity(a, defn, ask_running=True)]
    if running or any(_going(a) for a in cleanup):
        return  # the end of the last of them settles the run again
    # Keyed by what asked: one entry per clean-up step that ended (a redelivered settle
    # finds it), and one per reconcile visit (a decision that died is asked again).
    decide(wf, defn, f"cancel/{wf.redrives}/{len(cleanup)}/{wf.check_epoch}")


def _going(act: ActivityRecord) -> bool:
    """A clean-up step on its way: its end settles the run again. One still REQUESTED
    was created by a decision that died before moving it on: the next decision does."""
    return act.state is not None and not act.state.is_terminal \
        and act.state is not ActivityState.REQUESTED


def end(core: Core, wf: WorkflowRecord, defn: CodeDefinition, history: History,
        decision: Decision, properties: dict[str, str]) -> None:
    """The clean-up is over (the function ended, however): the run ends CANCELLED —
    never COMPLETED — with the error its clean-up raised, if another than ``Cancelled``;
    clean-up steps started and never awaited are asked to stop."""
    error = None
    if decision.outcome == "failed":
        error = f"clean-up failed: {decision.error}"
    elif decision.outcome == "continued":
        error = "continue_as_new during clean-up: no new run is started"
    log.info("code run %s cleaned up (%s)", wf.workflow_exec_id, decision.outcome)
    if core.ending.end_workflow(wf, defn, [W.CANCEL_REQUESTED], W.CANCELLED, error=error,
                                extra=properties) \
            and any(not s.final for s in history.steps.values()):
        core.ending.settle(wf.workflow_exec_id)  # only then: a listing less per cancel
