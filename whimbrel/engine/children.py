"""Child workflows: an activity whose launcher (``LauncherSpec.workflow``) starts a run.

* **Start.** The attempt moves ``… → QUEUED → RUNNING`` in one write, as an in-process
  launcher's does (the engine is what runs it), and its winner starts the child with the
  attempt's input under the request id ``child:<activity_exec_id>`` — one child per
  attempt however often the start is replayed — recording the attempt on the child's
  workflow item (``parent_activity_exec_id``). The child's Full Logic trace row is not
  written: the parent's attempt is the record of what asked for it.
* **End.** The child's terminal write keeps its reconcile check armed; its follow-up
  ends the parent's attempt (COMPLETED with the outputs of the child's sinks, by name;
  FAILED when the child failed, was cancelled or timed out), then disarms it. A crash in
  between is repaired by the reconciler from either side: the child's visit redoes the
  follow-up, the parent's visit ends an attempt whose child has ended.
* **Cancel.** Asking the attempt to stop (a cancelled or timed-out parent, the attempt's
  own deadline) cancels the child; the child's end then ends the attempt CANCELLED.
  The starter reads the attempt again after starting the child, so a cancel that landed
  in between is never missed.
"""

from __future__ import annotations

import logging
from typing import Any

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.dataflow import child_request_id, is_item
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import InvalidInput, StateConflict
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.limits import MAX_OUTPUT_BYTES
from whimbrel.contract.outcomes import resolution
from whimbrel.contract.payloads import decode_payload, encode_payload
from whimbrel.contract.records import REMOVE, ActivityRecord, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_ACTIVE,
    ActivityState,
    Transition,
    WorkflowState,
    WorkflowTransition,
    workflow_sources,
)
from whimbrel.engine.base import latest_of
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.inputs import launch_input
from whimbrel.engine.ports import LaunchRequest

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState

CHILD = "workflow"


def child_of(activity_exec_id: str) -> str:
    """The execution id of the child run an attempt starts."""
    return workflow_exec_id_for(child_request_id(activity_exec_id))


class ChildLauncher:
    """The ``workflow`` launcher: the engine starts the child itself."""

    #: The attempt is RUNNING from the write that queues it (engine.ports.runs_in_process).
    in_process = True

    def __init__(self, engine: Children) -> None:
        self.engine = engine

    def launch(self, request: LaunchRequest) -> None:
        self.engine.start_child(request.activity_exec_id)


