"""The public view of a run, with what data-driven workflows add to it (pure): each
map's progress over its items, and the child runs its attempts started."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from whimbrel.contract.code.definition import CodeDefinition, decode_step
from whimbrel.contract.dataflow import child_request_id, split_item
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.launching import LAUNCH_FAILED
from whimbrel.contract.outcomes import map_items, map_output, map_progress
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState
from whimbrel.engine.views import ActivityExec, WorkflowExec


def run_view(defn: WorkflowDefinition | None, wf: WorkflowRecord,
             records: Sequence[ActivityRecord]) -> WorkflowExec:
    """The run with every attempt; maps carry their progress and attempts that started
    a child run name it (when the definition is at hand)."""
    view = WorkflowExec.from_record(wf, tuple(ActivityExec.from_record(r) for r in records))
    if isinstance(defn, CodeDefinition):
        steps = {r.activity_exec_id: r.step for r in records}
        acts = tuple(_code_map(_code_child(a, steps.get(a.activity_exec_id)),
                               steps.get(a.activity_exec_id), records)
                     for a in view.activities)
        return replace(view, code=True, properties=view.properties or {}, activities=acts,
                       child_workflow_exec_ids=tuple(dict.fromkeys(
                           a.child_workflow_exec_id for a in acts
                           if a.child_workflow_exec_id is not None)))
    if defn is None:
        return view
    adopted = {r.activity_exec_id: r.child_workflow_exec_id for r in records}
    children: dict[str, float] = {}

    def shaped(act: ActivityExec) -> ActivityExec:
        act = with_child(defn, act, adopted.get(act.activity_exec_id))
        base = split_item(act.activity_name)[0]
        if act.child_workflow_exec_id is not None:  # one child, however many attempts
            at = act.started_epoch or act.created_epoch
            children[act.child_workflow_exec_id] = min(
                at, children.get(act.child_workflow_exec_id, at))
        if base not in defn.names:
            return act
        spec = defn.activity(base)
        if spec.map_over is not None and act.item_index is None and act.map_size is not None:
            items = map_items(records, base)
            act = replace(act, progress=map_progress(items, act.map_size, spec))
            if act.state is ActivityState.COMPLETED and act.output is None and act.map_size:
                act = replace(act, output=map_output(items, act.map_size))  # too large a list
        return act                                                            # for its row

    return replace(view, activities=tuple(shaped(a) for a in view.activities),
                   items=tuple(shaped(a) for a in view.items),
                   child_workflow_exec_ids=tuple(
                       c for c, _ in sorted(children.items(), key=lambda kv: kv[1])))


def with_child(defn: WorkflowDefinition, act: ActivityExec,
               adopted: str | None = None) -> ActivityExec:
    """The attempt naming the child run it started (``LauncherSpec.workflow``; a map's
    items do, its own row does not): the one it adopted in a redrive, or the one its id
    derives (engine/children.py)."""
    base = split_item(act.activity_name)[0]
    if base not in defn.names:
        return act
    spec = defn.activity(base)
    runs_child = spec.launcher.kind == "workflow" and (
        spec.map_over is None or act.item_index is not None)
    if not runs_child or not _started(act) or (
            act.error is not None and act.error.startswith(LAUNCH_FAILED)):
        return act  # (a failed launch started no child: too deep, not registered...)
    child = adopted or workflow_exec_id_for(child_request_id(act.activity_exec_id))
    return replace(act, child_workflow_exec_id=child)


def _code_child(act: ActivityExec, step: str | None) -> ActivityExec:
    """A code step that runs a child (``ctx.child``), naming it (from its row's spec)."""
    if step is None or '"workflow"' not in step:
        return act
    base = act.activity_name.rpartition("#")[0]
    return with_child(WorkflowDefinition(base, (decode_step(step, base)[1],)), act)


def _code_map(act: ActivityExec, step: str | None,
              records: Sequence[ActivityRecord]) -> ActivityExec:
    """A ``ctx.map`` step with its progress over its items (and, when its outputs did
    not fit its row, its output assembled from them), as a DAG map's row."""
    if step is None or act.map_size is None:
        return act
    spec = decode_step(step, act.activity_name.rpartition("#")[0])[1]
    items = map_items(records, act.activity_name)
    act = replace(act, progress=map_progress(items, act.map_size, spec))
    if act.state is ActivityState.COMPLETED and act.output is None and act.map_size:
        act = replace(act, output=map_output(items, act.map_size))
    return act


def _started(act: ActivityExec) -> bool:
    return any(h.state == ActivityState.RUNNING.value for h in act.history)
