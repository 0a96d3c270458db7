"""What ``status`` shows of data-driven runs (pure): a map's progress and the links
between a parent run and its children (``cmd_data.py`` lists a map's items)."""

from __future__ import annotations

from typing import Any

from whimbrel import ActivityExec, WorkflowExec


def activity_extras(act: ActivityExec) -> dict[str, Any]:
    """The JSON keys an attempt gains: a map's progress, an item's index, its child."""
    out: dict[str, Any] = {}
    if act.item_index is not None:
        out["item_index"] = act.item_index
    if act.progress is not None:
        out["map"] = act.progress.to_dict()
    if act.child_workflow_exec_id is not None:
        out["child_workflow_exec_id"] = act.child_workflow_exec_id
    if act.called_by is not None:
        out["called_by"] = act.called_by
    if act.pool_slot is not None:  # issue 22: the pool slot it holds
        out["pool_slot"] = act.pool_slot
    if act.pool_wait is not None:  # and the pool it waits for
        out["pool_wait"] = act.pool_wait
    if act.reused_from is not None:  # issue 29: a fork's reused output
        out["reused_from"] = act.reused_from
    return out


def run_extras(wf: WorkflowExec) -> dict[str, Any]:
    """The JSON keys a run gains: its parent, its children, its redrives, its priority."""
    return {"parent_workflow_exec_id": wf.parent_workflow_exec_id,
            "parent_activity_exec_id": wf.parent_activity_exec_id,
            "child_workflow_exec_ids": list(wf.child_workflow_exec_ids),
            "redrive_count": wf.redrive_count, "priority": wf.priority,
            "forked_from": wf.forked_from}


def note(act: ActivityExec) -> str:
    """The dim note of an activity's row: a map's progress, the child run it started."""
    if act.progress is not None:
        return f"map: {act.progress}"
    if act.child_workflow_exec_id is not None:
        return f"child run {act.child_workflow_exec_id}"
    if act.reused_from is not None:
        return f"reused from {act.reused_from}"
    return ""


def header_lines(wf: WorkflowExec) -> list[str]:
    out = []
    if wf.parent_activity_exec_id:
        out.append(f"child of {wf.parent_workflow_exec_id} (attempt "
                   f"{wf.parent_activity_exec_id})")
    if wf.forked_from:
        out.append(f"forked from {wf.forked_from}")
    if wf.attributes:
        out.append("attributes: " + ", ".join(f"{k}={v}" for k, v in wf.attributes.items()))
    if wf.redrive_count:
        out.append(f"redriven {wf.redrive_count} time(s)")
    return out