class Children(Feature):
    """Starting child runs, ending their parent's attempt, cancelling them."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.store = core.store
        core.launchers[CHILD] = ChildLauncher(self)

    # -- hooks ------------------------------------------------------------------------------

    def drives(self, spec: ActivityDefinition, name: str) -> str | None:
        if spec.launcher.kind == CHILD:
            return "runs a child workflow (the child's end decides its end)"
        return None

    def check_at_end(self, wf: WorkflowRecord, now: float) -> float | None:
        return now if wf.parent_activity_exec_id else None  # until the parent has heard

    def after_end(self, wf: WorkflowRecord) -> None:
        if wf.parent_activity_exec_id:
            self.tell_parent(wf)

    def stop(self, act: ActivityRecord, defn: WorkflowDefinition, *,
             ask_running: bool) -> bool | None:
        if defn.activity(act.activity_name).launcher.kind != CHILD:
            return None
        still = self.core.stop_plainly(act, defn, ask_running=ask_running)
        if still and ask_running:
            self.cancel_child(act.activity_exec_id)
        return still

    def moved(self, item: ActivityRecord) -> None:
        if item.state is A.TIMED_OUT and item.workflow_version is not None \
                and self.core.definition_of(item).activity(
                    item.activity_name).launcher.kind == CHILD:
            self.cancel_child(item.activity_exec_id)  # past its start_to_close_seconds

    # -- start ------------------------------------------------------------------------------

    def start_child(self, aeid: str) -> str:
        """Start the child run of a RUNNING attempt (idempotent); returns its id.

        Raises:
            DefinitionNotFound: the child workflow is not registered (the attempt fails).
        """
        read = self.core.take_prefetched_workflow(aeid)
        item = self.core.remembered(aeid) or self.core.activity(aeid)
        wf = read.result() if read is not None else self.core.workflow(item.workflow_exec_id)
        defn = self.core.definition_of(wf)
        config = defn.activity(item.activity_name).launcher.config
        child = self.core.start(str(config["workflow"]),
                           launch_input(self.core, wf, defn, item.input, item.activity_name),
                           version=config.get("version"), request_id=child_request_id(aeid),
                           source=f"child of {aeid}", write_request=False, parent=aeid)
        # Written first, read second: a stop asked for meanwhile reaches the child.
        now = self.store.get_activity(aeid)
        if now is not None and now.state is not A.RUNNING:
            self.cancel_child(aeid)
        return child

    # -- end --------------------------------------------------------------------------------

    def tell_parent(self, child: WorkflowRecord) -> None:
        """End the parent's attempt as the child ended (idempotent)."""
        aeid = str(child.parent_activity_exec_id)
        node = self.store.get_activity(aeid)
        if node is None or node.state not in ACTIVITY_ACTIVE:
            return  # it ended already (or was never started: nothing to end)
        self.core.remember(node)
        output: str | None = None
        error: str | None = None
        verb = Transition.COMPLETED
        if child.state is W.COMPLETED:
            try:
                output = self.child_output(child)
            except InvalidInput as exc:
                verb, error = Transition.FAILED, f"child workflow output rejected: {exc}"
        else:
            verb = Transition.FAILED
            error = f"child workflow {child.workflow_exec_id} ended {child.state.value}"
            if child.error:
                error += f": {child.error}"
        kind = "".join(p.title() for p in child.state.value.split("_"))
        try:
            self.core.apply(node, verb, output=output, error=error,
                       error_type=None if error is None else f"ChildWorkflow{kind}",
                       actor=f"workflow:{child.workflow_exec_id}")
        except StateConflict:
            pass  # moved on meanwhile (timed out, or told by another actor)

    def child_output(self, child: WorkflowRecord) -> str | None:
        """A completed child's output: its sinks' outputs, by name (JSON text).

        Raises:
            InvalidInput: larger than MAX_OUTPUT_BYTES.
        """
        defn = self.core.definition_of(child)
        latest = latest_of(self.store.list_activities(child.workflow_exec_id))
        out: dict[str, Any] = {}
        for sink in defn.sinks:
            res = resolution(defn, latest, sink)
            out[sink] = decode_payload(res.output, field="output") \
                if res is not None and res.output else None
        return encode_payload(out, field="output", max_bytes=MAX_OUTPUT_BYTES)

    # -- stop -------------------------------------------------------------------------------

    def cancel_child(self, aeid: str) -> None:
        child = self.store.get_workflow(child_of(aeid))
        if child is not None and child.state in workflow_sources(WorkflowTransition.CANCEL):
            self.core.cancel(child.workflow_exec_id)

    # -- repair ---------------------------------------------------------------------------

    def reconcile(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        """The reconciler's part (a run not SUSPENDED): start a child whose start was
        lost, end an attempt whose child ended, cancel a child whose attempt was asked
        to stop."""
        if wf.state is W.SUSPENDED:
            return False
        repaired = False
        for act in latest_of(acts).values():
            spec = defn.activity(act.activity_name)
            if act.state not in ACTIVITY_ACTIVE or spec.launcher.kind != CHILD or (
                    spec.map_over is not None and not is_item(act.activity_name)):
                continue  # (a map of child runs: its items start them, not the map)
            child = self.store.get_workflow(child_of(act.activity_exec_id))
            if child is None:
                if act.state is A.RUNNING and wf.state is W.RUNNING:
                    self.core.launch(wf, defn, act)  # the start was lost: start it now
                else:
                    self.core.apply(act, Transition.FAILED, error="its child never started")
                repaired = True
            elif child.state.is_terminal:
                self.tell_parent(child)
                if child.check_epoch is not None:
                    self.store.set_workflow(child.workflow_exec_id, {"check_epoch": REMOVE},
                                            states=[child.state])
                repaired = True
            elif act.state is A.CANCELLED_RUNNING and child.state is not W.CANCEL_REQUESTED:
                self.core.cancel(child.workflow_exec_id)
                repaired = True
        return repaired
