"""Issue 29, batch operations: ``Whimbrel.batch`` cancels, redrives, signals, suspends and
resumes every run a filter selects, on DynamoDB Local; resumable (an interrupted batch run
again acts on what is left, never twice on one run), paced, and refusing bad input with
nothing changed."""

from __future__ import annotations

from typing import Any

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    InvalidInput,
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.client.batch import plan, run_batch
from whimbrel.testing import StepClock

CLOCK = StepClock
W = WorkflowState
EXT = LauncherSpec.external()


def _failing(wb: Whimbrel, name: str, n: int) -> list[str]:
    """``n`` runs of ``name`` that FAILED (one external attempt, failed)."""
    wb.register_workflow(WorkflowDefinition(name, (Act(
        "w", launcher=EXT, retry=RetryPolicy(max_attempts=1)),)))
    ids = [wb.start_workflow(name) for _ in range(n)]
    for _ in ids:
        got = wb.claim(workflow_name=name)
        assert got is not None
        wb.transition_activity(got.activity_exec_id, Transition.FAILED, error="boom")
    assert all(wb.get_workflow(wx).state is W.FAILED for wx in ids)
    return ids


def _tags(wb: Whimbrel, wx: str, batch_id: str) -> int:
    return sum(h.by == f"batch:{batch_id}" for h in wb.get_workflow(wx).history)


def test_redrive_a_definitions_failures_resumably_and_never_twice(
        wb: Whimbrel, clock: StepClock) -> None:
    ids = _failing(wb, "batch_etl", 5)
    other = _failing(wb, "batch_other", 1)
    seen: list[str] = []

    def stop_after_two(wx: str, outcome: str) -> None:
        seen.append(outcome)
        if len(seen) == 2:
            raise KeyboardInterrupt  # the operator's Ctrl-C mid-batch

    with pytest.raises(KeyboardInterrupt):
        wb.batch("redrive", name="batch_etl", since="1h", progress=stop_after_two)
    report = wb.batch("redrive", name="batch_etl", since="1h")
    assert report.matched == 5 and len(report.done) == 3, report
    assert set(report.skipped) | set(report.done) == set(ids)
    assert set(report.skipped.values()) == {"already done by this batch"}
    for wx in ids:
        wf = wb.get_workflow(wx)
        assert (wf.state, wf.redrive_count) == (W.RUNNING, 1), wf
        assert _tags(wb, wx, report.batch_id) == 1
    assert wb.get_workflow(other[0]).state is W.FAILED  # another definition: untouched
    again = wb.batch("redrive", name="batch_etl", since="1h")
    assert (again.done, len(again.skipped)) == ([], 5)


def test_a_dry_run_changes_nothing_and_cancel_acts_on_live_runs(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("batch_live", (Act("w", launcher=EXT),)))
    live = [wb.start_workflow("batch_live") for _ in range(3)]
    ended = _failing(wb, "batch_live_failed", 1)
    dry = wb.batch("cancel", state=[W.RUNNING, W.FAILED], dry_run=True)
    assert dry.dry_run and sorted(dry.would) == sorted(live) and dry.done == []
    assert set(dry.skipped) == set(ended)
    assert all(wb.get_workflow(wx).state is W.RUNNING for wx in live)
    report = wb.batch("cancel", state=[W.RUNNING, W.FAILED])
    assert sorted(report.done) == sorted(live)
    assert report.skipped == {ended[0]: "already FAILED"}
    assert all(wb.get_workflow(wx).state is W.CANCELLED for wx in live)


def test_signal_suspend_and_resume_in_batches(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("batch_wait", (
        Act("paid", launcher=LauncherSpec.signal("paid")),
        Act("ship", ("paid",), launcher=EXT))))
    ids = [wb.start_workflow("batch_wait") for _ in range(3)]
    suspended = wb.batch("suspend", name="batch_wait")
    assert sorted(suspended.done) == sorted(ids)
    assert all(wb.get_workflow(wx).state is W.SUSPENDED for wx in ids)
    resumed = wb.batch("resume", name="batch_wait", state="SUSPENDED")
    assert sorted(resumed.done) == sorted(ids)
    report = wb.batch("signal", name="batch_wait", signal="paid", payload={"ok": True})
    assert sorted(report.done) == sorted(ids)
    for wx in ids:
        assert wb.get_workflow(wx).activity("paid").output == {"ok": True}
    # Sent again (same batch): the signal id is the batch's, so it counts once.
    wb.batch("signal", name="batch_wait", signal="paid", payload={"ok": True})
    assert all(wb.get_workflow(wx).activity("ship").attempt == 1 for wx in ids)


def test_a_refused_run_is_reported_and_the_batch_goes_on(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("batch_nosig", (Act("w", launcher=EXT),)))
    wx = wb.start_workflow("batch_nosig")
    report = wb.batch("signal", name="batch_nosig", signal="paid")
    assert report.done == [] and list(report.refused) == [wx]
    assert "paid" in report.refused[wx]


def test_the_rate_limit_paces_the_actions(wb: Whimbrel, clock: StepClock) -> None:
    _failing(wb, "batch_paced", 4)
    now = [0.0]
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(round(seconds, 6))
        now[0] += seconds

    p = plan("redrive", name="batch_paced", state="FAILED", since=None, until=None,
             attributes=None, per_second=2.0, signal=None, payload=None, batch_id=None,
             all_runs=False, now=clock())
    report = run_batch(wb.engine, wb.store, wb.clock, p, sleep=sleep,
                       monotonic=lambda: now[0])
    assert len(report.done) == 4
    assert pauses == [0.5, 0.5, 0.5]  # the n-th action no sooner than n / 2 s in


@pytest.mark.parametrize("kwargs, field", [
    ({}, "filters"),
    ({"name": "batch_bad", "action": "delete"}, "action"),
    ({"name": "batch_bad", "per_second": 0}, "per_second"),
    ({"name": "batch_bad", "per_second": float("inf")}, "per_second"),
    ({"name": "batch_bad", "action": "signal"}, "signal"),
    ({"name": "batch_bad", "payload": {"x": 1}}, "signal"),
    ({"name": "no such name!"}, "name"),
    ({"state": "NOPE"}, "state"),
    ({"since": "yesterday-ish"}, "since"),
    ({"name": "batch_bad", "batch_id": "a b"}, "batch_id"),
])
def test_bad_input_is_refused_and_nothing_changes(wb: Whimbrel, kwargs: dict[str, Any],
                                                  field: str) -> None:
    ids = _failing(wb, "batch_bad", 1)
    action = kwargs.pop("action", "redrive")
    with pytest.raises(InvalidInput) as err:
        wb.batch(action, **kwargs)
    assert err.value.to_dict().get("field") == field, err.value
    assert wb.get_workflow(ids[0]).state is W.FAILED
