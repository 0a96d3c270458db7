"""``redrive``, and what ``status`` shows of maps, child runs and redrives."""

from __future__ import annotations

from cli_helpers import Run

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id

MAPPED = WorkflowDefinition("mapped", (
    ActivityDefinition("each", map_over="$input.xs", max_concurrency=2),  # external items
))


def test_status_shows_a_map_as_one_row_and_expands_it(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(MAPPED)
    wx = wb.start_workflow("mapped", {"xs": ["a", "b", "c"]})
    first = activity_exec_id(wx, "each#0", 1)
    wb.transition_activity(first, "RUNNING")
    wb.transition_activity(first, "COMPLETED", output={"ok": 0})
    table = run("status", wx).stdout
    assert "map: 1/3 done, 2 running" in table and "each#" not in table
    expanded = run("status", wx, "--expand", "each").stdout
    assert "items of each" in expanded and "COMPLETED" in expanded and "READY" in expanded
    data = run.json("status", wx, "--expand", "each")
    [node] = data["activities"]
    assert node["map"] == {"total": 3, "done": 1, "running": 2, "failed": 0, "pending": 0}
    assert [i["item_index"] for i in data["items"]["each"]] == [0, 1, 2]
    assert data["items"]["each"][0]["output"] == {"ok": 0}


def test_redrive_a_failed_run_and_see_the_child_links(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("inner", (ActivityDefinition("k"),)))
    wb.register_workflow(WorkflowDefinition("outer", (
        ActivityDefinition("sub", launcher=LauncherSpec.workflow("inner")),)))
    wx = wb.start_workflow("outer")
    [child] = wb.get_workflow(wx).child_workflow_exec_ids
    k = activity_exec_id(child, "k", 1)
    wb.transition_activity(k, "RUNNING")
    wb.transition_activity(k, "FAILED", error="broken")
    assert run.json("status", wx)["state"] == "FAILED"
    outer = run.json("status", wx)
    assert outer["child_workflow_exec_ids"] == [child]
    assert outer["activities"][0]["child_workflow_exec_id"] == child
    inner = run("status", child).stdout
    assert f"child of {wx}" in inner
    assert run.json("status", child)["parent_workflow_exec_id"] == wx
    # A child run is redriven through its parent, never by hand (issue 20).
    refused = run("redrive", child, code=5)
    assert f"redrive the parent {wx}" in refused.stderr
    assert run.json("redrive", wx) == {"workflow_exec_id": wx, "state": "RUNNING",
                                       "redrive_count": 1}
    again = run.json("status", wx)
    # The parent's new attempt adopted the same child, redriven in place: one child.
    assert again["redrive_count"] == 1 and again["child_workflow_exec_ids"] == [child]
    assert [a["child_workflow_exec_id"] for a in again["activities"]] == [child, child]
    assert run.json("status", child)["redrive_count"] == 1
    assert "redriven 1 time(s)" in run("status", wx).stdout
    result = run("redrive", wx, code=5)
    assert "is RUNNING: only a FAILED, CANCELLED or TIMED_OUT run" in result.stderr
