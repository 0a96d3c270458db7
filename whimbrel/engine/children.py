"""Child workflows: an activity whose launcher (``LauncherSpec.workflow``) starts a run.

* **Start.** The attempt moves ``… → QUEUED → RUNNING`` in one write, as an in-process
  launcher's does (the engine is what runs it), and its winner starts the child with the
  attempt's input under the request id ``child:<activity_exec_id>`` — one child per
  attempt however often the start is replayed — recording the attempt on the child's
  workflow item (``parent_activity_exec_id``). The child's Full Logic trace row is not
  written: the parent's attempt is the record of what asked for it.
* **End.** The child's terminal write keeps its reconcile check armed; its follow-up
  ends the parent's attempt (COMPLETED with the outputs of the child's sinks by name, or
  its early output; FAILED when it failed, was cancelled or timed out), then disarms it.
  A crash in between is repaired by the reconciler from either side: the child's visit
  redoes the follow-up, the parent's visit ends an attempt whose child has ended.
  A completed child's output is kept whole (a map sink's list read from its items) or
  the attempt fails with ``error_type`` ``OutputTooLarge``: never a null in its place.
* **Cancel.** Asking the attempt to stop (a cancelled or timed-out parent, the attempt's
  own deadline) cancels the child; the child's end then ends the attempt CANCELLED.
  The starter reads the attempt again after starting the child, so a cancel that landed
  in between is never missed. Cancels down a tree and ends up it are a loop on this
  thread (:meth:`Children.cascade`), never a recursion as deep as the tree.
* **Nesting.** Registration refuses a definition that closes a cycle of ``workflow``
  launchers (``A → B → A``, read from the registered definitions it names); a child that
  would run deeper than ``MAX_NESTING_DEPTH`` fails its parent's attempt (``NestingTooDeep``).
* **Redrive.** A child run is never redriven by itself (``redrive the parent …``). The
  parent's redrive gives the attempt a new attempt that *adopts* the child of the one
  before (``child_workflow_exec_id`` on its row) when that child ended; starting it
  redrives the child in place (or, for a child that COMPLETED, hands on its output) and
  moves the child's ``parent_activity_exec_id`` to the new attempt in the same write.
  The child's completed activities do not run again; no second child is started.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from whimbrel.contract import attributes as run_attributes
from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.code.definition import CodeDefinition
from whimbrel.contract.dataflow import child_request_id, is_map_node
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import (
    DefinitionNotFound,
    InvalidInput,
    LaunchError,
    NestingTooDeep,
    NotAllowedNow,
    OutputTooLarge,
    StateConflict,
)
from whimbrel.contract.ids import activity_exec_id, parse_activity_exec_id, workflow_exec_id_for
from whimbrel.contract.limits import MAX_NESTING_DEPTH
from whimbrel.contract.nesting import ChildRef, child_cycle, child_workflows, describe_cycle
from whimbrel.contract.outcomes import generation
from whimbrel.contract.payloads import encode_payload
from whimbrel.contract.records import REMOVE, ActivityRecord, WorkflowRecord, latest_of
from whimbrel.contract.states import (
    ACTIVITY_ACTIVE,
    WORKFLOW_REDRIVABLE,
    ActivityState,
    Transition,
    WorkflowState,
    WorkflowTransition,
    workflow_sources,
)
from whimbrel.engine.feature import Core, Feature, Redriving
from whimbrel.engine.inputs import UNRESOLVED
from whimbrel.engine.ports import LaunchRequest

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState

CHILD = "workflow"
#: What a redrive's new attempt adopts of the attempt before it: a child that ended
#: unsuccessfully (redriven in place) or COMPLETED (its output handed on again).
ADOPTABLE = WORKFLOW_REDRIVABLE | {W.COMPLETED}


def child_of(act: ActivityRecord) -> str:
    """The execution id of an attempt's child run: the one it adopted in a redrive, or
    the one its own id derives (request id ``child:<activity_exec_id>``)."""
    return act.child_workflow_exec_id or workflow_exec_id_for(
        child_request_id(act.activity_exec_id))


def parent_run(child: WorkflowRecord) -> str | None:
    """The run whose attempt started (or adopted) ``child``."""
    if not child.parent_activity_exec_id:
        return None
    return parse_activity_exec_id(child.parent_activity_exec_id).workflow_exec_id


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
        self._local = threading.local()  # this thread's cascade (cascade())

    # -- hooks ------------------------------------------------------------------------------

    def registering(self, defn: WorkflowDefinition) -> list[str]:
        """A cycle of child workflows that ``defn`` would close, read from the registered
        definitions it reaches (each child's latest version, or the one it pins)."""
        root: ChildRef = (defn.name, None)
        children: dict[ChildRef, tuple[ChildRef, ...]] = {root: child_workflows(defn)}
        todo = list(children[root])
        while todo:
            ref = todo.pop()
            if ref in children or ref == root:
                continue
            try:
                found = self.core.definitions.definition(*ref)[1]
            except DefinitionNotFound:
                continue  # not registered (yet): it starts nothing
            children[ref] = child_workflows(found)
            todo.extend(children[ref])
        cycle = child_cycle(defn.name, children)
        if cycle is None:
            return []
        return [f"its workflow launchers close a cycle of child runs: {describe_cycle(cycle)} "
                "(a run would start itself again and again; break the cycle)"]

    def new_attempt(self, defn: WorkflowDefinition, record: ActivityRecord) -> ActivityRecord:
        """A redrive's first attempt adopts the child of the attempt before it, when that
        child ended (it is redriven in place, not started again)."""
        spec = defn.activity(record.activity_name)
        if spec.launcher.kind != CHILD or record.attempt < 2 or not generation(record) or (
                is_map_node(spec, record.activity_name)):
            return record
        before = self.store.get_activity(activity_exec_id(
            record.workflow_exec_id, record.activity_name, record.attempt - 1))
        if before is None or generation(before) >= generation(record):
            return record  # a retry within one go starts a new child
        kid = child_of(before)
        child = self.store.get_workflow(kid)
        if child is None or child.state not in ADOPTABLE \
                or child.parent_activity_exec_id != before.activity_exec_id:
            return record  # never started, gone, or still stopping: a new child
        return record.with_changes(child_workflow_exec_id=kid)

    def drives(self, spec: ActivityDefinition, name: str) -> str | None:
        if spec.launcher.kind == CHILD:
            return "runs a child workflow (the child's end decides its end)"
        return None

    def check_at_end(self, wf: WorkflowRecord, now: float) -> float | None:
        return now if wf.parent_activity_exec_id else None  # until the parent has heard

    def after_end(self, wf: WorkflowRecord) -> None:
        if wf.parent_activity_exec_id:
            self.cascade(lambda: self.tell_parent(wf))

    def stop(self, act: ActivityRecord, defn: WorkflowDefinition, *,
             ask_running: bool) -> bool | None:
        if defn.activity(act.activity_name).launcher.kind != CHILD:
            return None
        still = self.core.ending.stop_plainly(act, defn, ask_running=ask_running)
        if still and ask_running:
            self.cancel_child(act)
        return still

    def moved(self, item: ActivityRecord) -> None:
        if item.state is A.TIMED_OUT and item.workflow_version is not None \
                and self.core.definitions.definition_of(item).activity(
                    item.activity_name).launcher.kind == CHILD:
            self.cancel_child(item)  # past its start_to_close_seconds

    # -- start ------------------------------------------------------------------------------

    def start_child(self, aeid: str) -> str:
        """Start the child run of a RUNNING attempt (idempotent); returns its id. An
        attempt that adopted a child (a redrive's) redrives it in place instead.

        Raises:
            DefinitionNotFound: the child workflow is not registered (the attempt fails).
            NestingTooDeep: the child would nest deeper than MAX_NESTING_DEPTH.
            LaunchError: the adopted child cannot be taken over.
        """
        read = self.core.known.take_prefetched_workflow(aeid)
        item = self.core.known.remembered(aeid) or self.core.reads.activity(aeid)
        wf = read.result() if read is not None else self.core.reads.workflow(item.workflow_exec_id)
        if item.child_workflow_exec_id is not None:
            child = item.child_workflow_exec_id
            self.adopt(aeid, child)
        else:
            defn = self.core.definitions.definition_of(wf)
            config = defn.activity(item.activity_name).launcher.config
            name = str(config["workflow"])
            depth = self.depth_of(wf) + 1
            if depth > MAX_NESTING_DEPTH:
                raise NestingTooDeep(
                    f"child workflow {name} would run at nesting depth {depth}, deeper than "
                    f"the limit of {MAX_NESTING_DEPTH} nested runs (MAX_NESTING_DEPTH)",
                    activity_exec_id=aeid, depth=depth, limit=MAX_NESTING_DEPTH)
            child = self.core.starting.start(
                name, self.core.inputs.launch_input(wf, defn, item.input, item.activity_name),
                version=config.get("version"), request_id=child_request_id(aeid),
                source=f"child of {aeid}", write_request=False, parent=aeid,
                attributes=run_attributes.decode(wf.attributes))  # a child carries them
        # Written first, read second: a stop asked for meanwhile reaches the child.
        now = self.store.get_activity(aeid)
        if now is not None and now.state is not A.RUNNING:
            self.cancel_child(now)
        return child

    def depth_of(self, wf: WorkflowRecord) -> int:
        """How deep ``wf`` is nested (a top run: 1), counted up its parents only as far
        as the limit (a read per level, only for a run that is a child itself)."""
        depth, cur = 1, wf
        while depth <= MAX_NESTING_DEPTH:
            up = parent_run(cur)
            found = self.store.get_workflow(up) if up is not None else None
            if found is None:
                break
            depth, cur = depth + 1, found
        return depth

    def adopt(self, aeid: str, kid: str) -> None:
        """Take over the ended child ``kid`` for the redrive's attempt ``aeid``: redrive
        it in place, pointing it at ``aeid`` in the same write (or, COMPLETED, point it
        and hand its output on). Idempotent: a replay finds it pointing here already.

        Raises:
            LaunchError: the child is gone, or live without pointing here.
        """
        child = self.store.get_workflow(kid)
        if child is not None and child.parent_activity_exec_id != aeid \
                and child.state in WORKFLOW_REDRIVABLE:
            try:
                self.core.feature(Redriving).redrive(  # type: ignore[type-abstract]
                    kid, parent=aeid)
                return
            except NotAllowedNow:
                child = self.store.get_workflow(kid)  # a replay's redrive won: see below
        elif child is not None and child.parent_activity_exec_id != aeid \
                and child.state is W.COMPLETED:
            # Only while it is as read (COMPLETED, still pointing at the attempt before).
            self.store.set_workflow(kid, {"parent_activity_exec_id": aeid},
                                    states=[W.COMPLETED])
            child = self.store.get_workflow(kid)
        if child is None or child.parent_activity_exec_id != aeid:
            raise LaunchError(
                f"the child run {kid} this attempt adopts is "
                f"{'gone' if child is None else child.state.value} and was not taken over",
                activity_exec_id=aeid, child_workflow_exec_id=kid)
        if child.state.is_terminal:
            self.cascade(lambda: self.tell_parent(child))

    # -- end --------------------------------------------------------------------------------

    def tell_parent(self, child: WorkflowRecord) -> None:
        """End the parent's attempt as the child ended (idempotent)."""
        aeid = str(child.parent_activity_exec_id)
        node = self.store.get_activity(aeid)
        if node is None or node.state not in ACTIVITY_ACTIVE:
            return  # it ended already (or was never started: nothing to end)
        self.core.known.remember(node)
        output: str | None = None
        error: str | None = None
        verb = Transition.COMPLETED
        kind = "".join(p.title() for p in child.state.value.split("_"))
        if child.state is W.COMPLETED:
            try:
                output = self.child_output(child)
            except OutputTooLarge as exc:  # failed, never passed on as null
                verb, error, kind = Transition.FAILED, str(exc), "OutputTooLarge"
            except InvalidInput as exc:
                verb, error = Transition.FAILED, f"child workflow output rejected: {exc}"
        else:
            verb = Transition.FAILED
            error = f"child workflow {child.workflow_exec_id} ended {child.state.value}"
            if child.error:
                error += f": {child.error}"
        try:
            self.core.flow.apply(node, verb, output=output, error=error,
                       error_type=None if error is None else
                       kind if kind == "OutputTooLarge" else f"ChildWorkflow{kind}",
                       actor=f"workflow:{child.workflow_exec_id}")
        except StateConflict:
            pass  # moved on meanwhile (timed out, or told by another actor)

    def child_output(self, child: WorkflowRecord) -> str | None:
        """A completed child's output: its sinks' outputs, by name (JSON text). A map
        sink's list is read from its items when it was too large for the map's row.
        A child ended early hands on its early output, not its sinks (skipped).

        Raises:
            OutputTooLarge: larger than an output may be (the attempt fails: an output is
                kept whole or not at all).
            InvalidInput: not JSON.
        """
        if child.ended_by is not None:  # kept within MAX_OUTPUT_BYTES by end_early
            return child.output or "null"
        defn = self.core.definitions.definition_of(child)
        if isinstance(defn, CodeDefinition):
            return child.output  # what its function returned (kept within the limit)
        wx = child.workflow_exec_id
        latest = latest_of(self.store.list_activities(wx))
        out: dict[str, Any] = {}
        for sink in defn.sinks:
            value = self.core.inputs.resolved_value(wx, defn, latest, sink)
            out[sink] = None if value is UNRESOLVED else value
        text = encode_payload(out, field="output", max_bytes=sys.maxsize)
        size = len(text.encode()) if text is not None else 0
        limits = self.core.reads.limits
        if size > limits.output_bytes:
            raise OutputTooLarge(
                f"child workflow {wx} output too large: {size} bytes of JSON (the outputs of "
                f"its sinks {', '.join(sorted(out))}), more than the limit of "
                f"{limits.output_bytes} an attempt's output may hold{limits.hint}",
                field="output")
        return text

    # -- stop -------------------------------------------------------------------------------

    def cancel_child(self, act: ActivityRecord) -> None:
        child = self.store.get_workflow(child_of(act))
        if child is not None and child.state in workflow_sources(WorkflowTransition.CANCEL) \
                and child.parent_activity_exec_id == act.activity_exec_id:
            wx = child.workflow_exec_id
            self.cascade(lambda: self.core.ending.cancel(wx))

    def cascade(self, job: Callable[[], None]) -> None:
        """Run ``job`` now, or, inside another job on this thread, right after it: a
        cancel travelling down a tree of runs, and ends travelling up it, are a loop
        here, never a recursion as deep as the tree. Every job runs before the first
        call returns; the first error is raised once all have run."""
        queue: list[Callable[[], None]] | None = getattr(self._local, "queue", None)
        if queue is not None:
            queue.append(job)
            return
        self._local.queue = queue = [job]
        first: Exception | None = None
        try:
            while queue:
                try:
                    queue.pop(0)()
                except Exception as exc:  # the others still run; raised below, not hidden
                    first = first or exc
        finally:
            self._local.queue = None
        if first is not None:
            raise first

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
                    is_map_node(spec, act.activity_name)):
                continue  # (a map of child runs: its items start them, not the map)
            child = self.store.get_workflow(child_of(act))
            if child is not None and child.parent_activity_exec_id != act.activity_exec_id:
                child = None  # adopted, but the redrive that takes it over was lost
            if child is None:
                if act.state is A.RUNNING and wf.state is W.RUNNING:
                    self.core.launches.launch(wf, defn, act)  # the start was lost: start it now
                else:
                    self.core.flow.apply(act, Transition.FAILED, error="its child never started")
                repaired = True
            elif child.state.is_terminal:
                self.tell_parent(child)
                if child.check_epoch is not None:
                    self.store.set_workflow(child.workflow_exec_id, {"check_epoch": REMOVE},
                                            states=[child.state])
                repaired = True
            elif act.state is A.CANCELLED_RUNNING and child.state is not W.CANCEL_REQUESTED:
                self.core.ending.cancel(child.workflow_exec_id)
                repaired = True
        return repaired
