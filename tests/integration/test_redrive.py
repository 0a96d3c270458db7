"""Redrive: an ended run goes on from where it broke."""

from __future__ import annotations

import threading

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
from whimbrel.testing import assert_contract_holds

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
    claimed = wb.claim(workflow_name="held")
    assert claimed is not None and claimed.activity_exec_id == gate_aeid
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
