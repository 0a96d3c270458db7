"""Child workflows: LauncherSpec.workflow starts a registered workflow as a child run."""

from __future__ import annotations

import wb_test_activities  # noqa: F401

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    EngineDriven,
    LauncherSpec,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.dataflow import child_request_id
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.testing import assert_contract_holds, wait_until

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

A, W = ActivityState, WorkflowState
py = LauncherSpec.python

CHILD = WorkflowDefinition("resize", (
    Act("fetch", launcher=py("wb_data_activities:noop")),
    Act("shrink", ("fetch",), launcher=py("wb_data_activities:child_sink")),
))
PARENT = WorkflowDefinition("album", (
    Act("prepare", launcher=py("wb_data_activities:noop")),
    Act("sub", ("prepare",), launcher=LauncherSpec.workflow("resize"), input={"w": 64}),
    Act("publish", ("sub",), launcher=py("wb_data_activities:summary")),
))


def test_parent_runs_a_child_and_gets_its_output(wb: Whimbrel) -> None:
    wb.register_workflow(CHILD)
    wb.register_workflow(PARENT)
    wx = wb.start_workflow("album", {"album": "summer"})
    wf = wb.wait(wx, timeout=30)
    assert wf.state is W.COMPLETED, wf
    sub = wf.activity("sub")
    child_wx = workflow_exec_id_for(child_request_id(sub.activity_exec_id))
    assert sub.child_workflow_exec_id == child_wx
    assert wf.child_workflow_exec_ids == (child_wx,)
    child = wb.get_workflow(child_wx)
    assert child.state is W.COMPLETED
    assert child.parent_activity_exec_id == sub.activity_exec_id
    assert child.parent_workflow_exec_id == wx
    assert child.input == {"album": "summer", "w": 64}
    expected = {"shrink": {"child_input": {"album": "summer", "w": 64},
                           "upstream": {"fetch": None}}}
    assert sub.output == expected
    assert wf.activity("publish").output["upstream"] == {"sub": expected}
    assert_contract_holds(wf, PARENT)
    assert_contract_holds(child, CHILD)
    # Its end is told once: the child no longer waits for a reconcile visit.
    assert wb.store.get_workflow(child_wx).check_epoch is None  # type: ignore[union-attr]


def test_a_failing_child_fails_the_attempt(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("bad", (
        Act("x", launcher=py("wb_data_activities:refuse")),)))
    wb.register_workflow(WorkflowDefinition("holder", (
        Act("sub", launcher=LauncherSpec.workflow("bad")),)))
    wf = wb.wait(wb.start_workflow("holder"), timeout=30)
    assert wf.state is W.FAILED
    sub = wf.activity("sub")
    assert sub.state is A.FAILED and sub.error_type == "ChildWorkflowFailed"
    assert "ended FAILED" in (sub.error or "")


def test_cancelling_the_parent_cancels_the_child(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("waiter", (Act("hold"),)))  # external: waits
    wb.register_workflow(WorkflowDefinition("boss", (
        Act("sub", launcher=LauncherSpec.workflow("waiter")),)))
    wx = wb.start_workflow("boss")
    aeid = activity_exec_id(wx, "sub", 1)
    child_wx = workflow_exec_id_for(child_request_id(aeid))
    wait_until(lambda: wb.find_workflow(child_wx), message="child started")
    assert wb.get_activity(aeid).state is A.RUNNING
    try:
        wb.transition_activity(aeid, Transition.COMPLETED, output={"x": 1})
    except EngineDriven as exc:
        assert "child workflow" in str(exc)
    else:
        raise AssertionError("an outside move of a child's attempt was accepted")
    wb.cancel_workflow(wx)
    parent = wb.wait(wx, timeout=30)
    child = wb.get_workflow(child_wx)
    assert parent.state is W.CANCELLED and child.state is W.CANCELLED
    assert parent.activity("sub").state is A.CANCELLED
    assert_contract_holds(parent)
    assert_contract_holds(child)


def test_unknown_child_workflow_fails_the_attempt_at_launch(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("orphan", (
        Act("sub", launcher=LauncherSpec.workflow("no-such-workflow")),)))
    wf = wb.wait(wb.start_workflow("orphan"), timeout=30)
    assert wf.state is W.FAILED
    assert "no registered workflow definition 'no-such-workflow'" in \
        (wf.activity("sub").error or "")
