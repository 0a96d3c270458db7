"""Issue 20, decision 10 through the Python API: cancelling the only running activity of a
run (by its attempt id) ends the run CANCELLED, not FAILED. (The raw-row paths, CANCEL by
run id included, are in tests/e2e/test_i20_rows.py.) Written to fail on the main of the
day the issue was filed."""

from __future__ import annotations

import pytest

from whimbrel import (
    ActivityCancelled,
    ActivityState,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel import ActivityDefinition as Act
from whimbrel.contract.ids import activity_exec_id

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

A, W = ActivityState, WorkflowState


def test_cancelling_the_only_running_activity_ends_the_run_cancelled(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("i20_cancel_one", (
        Act("only", launcher=LauncherSpec.external()),)))
    wx = wb.start_workflow("i20_cancel_one")
    aeid = activity_exec_id(wx, "only", 1)
    got = wb.claim(workflow_name="i20_cancel_one")
    assert got is not None and got.activity_exec_id == aeid
    wb.transition_activity(aeid, "CANCEL")
    with pytest.raises(ActivityCancelled):
        wb.heartbeat(aeid)  # the worker learns it and stops
    wb.transition_activity(aeid, "FAILED", error="stopped: cancelled")
    assert wb.get_activity(aeid).state is A.CANCELLED
    assert wb.wait(wx, timeout=15).state is W.CANCELLED


def test_cancelling_the_only_ready_activity_ends_the_run_cancelled(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("i20_cancel_ready", (
        Act("only", launcher=LauncherSpec.external()),)))
    wx = wb.start_workflow("i20_cancel_ready")
    aeid = activity_exec_id(wx, "only", 1)
    wb.transition_activity(aeid, "CANCEL")
    assert wb.get_activity(aeid).state is A.CANCELLED
    assert wb.wait(wx, timeout=15).state is W.CANCELLED
