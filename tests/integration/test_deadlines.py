"""Runs that always end (issue 11, part 2): every deadline is found by ``sweep(now)``
through the sparse indexes, driven by a stepped clock (no sleeping)."""

from __future__ import annotations

import pytest

from whimbrel import (
    ActivityCancelled,
    ActivityTimedOut,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel.contract.ids import activity_exec_id, shard_of
from whimbrel.store import specs
from whimbrel.testing import RecordingLauncher, StepClock

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

LAMBDA = LauncherSpec("lambda", {"function": "f"})


#: The ``clock`` fixture (conftest.py) stands still until the test moves it.
CLOCK = StepClock


def test_start_to_close_caps_a_run_that_keeps_heartbeating(wb: Whimbrel,
                                                           clock: StepClock) -> None:
    wb.register_workflow(WorkflowDefinition("capped", (Act(
        "long", heartbeat_timeout_seconds=30, start_to_close_seconds=100,
        retry=RetryPolicy(max_attempts=2, initial_interval_seconds=0)),)))
    wx = wb.start_workflow("capped")
    act = wb.claim(workflow_name="capped")
    assert act is not None
    for _ in range(3):  # alive all along: a heartbeat every 25 s
        clock.advance(25)
        wb.heartbeat(act.activity_exec_id)
        assert wb.sweep(clock()).timed_out == []
    clock.advance(24)
    wb.heartbeat(act.activity_exec_id)
    assert wb.sweep(clock()).timed_out == []
    assert wb.sweep(clock.advance(1)).timed_out == []  # 100 s: results may be in flight
    # 100 s after it started, and the in-flight grace (docs/architecture.md).
    report = wb.sweep(clock.advance(wb.engine.in_flight_grace_seconds))
    assert report.timed_out == [act.activity_exec_id]
    first = wb.get_activity(act.activity_exec_id)
    assert first.state is A.TIMED_OUT and "start_to_close_seconds" in (first.error or "")
    with pytest.raises(ActivityTimedOut):
        wb.heartbeat(act.activity_exec_id)
    # Its retry policy follows: attempt 2 is READY to be claimed at once.
    assert wb.get_workflow(wx).activity("long").attempt == 2
    assert wb.get_workflow(wx).activity("long").state is A.READY


def test_a_heartbeat_never_pushes_the_deadline_past_the_close(wb: Whimbrel,
                                                               clock: StepClock) -> None:
    wb.register_workflow(WorkflowDefinition("close", (Act(
        "x", heartbeat_timeout_seconds=60, start_to_close_seconds=90),)))
    wb.start_workflow("close")
    act = wb.claim(workflow_name="close")
    assert act is not None
    clock.advance(50)
    wb.heartbeat(act.activity_exec_id)  # the heartbeat deadline would be +110 s
    raw = wb.store.get_activity(act.activity_exec_id)
    # The heartbeat moves the real deadline (deadline_epoch), never the timers entry,
    # which stays where the claim armed it (the heartbeat deadline, +60 s).
    assert raw is not None and raw.deadline_epoch == raw.close_epoch == act.started_epoch + 90
    assert raw.timer_epoch == act.started_epoch + 60
    # The sweep at the armed time finds the attempt alive and re-arms to the close...
    assert wb.sweep(clock.advance(10)).timed_out == []
    raw = wb.store.get_activity(act.activity_exec_id)
    assert raw is not None and raw.timer_epoch == act.started_epoch + 90
    # ...where it times out, whatever heartbeats say (past the in-flight grace).
    wb.heartbeat(act.activity_exec_id)
    report = wb.sweep(clock.advance(30 + wb.engine.in_flight_grace_seconds))
    assert report.timed_out == [act.activity_exec_id]


def test_an_external_nobody_claims_times_out_and_retries(wb: Whimbrel,
                                                         clock: StepClock) -> None:
    wb.register_workflow(WorkflowDefinition("unclaimed", (Act(
        "wait", schedule_to_start_seconds=300,
        retry=RetryPolicy(max_attempts=2, initial_interval_seconds=10)),)))
    wx = wb.start_workflow("unclaimed")
    first = activity_exec_id(wx, "wait", 1)
    assert wb.sweep(clock.advance(299)).timed_out == []
    assert wb.sweep(clock.advance(2)).timed_out == [first]
    timed_out = wb.get_activity(first)
    assert timed_out.state is A.TIMED_OUT and "nobody claimed it" in (timed_out.error or "")
    assert wb.claim(workflow_name="unclaimed") is None  # nothing claimable meanwhile
    assert wb.sweep(clock.advance(10)).retries_launched == [activity_exec_id(wx, "wait", 2)]
    assert wb.sweep(clock.advance(301)).timed_out == [activity_exec_id(wx, "wait", 2)]
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.FAILED and "TIMED_OUT after 2 attempt(s)" in (wf.error or "")


def test_a_launch_that_never_starts_times_out(wb: Whimbrel, clock: StepClock,
                                              launched: RecordingLauncher) -> None:
    wb.register_workflow(WorkflowDefinition("lost", (Act(
        "push", launcher=LAMBDA, start_timeout_seconds=60,
        retry=RetryPolicy(max_attempts=2, initial_interval_seconds=0)),)))
    wx = wb.start_workflow("lost")
    first = activity_exec_id(wx, "push", 1)
    assert [r.activity_exec_id for r in launched.take()] == [first]
    assert wb.get_activity(first).state is A.QUEUED
    assert wb.sweep(clock.advance(61)).timed_out == [first]
    assert "launch lost" in (wb.get_activity(first).error or "")
    # The retry is launched again, and this time it starts and completes.
    second = activity_exec_id(wx, "push", 2)
    assert [r.activity_exec_id for r in launched.take()] == [second]
    wb.transition_activity(second, "RUNNING")
    wb.transition_activity(second, "COMPLETED")
    assert wb.get_workflow(wx).state is WorkflowState.COMPLETED


def test_the_workflow_deadline_ends_the_run(wb: Whimbrel, clock: StepClock) -> None:
    wb.register_workflow(WorkflowDefinition("bounded", (
        Act("first", heartbeat_timeout_seconds=6000), Act("second", ("first",)),
        Act("side")), timeout_seconds=3600))
    wx = wb.start_workflow("bounded")
    running = wb.claim(workflow_name="bounded", activity_name="first")
    assert running is not None
    assert wb.sweep(clock.advance(3599)).workflows_timed_out == []
    report = wb.sweep(clock.advance(2))
    assert report.workflows_timed_out == [wx]
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.TIMED_OUT and "timed out after 3600" in (wf.error or "")
    assert wf.activity("second").state is A.CANCELLED
    assert wf.activity("side").state is A.CANCELLED
    # The running activity learns of it through its heartbeat, as with a cancel.
    assert wf.activity("first").state is A.CANCELLED_RUNNING
    with pytest.raises(ActivityCancelled):
        wb.heartbeat(running.activity_exec_id)
    wb.transition_activity(running.activity_exec_id, "COMPLETED", output={"late": True})
    wf = wb.get_workflow(wx)
    assert wf.activity("first").state is A.CANCELLED
    assert wf.state is WorkflowState.TIMED_OUT
    assert wb.store.get_workflow(wx).check_epoch is None  # nothing left to visit


def test_the_sweep_reads_only_what_is_due(wb: Whimbrel, clock: StepClock) -> None:
    retry = RetryPolicy(max_attempts=2, initial_interval_seconds=600)
    wb.register_workflow(WorkflowDefinition("many", tuple(
        Act(f"a{i}", heartbeat_timeout_seconds=60 if i < 2 else 6000, retry=retry)
        for i in range(12))))
    wb.start_workflow("many")
    for _ in range(12):
        assert wb.claim(workflow_name="many") is not None
    wb.sweep(clock())  # nothing due: the first reconcile visit is 120 s away
    wb.meter.reset()
    # Past the 60 s deadline and the in-flight grace (docs/architecture.md).
    report = wb.sweep(clock.advance(61 + wb.engine.in_flight_grace_seconds))
    assert len(report.timed_out) == 2
    calls = wb.meter.snapshot()["calls"]
    # Which shards have something due, one request per sparse index (timers of both
    # attempt tables, reconcile, due_schedules, pool_checks); then, per timer shard
    # holding something due, its lease taken (and given back) and its page read (of
    # map_item's too, for its 8 shards); per due activity (not per running one) a read
    # of it and of its workflow for the follow-ups (a retry, here).
    busy = {shard_of(a, specs.TIMER_SHARDS) for a in report.timed_out}
    assert sorted(report.leases) == sorted(specs.sweep_lease_id(int(k)) for k in busy)
    assert calls["ExecuteStatement"] == 5
    assert calls["Query"] == len(busy) + sum(
        1 for k in busy if int(k) < specs.MAP_ITEM_INDEX_SHARDS)
    assert calls["GetItem"] == 2 * 2
    # The leases taken and given back; each retry's new attempt.
    assert (calls["PutItem"], calls["DeleteItem"]) == (len(busy) + 2, len(busy))
    # An idle pass writes nothing: no lease is taken where nothing is due.
    wb.meter.reset()
    idle = wb.sweep(clock())
    assert idle.leases == [] and wb.meter.snapshot()["calls"] == {"ExecuteStatement": 5}
