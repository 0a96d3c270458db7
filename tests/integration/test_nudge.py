"""Issue 29, nudge: ``Whimbrel.nudge`` reconciles one run now — a lost attempt row, a due
deadline, a slot its ended attempt never gave back — on DynamoDB Local, costing what that
run holds and touching no other run. The clock stands still (``CLOCK = StepClock``): a
deadline comes due when the test moves it, and no sweep runs unless a test calls it."""

from __future__ import annotations

import uuid

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    InvalidInput,
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowNotFound,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import RecordingLauncher, StepClock

CLOCK = StepClock
A, W = ActivityState, WorkflowState
EXT = LauncherSpec.external()
LAMBDA = LauncherSpec("lambda", {"function": "f"})


def _define(wb: Whimbrel, name: str, *, attempts: int = 2, hb: float | None = None,
            pool: str | None = None, launcher: LauncherSpec = EXT) -> None:
    wb.register_workflow(WorkflowDefinition(name, (Act(
        "w", launcher=launcher, pool=pool, heartbeat_timeout_seconds=hb,
        retry=RetryPolicy(max_attempts=attempts, initial_interval_seconds=0.0)),)))


def _lose(wb: Whimbrel, wx: str, aeid: str) -> None:
    """An operator's mistake (a raw DeleteItem): the row vanishes, nothing else moves."""
    wb.store.tables.client.call("DeleteItem", {
        "TableName": f"{wb.table_prefix}activity_exec",
        "Key": {"workflow_exec_id": {"S": wx}, "activity_exec_id": {"S": aeid}}})
    assert wb.store.get_activity(aeid) is None


def _claimed(wb: Whimbrel, name: str) -> tuple[str, str]:
    wx = wb.start_workflow(name)
    got = wb.claim(workflow_name=name)
    assert got is not None and got.workflow_exec_id == wx
    return wx, got.activity_exec_id


def test_a_lost_row_is_repaired_at_once_for_that_run_only(wb: Whimbrel) -> None:
    _define(wb, "nudge_lost")
    wx, first = _claimed(wb, "nudge_lost")
    other, other_first = _claimed(wb, "nudge_lost")
    _lose(wb, wx, first)
    _lose(wb, other, other_first)
    wb.meter.reset()
    report = wb.nudge(wx)
    assert report.outcome == "repaired" and report.state == "RUNNING", report
    assert wb.get_activity(first).state is A.LOST
    assert wb.get_activity(activity_exec_id(wx, "w", 2)).state is A.READY
    # One run's cost: no Query of any sweep index, a handful of requests.
    calls = dict(wb.meter.calls)
    assert sum(calls.values()) <= 20, calls
    assert wb.store.get_activity(other_first) is None  # the other run was not visited
    again = wb.nudge(wx)
    assert (again.outcome, again.changed) == ("checked", False), again
    assert wb.claim(workflow_name="nudge_lost").activity_exec_id == \
        activity_exec_id(wx, "w", 2)  # never the id already handed out


def test_a_due_deadline_fires_without_a_sweep(wb: Whimbrel, clock: StepClock) -> None:
    _define(wb, "nudge_hb", hb=10.0, attempts=2)
    wx, first = _claimed(wb, "nudge_hb")
    assert wb.nudge(wx).timed_out == []  # not due yet: nothing moves
    assert wb.get_activity(first).state is A.RUNNING
    clock.advance(100)
    report = wb.nudge(wx)
    assert report.timed_out == [first], report
    assert wb.get_activity(first).state is A.TIMED_OUT
    assert wb.get_activity(activity_exec_id(wx, "w", 2)).state is A.READY


def test_a_slot_an_ended_attempt_still_holds_is_given_back(
        wb: Whimbrel, launched: RecordingLauncher, clock: StepClock) -> None:
    wb.set_pool("nudge_p", slots=1, per_second=None)
    _define(wb, "nudge_pool", pool="nudge_p", launcher=LAMBDA, attempts=1)
    first, second = wb.start_workflow("nudge_pool"), wb.start_workflow("nudge_pool")
    holder = wb.get_workflow(first).activity("w").activity_exec_id
    wb.transition_activity(holder, Transition.RUNNING)
    wb.transition_activity(holder, Transition.COMPLETED, output={"ok": 1})
    waiter = wb.get_workflow(second).activity("w").activity_exec_id
    assert wb.get_activity(waiter).state is A.QUEUED
    wb.transition_activity(waiter, Transition.RUNNING)
    wb.transition_activity(waiter, Transition.COMPLETED, output={"ok": 1})
    # A crash between an end's write and its release: the ended attempt holds the slot.
    assert wb.store.pools.acquire_slot("nudge_p", 0, holder, uuid.uuid4().hex, clock(),
                                       clock() + 1e6)
    third = wb.start_workflow("nudge_pool")
    assert wb.get_workflow(third).activity("w").state is A.READY  # waits: the pool is full
    report = wb.nudge(first)
    assert report.released == ["nudge_p#0"], report
    assert wb.get_workflow(third).activity("w").state is A.QUEUED  # the waiter went in
    assert wb.nudge(first).released == []  # given back once


def test_a_lost_holder_gives_its_slot_back(wb: Whimbrel, launched: RecordingLauncher) -> None:
    wb.set_pool("nudge_q", slots=1, per_second=None)
    _define(wb, "nudge_lost_pool", pool="nudge_q", launcher=LAMBDA, attempts=1)
    first, second = wb.start_workflow("nudge_lost_pool"), wb.start_workflow("nudge_lost_pool")
    holder = wb.get_workflow(first).activity("w").activity_exec_id
    wb.transition_activity(holder, Transition.RUNNING)
    _lose(wb, first, holder)
    report = wb.nudge(first)
    assert report.released == ["nudge_q#0"], report
    assert report.state == "FAILED"  # one attempt only: the LOST one failed the run
    waiter = wb.get_workflow(second).activity("w")
    assert waiter.state is A.QUEUED
    assert wb.store.pools.get_slot("nudge_q", 0).holder == waiter.activity_exec_id
    assert launched.doubled() == []


def test_bad_input_is_refused_and_nothing_changes(wb: Whimbrel) -> None:
    _define(wb, "nudge_bad")
    wx, first = _claimed(wb, "nudge_bad")
    _lose(wb, wx, first)
    with pytest.raises(WorkflowNotFound, match="no workflow execution 'nope'"):
        wb.nudge("nope")
    for bad in ("", 17, None):
        with pytest.raises(InvalidInput, match="workflow_exec_id"):
            wb.nudge(bad)  # type: ignore[arg-type]
    assert wb.store.get_activity(first) is None
    assert wb.get_workflow(wx).state is W.RUNNING
