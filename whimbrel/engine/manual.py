"""Operator actions that are not part of the automatic flow: a manual retry.

``retry_activity`` re-runs a FAILED or TIMED_OUT activity as a new attempt, the same way
the engine's automatic retry does (a new row ``attempt + 1``, created with
``attribute_not_exists``, then moved on by :meth:`Engine._ready_and_launch`). The
terminal attempt itself never changes (docs/contract.md, "Activity transitions").

Semantics (docs/cli.md, ``whimbrel retry``):

* Only while the workflow is ``RUNNING``. Once it is ``FAILED_WAITING`` its failure is
  decided: ``settle`` cancels whatever has not started, and the workflow contract has no
  move back to ``RUNNING``; a retry then could only produce a run whose result is
  ignored. A ``FAILED`` / ``CANCELLED`` / ``COMPLETED`` workflow is terminal. In those
  cases the caller gets :class:`RetryNotAllowed`; an ended run can be redriven
  (``engine/redrive.py``) or started anew.
* When the next attempt already exists and waits for its back-off (an automatic retry
  is scheduled), the manual retry launches that attempt now instead of creating another.
* Idempotent under races: two operators retrying together create the one row
  ``attempt + 1`` and only the winner of the ``READY``/``QUEUED`` write launches it.
"""

from __future__ import annotations

from whimbrel.contract.dataflow import is_map_node
from whimbrel.contract.errors import NotAllowedNow
from whimbrel.contract.ids import activity_exec_id, parse_activity_exec_id
from whimbrel.contract.states import ACTIVITY_FAILED, ActivityState, WorkflowState
from whimbrel.engine.engine import Engine
from whimbrel.engine.views import ActivityExec

A = ActivityState
W = WorkflowState

RETRYABLE_STATES = ACTIVITY_FAILED


class RetryNotAllowed(NotAllowedNow):
    """A manual retry is not possible now; the message says why and what to do."""

    def __init__(self, message: str, *, activity_exec_id: str, state: str,
                 workflow_state: str | None = None) -> None:
        super().__init__(message, activity_exec_id=activity_exec_id, state=state,
                         workflow_state=workflow_state)
        self.activity_exec_id = activity_exec_id
        self.state = state
        self.workflow_state = workflow_state


def retry_activity(engine: Engine, activity_exec_id_: str, *,
                   actor: str = "operator") -> ActivityExec:
    """Run a FAILED or TIMED_OUT activity again as attempt ``n + 1``.

    Returns the new (or brought-forward) attempt as it is after the launch.

    Raises:
        InvalidInput: the id is not an activity execution id.
        ActivityNotFound: no such activity execution.
        RetryNotAllowed: the attempt is not FAILED/TIMED_OUT, a newer attempt already
            started, or the workflow is no longer RUNNING.
    """
    key = parse_activity_exec_id(activity_exec_id_)
    item = engine.reads.activity(activity_exec_id_)
    state = item.state or A.REQUESTED
    if state not in RETRYABLE_STATES:
        raise RetryNotAllowed(
            f"activity {activity_exec_id_} is {state.value}; only FAILED or TIMED_OUT "
            "attempts can be retried", activity_exec_id=activity_exec_id_, state=state.value)
    wf = engine.reads.workflow(item.workflow_exec_id)
    if wf.state is not W.RUNNING:
        raise RetryNotAllowed(
            f"workflow {wf.workflow_exec_id} is {wf.state.value}: a retry is only possible "
            "while it is RUNNING (its failure is already decided); once it has ended, "
            "redrive it (`whimbrel redrive`)", activity_exec_id=activity_exec_id_,
            state=state.value, workflow_state=wf.state.value)
    defn = engine.definitions.definition_of(wf)
    name = item.activity_name
    if is_map_node(defn.activity(name), name):
        raise RetryNotAllowed(
            f"{name} is a map: it retries its items (retry an item's attempt), and a map "
            "that failed runs again with its run (`whimbrel redrive`)",
            activity_exec_id=activity_exec_id_, state=state.value,
            workflow_state=wf.state.value)
    latest = engine.reads.latest_attempts(wf.workflow_exec_id)[name]
    nxt_attempt = key.attempt + 1
    if latest.attempt > key.attempt:
        if latest.attempt != nxt_attempt or latest.state is not A.REQUESTED:
            raise RetryNotAllowed(
                f"activity {name} already has attempt {latest.attempt} "
                f"({latest.state.value if latest.state else '?'}); retry the latest "
                "attempt instead", activity_exec_id=activity_exec_id_, state=state.value,
                workflow_state=wf.state.value)
        # An automatic retry waits for its back-off: launch it now.
    else:
        # create_activity is conditional on attribute_not_exists: a concurrent automatic
        # or manual retry computes the same id and only one row is ever created. No timer
        # is armed: if we die before the launch, the reconciler finds a REQUESTED latest
        # attempt whose upstreams all COMPLETED and launches it.
        engine.store.create_activity(engine.flow.new_attempt(wf, defn, name, nxt_attempt,
                                                        engine.clock(), actor=actor,
                                                        previous=item))
    engine.flow.advance(wf, defn, name, nxt_attempt)
    return engine.reads.get_activity(activity_exec_id(wf.workflow_exec_id, name, nxt_attempt))
