"""The engine on DynamoDB Local: the behaviours issue #2 requires, end to end."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import wb_test_activities as acts

from whimbrel import (
    ActivityCancelled,
    ActivityState,
    ActivityTimedOut,
    IllegalTransition,
    LauncherSpec,
    RetryPolicy,
    StateConflict,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel import ActivityDefinition as Act
from whimbrel.testing import wait_until

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

ECHO = LauncherSpec.python("wb_test_activities:echo")
FAIL = LauncherSpec.python("wb_test_activities:fail")
A = ActivityState


def diamond(launcher_d: LauncherSpec = ECHO, **b: object) -> WorkflowDefinition:
    return WorkflowDefinition("diamond", (
        Act("A", launcher=ECHO),
        Act("B", ("A",), launcher=b.pop("launcher", ECHO), **b),  # type: ignore[arg-type]
        Act("C", ("A",), launcher=ECHO),
        Act("D", ("B", "C"), launcher=launcher_d),
    ))


def history(wb: Whimbrel, aeid: str) -> list[str]:
    return [h.state for h in wb.get_activity(aeid).history]


def test_diamond_runs_d_after_b_and_c(wb: Whimbrel) -> None:
    wb.register_workflow(diamond())
    wx = wb.start_workflow("diamond", {"n": 1})
    wf = wb.wait(wx, timeout=30)
    assert wf.state is WorkflowState.COMPLETED
    assert [h.state for h in wf.history] == ["REQUESTED", "RUNNING", "COMPLETED"]
    mine = {(name, what): t for (w, name, what, t) in acts.EVENTS if w == wx}
    assert mine[("D", "start")] > mine[("B", "end")]
    assert mine[("D", "start")] > mine[("C", "end")]
    assert mine[("B", "start")] > mine[("A", "end")]
    assert history(wb, wf.activity("A").activity_exec_id) == [
        "REQUESTED", "QUEUED", "RUNNING", "COMPLETED"]
    assert history(wb, wf.activity("D").activity_exec_id) == [
        "REQUESTED", "READY", "QUEUED", "RUNNING", "COMPLETED"]
    assert wf.output["D"] == {"name": "D", "upstream": ["B", "C"]}


def test_fan_out_fan_in_50(wb: Whimbrel) -> None:
    mids = tuple(Act(f"m{i}", ("start",), launcher=ECHO) for i in range(50))
    defn = WorkflowDefinition("fan", (Act("start", launcher=ECHO), *mids,
                                      Act("end", tuple(m.name for m in mids), launcher=ECHO)))
    wb.register_workflow(defn)
    wx = wb.start_workflow("fan")
    wf = wb.wait(wx, timeout=60)
    assert wf.state is WorkflowState.COMPLETED
    assert len(wf.activities) == 52
    assert wf.activity("end").output["upstream"] == sorted(m.name for m in mids)
    times = {(name, what): t for (w, name, what, t) in acts.EVENTS if w == wx}
    assert all(times[("end", "start")] > times[(m.name, "end")] for m in mids)
    # fan-in edges were consumed: none left for "end"
    assert wb.store.pending_dependencies(wx, "end", limit=None) == []


def test_failure_cancels_downstream_and_waits_for_running(wb: Whimbrel) -> None:
    # B and C are external: C stays RUNNING under the test's control while B fails.
    defn = WorkflowDefinition("fail", (
        Act("A", launcher=ECHO), Act("B", ("A",)), Act("C", ("A",)),
        Act("D", ("B", "C"), launcher=ECHO)))
    wb.register_workflow(defn)
    wx = wb.start_workflow("fail")
    c = wait_until(lambda: wb.claim(workflow_name="fail", activity_name="C"), timeout=20,
                   message="C never became claimable")
    b = wait_until(lambda: wb.claim(workflow_name="fail", activity_name="B"), timeout=20)
    wb.transition_activity(b.activity_exec_id, Transition.FAILED, error="B failed on purpose")
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.FAILED_WAITING
    assert wf.activity("B").state is A.FAILED
    assert "B failed on purpose" in (wf.activity("B").error or "")
    assert wf.activity("D").state is A.CANCELLED
    assert wf.activity("C").state is A.RUNNING
    wb.transition_activity(c.activity_exec_id, Transition.COMPLETED, output={"ok": True})
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.FAILED
    assert wf.error and "activity B FAILED" in wf.error
    assert [h.state for h in wf.history][-2:] == ["FAILED_WAITING", "FAILED"]


def test_retry_after_backoff_driven_by_clock(wb: Whimbrel, clock: Callable[[], float]) -> None:
    defn = WorkflowDefinition("retry", (
        Act("flaky", launcher=LauncherSpec.python("wb_test_activities:flaky"),
            retry=RetryPolicy(max_attempts=2, initial_interval_seconds=30)),))
    wb.register_workflow(defn)
    wx = wb.start_workflow("retry")
    first = f"{wx}:flaky:1"
    wait_until(lambda: wb.get_activity(first).state is A.FAILED, timeout=20)
    # the retry is created by the failure's follow-up, just after the FAILED write
    second = wait_until(lambda: wb.store.get_activity(f"{wx}:flaky:2"), timeout=20)
    second = wb.get_activity(second.activity_exec_id)
    assert second.state is A.REQUESTED
    assert second.not_before_epoch == pytest.approx(
        wb.get_activity(first).ended_epoch + 30, abs=0.01)
    report = wb.sweep()  # not due yet: nothing happens
    assert report.retries_launched == []
    assert wb.get_activity(second.activity_exec_id).state is A.REQUESTED
    clock.advance(31)  # type: ignore[attr-defined]
    report = wb.sweep()
    assert report.retries_launched == [second.activity_exec_id]
    wf = wb.wait(wx, timeout=20)
    assert wf.state is WorkflowState.COMPLETED
    assert wf.activity("flaky").attempt == 2
    assert wf.output == {"flaky": {"attempt": 2}}


def test_cancel_while_running(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("cancel", (
        # A heartbeat asks whether to stop at most every third of its time-out
        # (engine/heartbeats.py): 3 s makes the cancel heard within about a second.
        Act("slow", launcher=LauncherSpec.python("wb_test_activities:wait_for_stop"),
            heartbeat_timeout_seconds=3),
        Act("after", ("slow",), launcher=ECHO)))
    wb.register_workflow(defn)
    wx = wb.start_workflow("cancel")
    aeid = f"{wx}:slow:1"
    wait_until(lambda: wb.get_activity(aeid).state is A.RUNNING, timeout=20)
    wb.cancel_workflow(wx)
    assert wb.get_workflow(wx).state in (WorkflowState.CANCEL_REQUESTED,
                                         WorkflowState.CANCELLED)
    wf = wb.wait(wx, timeout=20)
    assert wf.state is WorkflowState.CANCELLED
    assert history(wb, aeid)[-2:] == ["CANCELLED_RUNNING", "CANCELLED"]
    assert wf.activity("after").state is A.CANCELLED
    with pytest.raises(ActivityCancelled):
        wb.heartbeat(aeid)
    wb.cancel_workflow(wx)  # idempotent on a finished workflow
    assert wb.get_workflow(wx).state is WorkflowState.CANCELLED


def test_heartbeat_time_out_through_sweep(wb: Whimbrel, clock: Callable[[], float]) -> None:
    defn = WorkflowDefinition("hb", (Act("worker", heartbeat_timeout_seconds=10),
                                     Act("next", ("worker",))))
    wb.register_workflow(defn)
    wx = wb.start_workflow("hb")
    act = wait_until(lambda: wb.claim(workflow_name="hb"), timeout=10)
    assert act.state is A.RUNNING
    clock.advance(8)  # type: ignore[attr-defined]
    wb.heartbeat(act.activity_exec_id)
    clock.advance(8)  # type: ignore[attr-defined]
    assert wb.sweep().timed_out == []  # the heartbeat moved the deadline
    clock.advance(3)  # type: ignore[attr-defined]
    assert wb.sweep().timed_out == []  # past the deadline, within the in-flight grace
    clock.advance(wb.engine.in_flight_grace_seconds)  # type: ignore[attr-defined]
    assert wb.sweep().timed_out == [act.activity_exec_id]
    wf = wb.get_workflow(wx)
    assert wf.activity("worker").state is A.TIMED_OUT
    assert "no heartbeat" in (wf.activity("worker").error or "")
    assert wf.activity("next").state is A.CANCELLED
    assert wf.state is WorkflowState.FAILED
    with pytest.raises(ActivityTimedOut):
        wb.heartbeat(act.activity_exec_id)
    # Its late result is kept as late output, never its state (issue 20).
    with pytest.raises(ActivityTimedOut):
        wb.transition_activity(act.activity_exec_id, Transition.COMPLETED, output=7)
    late = wb.get_activity(act.activity_exec_id)
    assert late.state is A.TIMED_OUT and late.late_output == 7


def test_eight_threads_race_one_transition(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("race", (Act("x"),)))
    wx = wb.start_workflow("race")
    aeid = f"{wx}:x:1"
    wait_until(lambda: wb.get_activity(aeid).state is A.READY, timeout=10)
    barrier = threading.Barrier(8)
    results: list[str] = []
    lock = threading.Lock()

    def go() -> None:
        barrier.wait()
        try:
            wb.transition_activity(aeid, Transition.RUNNING)
            outcome = "won"
        except StateConflict:
            outcome = "conflict"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == ["conflict"] * 7 + ["won"]
    assert history(wb, aeid) == ["REQUESTED", "READY", "RUNNING"]


def test_illegal_transition_is_not_a_conflict(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("ill", (Act("x"),)))
    wx = wb.start_workflow("ill")
    aeid = f"{wx}:x:1"
    wait_until(lambda: wb.get_activity(aeid).state is A.READY, timeout=10)
    with pytest.raises(IllegalTransition, match="COMPLETED from state READY"):
        wb.transition_activity(aeid, Transition.COMPLETED)
    with pytest.raises(IllegalTransition):
        wb.transition_activity(aeid, Transition.TIME_OUT)
    assert wb.get_activity(aeid).state is A.READY


def test_same_request_twice_is_one_execution(wb: Whimbrel, table_prefix: str) -> None:
    # The run's id follows from the request id alone: one of this test's own, since the
    # activities' record of starts is shared by every test of this process.
    request_id = f"order-42-{table_prefix}"
    wb.register_workflow(diamond())
    first = wb.start_workflow("diamond", request_id=request_id)
    second = wb.start_workflow("diamond", request_id=request_id)
    assert first == second
    wf = wb.wait(first, timeout=30)
    assert wf.state is WorkflowState.COMPLETED
    assert len(wf.activities) == 4
    assert sum(1 for (w, n, what, _) in acts.EVENTS if w == first and what == "start") == 4
    assert wb.start_workflow("diamond", request_id=request_id) == first


def test_definition_change_does_not_touch_running_workflow(wb: Whimbrel) -> None:
    v1 = wb.register_workflow(WorkflowDefinition("evolve", (Act("one"), Act("two", ("one",)))))
    wx = wb.start_workflow("evolve")
    v2 = wb.register_workflow(WorkflowDefinition("evolve", (Act("one"), Act("other"))))
    assert (v1, v2) == (1, 2)
    assert wb.register_workflow(WorkflowDefinition("evolve", (Act("one"), Act("other")))) == 2
    first = wait_until(lambda: wb.claim(workflow_name="evolve"), timeout=10)
    wb.transition_activity(first.activity_exec_id, Transition.COMPLETED)
    second = wait_until(lambda: wb.claim(workflow_name="evolve"), timeout=10)
    assert second.activity_name == "two"
    wb.transition_activity(second.activity_exec_id, Transition.COMPLETED)
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.COMPLETED and wf.version == 1
    assert sorted(a.activity_name for a in wf.activities) == ["one", "two"]


def test_run_activity_context_records_output_and_errors(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("ctx", (Act("a"), Act("b", ("a",)))))
    wx = wb.start_workflow("ctx", {"city": "Oslo"})
    with wb.run_activity(f"{wx}:a:1") as run:
        assert run.input == {"city": "Oslo"}
        run.output = {"temp": 3}
    b = wait_until(lambda: wb.get_activity(f"{wx}:b:1").state is A.READY and f"{wx}:b:1",
                   timeout=10)
    with pytest.raises(ZeroDivisionError), wb.run_activity(b) as run:
        assert run.upstream == {"a": {"temp": 3}}
        1 / 0  # noqa: B018
    wf = wb.get_workflow(wx)
    assert wf.activity("b").state is A.FAILED
    assert "ZeroDivisionError" in (wf.activity("b").error or "")
    assert wf.state is WorkflowState.FAILED
