"""Redrive: an ended run goes on from where it broke."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import wb_data_activities as data

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    RedriveNotAllowed,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import Crash, FaultInjector, assert_contract_holds, wait_until

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

A, W = ActivityState, WorkflowState
py = LauncherSpec.python


def pipeline() -> WorkflowDefinition:
    return WorkflowDefinition("redrivable", (
        Act("a", launcher=py("wb_data_activities:item")),
        Act("b", ("a",), launcher=py("wb_data_activities:flaky_item"),
            retry=RetryPolicy(max_attempts=2, initial_interval_seconds=0)),
        Act("c", ("a",), launcher=py("wb_data_activities:item")),
        Act("d", ("b", "c"), launcher=py("wb_data_activities:summary")),
    ))


def test_redrive_runs_only_what_did_not_complete(wb: Whimbrel) -> None:
    defn = pipeline()
    wb.register_workflow(defn)
    data.FAILING.add("broken")
    wx = wb.start_workflow("redrivable", {"fail": "broken"})
    failed = wb.wait(wx, timeout=30)
    assert failed.state is W.FAILED
    assert failed.activity("b").attempt == 2
    runs_before = [r for r in data.RUNS if r[0] == wx]
    data.FAILING.discard("broken")  # "fix the bug"
    wb.redrive_workflow(wx)
    wf = wb.wait(wx, timeout=30)
    assert wf.state is W.COMPLETED, wf
    assert wf.redrive_count == 1
    assert [h.state for h in wf.history][-3:] == ["FAILED", "RUNNING", "COMPLETED"]
    # a and c ran once; b got a third attempt (a fresh retry budget), d its second.
    runs = [r for r in data.RUNS if r[0] == wx]
    assert [r for r in runs if r[1] in ("a", "c")] == \
        [r for r in runs_before if r[1] in ("a", "c")]
    assert wf.activity("b").attempt == 3 and wf.activity("d").attempt == 2
    assert wf.activity("a").attempt == 1 and wf.activity("c").attempt == 1
    assert wf.ended_epoch is not None and wf.error is None
    assert_contract_holds(wf, defn)
    with pytest.raises(RedriveNotAllowed, match="only a FAILED, CANCELLED or TIMED_OUT"):
        wb.redrive_workflow(wx)


def test_redrive_a_cancelled_run_and_concurrent_redrives(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("held", (
        Act("first", launcher=py("wb_data_activities:noop")),
        Act("gate", ("first",)),  # external: nobody claims it
        Act("last", ("gate",), launcher=py("wb_data_activities:noop")),
    ))
    wb.register_workflow(defn)
    wx = wb.start_workflow("held")
    wb.cancel_workflow(wx)
    assert wb.wait(wx, timeout=30).state is W.CANCELLED
    gate = threading.Barrier(4)
    results: list[object] = []

    def redrive() -> None:
        gate.wait()
        try:
            wb.redrive_workflow(wx)
            results.append("ok")
        except RedriveNotAllowed as exc:
            results.append(exc)

    threads = [threading.Thread(target=redrive) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("ok") == 1, results
    wf = wb.get_workflow(wx)
    assert wf.state is W.RUNNING and wf.redrive_count == 1
    latest = wf.latest_activities
    gate_aeid = latest["gate"].activity_exec_id
    assert latest["gate"].attempt == 2 and latest["gate"].state in (A.REQUESTED, A.READY)
    # "first" may have been cancelled before it ran: its new attempt runs in this
    # process first, and only then is the gate READY to claim.
    claimed = wait_until(lambda: wb.claim(workflow_name="held"), timeout=30,
                         message="the redriven gate was never claimable")
    assert claimed.activity_exec_id == gate_aeid
    wb.transition_activity(gate_aeid, Transition.COMPLETED)
    done = wb.wait(wx, timeout=30)
    assert done.state is W.COMPLETED
    assert_contract_holds(done, defn)


def test_redrive_refused_while_running_or_unknown(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("live", (Act("x"),))
    wb.register_workflow(defn)
    wx = wb.start_workflow("live")
    with pytest.raises(RedriveNotAllowed, match="is RUNNING"):
        wb.redrive_workflow(wx)
    aeid = activity_exec_id(wx, "x", 1)
    wb.transition_activity(aeid, Transition.RUNNING)
    wb.transition_activity(aeid, Transition.FAILED, error="boom")
    assert wb.wait(wx).state is W.FAILED
    wb.redrive_workflow(wx)
    assert wb.get_workflow(wx).latest_activities["x"].attempt == 2


def test_redrive_a_timed_out_run_gets_its_whole_timeout_again(wb: Whimbrel,
                                                              clock: Any) -> None:
    defn = WorkflowDefinition("slowpoke", (Act("x"), Act("y", ("x",))), timeout_seconds=600)
    wb.register_workflow(defn)
    wx = wb.start_workflow("slowpoke")
    x = activity_exec_id(wx, "x", 1)
    wb.transition_activity(x, Transition.RUNNING)
    wb.transition_activity(x, Transition.COMPLETED, output={"x": 1})
    clock.advance(601)
    assert wx in wb.sweep().workflows_timed_out
    timed_out = wb.get_workflow(wx)
    assert timed_out.state is W.TIMED_OUT and timed_out.activity("y").state is A.CANCELLED
    wb.redrive_workflow(wx)
    again = wb.get_workflow(wx)
    assert again.state is W.RUNNING and again.activity("x").attempt == 1
    clock.advance(300)  # half the timeout, counted from the redrive
    assert wx not in wb.sweep().workflows_timed_out
    y = activity_exec_id(wx, "y", 2)
    wb.transition_activity(y, Transition.RUNNING)
    wb.transition_activity(y, Transition.COMPLETED)
    done = wb.get_workflow(wx)
    assert done.state is W.COMPLETED
    assert_contract_holds(done, defn)


def test_a_redrive_that_crashed_half_way_is_finished_once(wb: Whimbrel, clock: Any) -> None:
    defn = WorkflowDefinition("halfway", (
        Act("a"), Act("b"), Act("c", ("a", "b")), Act("d", ("c",))))
    wb.register_workflow(defn)
    wx = wb.start_workflow("halfway")
    a1 = activity_exec_id(wx, "a", 1)
    wb.transition_activity(a1, Transition.RUNNING)
    wb.transition_activity(a1, Transition.FAILED, error="first go")
    assert wb.wait(wx).state is W.FAILED  # (b was cancelled with it)
    # The redriver dies after its second write (the move, then one new attempt).
    crash = FaultInjector(at=2, phase="after")
    wb.store.write_hooks.append(crash)
    with pytest.raises(Crash):
        wb.redrive_workflow(wx)
    wb.store.write_hooks.remove(crash)
    assert wb.get_workflow(wx).state is W.RUNNING
    with pytest.raises(RedriveNotAllowed, match="is RUNNING"):
        wb.redrive_workflow(wx)  # it did take effect: once
    clock.advance(200)
    assert wx in wb.sweep().reconciled  # the reconciler finishes phase one, then two
    wf = wb.get_workflow(wx)
    assert wf.redrive_count == 1
    assert {n: (a.attempt, a.state) for n, a in wf.latest_activities.items()} == {
        "a": (2, A.READY), "b": (2, A.READY), "c": (2, A.REQUESTED), "d": (2, A.REQUESTED)}
    for name in ("a", "b", "c", "d"):
        aeid = activity_exec_id(wx, name, 2)
        if name == "a":  # c waits for both: b still runs, so a's end readies nothing
            wb.transition_activity(aeid, Transition.RUNNING)
            wb.transition_activity(aeid, Transition.COMPLETED)
            assert wb.get_activity(activity_exec_id(wx, "c", 2)).state is A.REQUESTED
            continue
        wb.transition_activity(aeid, Transition.RUNNING)
        wb.transition_activity(aeid, Transition.COMPLETED)
    done = wb.get_workflow(wx)
    assert done.state is W.COMPLETED
    assert [h.state for h in done.history].count("COMPLETED") == 1
    assert_contract_holds(done, defn)
