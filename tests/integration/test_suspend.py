"""Suspend and resume (issue 13): a SUSPENDED run starts nothing new, lets what runs run
to its end, holds the deadlines of what has not started, and goes on where it was when
resumed. Time is driven through ``sweep(now)`` by a stepped clock."""

from __future__ import annotations

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import (
    LauncherSpec,
    NotAllowedNow,
    RetryPolicy,
    StateConflict,
    Transition,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel import WorkflowState as W
from whimbrel.contract.errors import WorkflowNotRunning
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import RecordingLauncher, StepClock, assert_contract_holds

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

LAMBDA = LauncherSpec("lambda", {"function": "f"})

SHOP = WorkflowDefinition("shop", (
    Act("pick"),                                   # external, claimed
    Act("pack", ("pick",), launcher=LAMBDA),       # push, launched by the hand-off
    Act("label"),                                  # external root, left READY
    Act("post", ("pack", "label"))))


#: The ``clock`` fixture (conftest.py) stands still until the test moves it.
CLOCK = StepClock


def test_a_suspended_run_starts_nothing_and_resumes_where_it_was(
        wb: Whimbrel, launched: RecordingLauncher) -> None:
    wb.register_workflow(SHOP)
    wx = wb.start_workflow("shop")
    pick = wb.claim(workflow_name="shop", activity_name="pick")
    assert pick is not None
    wb.suspend_workflow(wx)
    assert wb.get_workflow(wx).state is W.SUSPENDED
    wb.suspend_workflow(wx)  # idempotent
    # Nothing is claimed: the READY external left the claimable index.
    assert wb.claim(workflow_name="shop") is None
    label = activity_exec_id(wx, "label", 1)
    assert wb.store.get_activity(label).claim_key is None  # type: ignore[union-attr]
    with pytest.raises(WorkflowNotRunning, match="SUSPENDED"):
        wb.transition_activity(label, "RUNNING")
    # What was running runs to its end and is recorded; its dependent waits in READY.
    wb.heartbeat(pick.activity_exec_id)
    wb.transition_activity(pick.activity_exec_id, "COMPLETED", output={"n": 3})
    wf = wb.get_workflow(wx)
    assert wf.activity("pick").state is A.COMPLETED and wf.state is W.SUSPENDED
    assert wf.activity("pack").state is A.READY
    assert launched.take() == []
    # Resume: the dependent is launched, the external can be claimed again.
    wb.resume_workflow(wx)
    assert wb.get_workflow(wx).state is W.RUNNING
    assert [r.activity_name for r in launched.take()] == ["pack"]
    claimed = wb.claim(workflow_name="shop")
    assert claimed is not None and claimed.activity_name == "label"
    wb.resume_workflow(wx)  # resuming a running run: nothing to do
    assert launched.take() == []
    pack = activity_exec_id(wx, "pack", 1)
    wb.transition_activity(pack, "RUNNING")
    wb.transition_activity(pack, "COMPLETED")
    wb.transition_activity(claimed.activity_exec_id, "COMPLETED")
    post = wb.claim(workflow_name="shop")
    assert post is not None
    wb.transition_activity(post.activity_exec_id, "COMPLETED")
    wf = wb.get_workflow(wx)
    assert wf.state is W.COMPLETED
    assert [h.state for h in wf.history] == ["REQUESTED", "RUNNING", "SUSPENDED", "RUNNING",
                                            "COMPLETED"]
    assert_contract_holds(wf, SHOP)


def test_an_attempt_launched_before_the_suspend_may_still_start(
        wb: Whimbrel, launched: RecordingLauncher) -> None:
    wb.register_workflow(SHOP)
    wx = wb.start_workflow("shop")
    pick = wb.claim(workflow_name="shop", activity_name="pick")
    assert pick is not None
    wb.transition_activity(pick.activity_exec_id, "COMPLETED")
    assert [r.activity_name for r in launched.take()] == ["pack"]  # QUEUED, launched
    wb.suspend_workflow(wx)
    pack = activity_exec_id(wx, "pack", 1)
    assert wb.transition_activity(pack, "RUNNING").state is A.RUNNING
    wb.transition_activity(pack, "COMPLETED")
    assert wb.get_workflow(wx).state is W.SUSPENDED


def test_the_last_completion_while_suspended_ends_the_run_on_resume(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("one", (Act("only"),))
    wb.register_workflow(defn)
    wx = wb.start_workflow("one")
    only = wb.claim(workflow_name="one")
    assert only is not None
    wb.suspend_workflow(wx)
    wb.transition_activity(only.activity_exec_id, "COMPLETED")
    assert wb.get_workflow(wx).state is W.SUSPENDED
    wb.resume_workflow(wx)
    assert wb.get_workflow(wx).state is W.COMPLETED


def test_deadlines_due_while_suspended_fire_on_resume(wb: Whimbrel, clock: StepClock,
                                                      launched: RecordingLauncher) -> None:
    defn = WorkflowDefinition("held", (
        Act("timer", launcher=LauncherSpec.timer(60)),
        Act("flaky", launcher=LAMBDA, retry=RetryPolicy(max_attempts=2,
                                                         initial_interval_seconds=30)),
        Act("runner", heartbeat_timeout_seconds=100,
            retry=RetryPolicy(max_attempts=2, initial_interval_seconds=0))))
    wb.register_workflow(defn)
    wx = wb.start_workflow("held")
    runner = wb.claim(workflow_name="held")
    assert runner is not None
    first = activity_exec_id(wx, "flaky", 1)
    wb.transition_activity(first, "RUNNING")
    wb.suspend_workflow(wx)
    wb.transition_activity(first, "FAILED", error="boom")  # its retry is due in 30 s
    report = wb.sweep(clock.advance(120))
    # Held, not fired: the timer, and the retry's not-before time...
    assert report.timers_fired == [] and report.retries_launched == []
    timer = wb.store.get_activity(activity_exec_id(wx, "timer", 1))
    assert timer is not None and timer.held_epoch is not None and timer.timer_epoch is None
    # ...but what runs still times out; its retry waits READY, not claimable.
    assert report.timed_out == [runner.activity_exec_id]
    assert wb.get_workflow(wx).activity("runner").state is A.READY
    assert wb.claim(workflow_name="held") is None
    wb.meter.reset()
    assert wb.sweep(clock.advance(60)).timers_fired == []
    # one request per sparse index (timers of both attempt tables, reconcile, schedules,
    # pool checks): held deadlines cost nothing more, and with nothing due no lease is
    # taken
    assert wb.meter.calls == {"ExecuteStatement": 5}
    launched.take()
    wb.resume_workflow(wx)
    wf = wb.get_workflow(wx)
    assert wf.activity("timer").state is A.COMPLETED
    assert wf.activity("flaky").attempt == 2
    assert [r.activity_exec_id for r in launched.take()] == [activity_exec_id(wx, "flaky", 2)]
    assert all(a.held_epoch is None for a in wb.store.list_activities(wx))
    again = wb.claim(workflow_name="held")
    assert again is not None and again.activity_exec_id == activity_exec_id(wx, "runner", 2)
    assert_contract_holds(wb.get_workflow(wx), defn)


def test_cancel_and_timeout_end_a_suspended_run(wb: Whimbrel, clock: StepClock) -> None:
    defn = WorkflowDefinition("bounded", (Act("a"), Act("b", ("a",))), timeout_seconds=600)
    wb.register_workflow(defn)
    wx = wb.start_workflow("bounded")
    a = wb.claim(workflow_name="bounded")
    assert a is not None
    wb.suspend_workflow(wx)
    wb.cancel_workflow(wx)
    assert wb.get_workflow(wx).state is W.CANCEL_REQUESTED  # a still runs
    wb.transition_activity(a.activity_exec_id, "COMPLETED")
    wf = wb.get_workflow(wx)
    assert wf.state is W.CANCELLED and wf.activity("b").state is A.CANCELLED
    with pytest.raises(NotAllowedNow, match="only a SUSPENDED workflow can be resumed"):
        wb.resume_workflow(wx)
    with pytest.raises(NotAllowedNow, match="only a RUNNING workflow can be suspended"):
        wb.suspend_workflow(wx)
    wx2 = wb.start_workflow("bounded")
    wb.suspend_workflow(wx2)
    assert wb.sweep(clock.advance(601)).workflows_timed_out == [wx2]
    assert wb.get_workflow(wx2).state is W.TIMED_OUT
    assert_contract_holds(wb.get_workflow(wx2), defn)


def test_signals_and_decisions_reach_a_suspended_run(wb: Whimbrel,
                                                     launched: RecordingLauncher) -> None:
    defn = WorkflowDefinition("paused", (
        Act("paid", launcher=LauncherSpec.signal("paid")),
        Act("ok", launcher=LauncherSpec.approval()),
        Act("ship", ("paid", "ok"), launcher=LAMBDA)))
    wb.register_workflow(defn)
    wx = wb.start_workflow("paused")
    wb.suspend_workflow(wx)
    wb.signal(wx, "paid", {"eur": 10})
    wb.approve(activity_exec_id(wx, "ok", 1), by="carol")
    wf = wb.get_workflow(wx)
    assert wf.activity("paid").state is A.COMPLETED and wf.activity("ok").state is A.COMPLETED
    assert wf.activity("ship").state is A.READY and launched.take() == []
    wb.resume_workflow(wx)
    assert [r.activity_name for r in launched.take()] == ["ship"]


def test_a_claim_from_a_stale_index_read_takes_nothing_once_suspended(wb: Whimbrel) -> None:
    """The claimable index is read eventually consistent: a worker may still see an
    entry the suspend removed. Its claim is conditional on the entry, so it loses."""
    wb.register_workflow(WorkflowDefinition("lagging", (Act("only"),)))
    wx = wb.start_workflow("lagging")
    hits = [h for shard in wb.store.claim_shards
            for h in wb.store.claimable(shard, "lagging/", 10)]
    assert [h.activity_name for h in hits] == ["only"]
    wb.suspend_workflow(wx)
    with pytest.raises(StateConflict):
        wb.engine.flow.apply(hits[0], Transition.RUNNING, claimed=True)
    assert wb.get_activity(activity_exec_id(wx, "only", 1)).state is A.READY
    wb.resume_workflow(wx)
    assert wb.claim(workflow_name="lagging") is not None
