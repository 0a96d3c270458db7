"""Issue 20: a lost attempt row is noticed (LOST, then the retry policy decides with a new
attempt id), and a result that comes after the system gave up on an attempt is kept as
``late_output``/``late_error`` without changing its state (decisions 4 and 5).

Written to fail on the main of the day the issue was filed. The clock stands still
(``CLOCK = StepClock``): deadlines and reconcile visits come due when the test moves it.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    ActivityTimedOut,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.cli import app
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import StepClock, wait_until

CLOCK = StepClock
A, W = ActivityState, WorkflowState
EXT = LauncherSpec.external()
#: Past any reconcile interval (at most an hour) and any deadline below.
LONG = 2 * 3600.0


def _define(wb: Whimbrel, name: str, attempts: int, **act: Any) -> None:
    wb.register_workflow(WorkflowDefinition(name, (
        Act("w", launcher=EXT, retry=RetryPolicy(max_attempts=attempts,
                                                 initial_interval_seconds=0.0), **act),)))


def _claimed(wb: Whimbrel, name: str) -> tuple[str, str]:
    wx = wb.start_workflow(name)
    first = activity_exec_id(wx, "w", 1)
    got = wait_until(lambda: wb.claim(workflow_name=name), timeout=15,
                     message="nothing to claim")
    assert got.activity_exec_id == first and got.state is A.RUNNING
    return wx, first


def _lose(wb: Whimbrel, wx: str, aeid: str) -> None:
    """The row vanishes: a raw DeleteItem, as an operator's mistake or a bad restore."""
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    ddb.delete_item(TableName=f"{wb.table_prefix}activity_exec",
                    Key={"workflow_exec_id": {"S": wx}, "activity_exec_id": {"S": aeid}})
    assert wb.store.get_activity(aeid) is None


def _sweeps(wb: Whimbrel, clock: StepClock, n: int = 2) -> None:
    for _ in range(n):
        clock.advance(LONG)
        report = wb.sweep()
        assert not report.errors, report.errors


def _claims_until_none(wb: Whimbrel, name: str) -> list[str]:
    out: list[str] = []
    while (got := wb.claim(workflow_name=name)) is not None and len(out) < 5:
        out.append(got.activity_exec_id)
    return out


# -- decision 4: LOST -----------------------------------------------------------------------

def test_a_lost_attempt_is_recorded_and_retried_under_a_new_attempt_id(
        wb: Whimbrel, clock: StepClock) -> None:
    """Finding: the run stayed RUNNING forever while every reconcile said "checked"; the
    reconciler re-created the root attempt under the id already handed out."""
    _define(wb, "i20_lossy", attempts=2)
    wx, first = _claimed(wb, "i20_lossy")
    _lose(wb, wx, first)
    _sweeps(wb, clock)
    lost = wb.get_activity(first)
    assert lost.state is ActivityState.LOST, lost
    assert lost.state.is_terminal
    second = activity_exec_id(wx, "w", 2)
    assert second != first
    assert wb.get_activity(second).state is A.READY
    claimed = _claims_until_none(wb, "i20_lossy")
    assert claimed == [second], claimed  # never the attempt id already handed out
    assert wb.get_workflow(wx).state is W.RUNNING


def test_a_lost_attempt_without_retries_left_fails_the_run(
        wb: Whimbrel, clock: StepClock) -> None:
    _define(wb, "i20_lossy_once", attempts=1)
    wx, first = _claimed(wb, "i20_lossy_once")
    _lose(wb, wx, first)
    _sweeps(wb, clock)
    assert wb.get_activity(first).state is ActivityState.LOST
    assert _claims_until_none(wb, "i20_lossy_once") == []
    assert wb.get_workflow(wx).state is W.FAILED


def test_no_path_makes_a_lost_root_attempt_claimable_again(
        wb: Whimbrel, clock: StepClock) -> None:
    """However many reconcile passes, the handed-out attempt id is never claimable."""
    _define(wb, "i20_lossy_root", attempts=3)
    wx, first = _claimed(wb, "i20_lossy_root")
    _lose(wb, wx, first)
    seen: list[str] = []
    for _ in range(4):
        _sweeps(wb, clock, n=1)
        got = wb.claim(workflow_name="i20_lossy_root")
        if got is not None:
            seen.append(got.activity_exec_id)
    assert first not in seen, seen
    assert wb.get_activity(first).state is ActivityState.LOST


def test_the_old_worker_of_a_lost_attempt_is_told_and_its_result_kept_late(
        wb: Whimbrel, clock: StepClock) -> None:
    _define(wb, "i20_lossy_worker", attempts=2)
    wx, first = _claimed(wb, "i20_lossy_worker")
    _lose(wb, wx, first)
    _sweeps(wb, clock)
    with pytest.raises(ActivityTimedOut):
        wb.heartbeat(first)
    with pytest.raises(ActivityTimedOut):
        wb.transition_activity(first, "COMPLETED", output={"late": "lost"})
    after = wb.get_activity(first)
    assert after.state is ActivityState.LOST
    assert after.late_output == {"late": "lost"}


# -- decision 5: late output --------------------------------------------------------------

def _timed_out(wb: Whimbrel, clock: StepClock, name: str) -> tuple[str, str]:
    _define(wb, name, attempts=2, heartbeat_timeout_seconds=10.0)
    wx, first = _claimed(wb, name)
    clock.advance(20.0)
    report = wb.sweep()
    assert first in report.timed_out, report
    assert wb.get_activity(first).state is A.TIMED_OUT
    return wx, first


def test_a_late_completed_is_kept_as_late_output_and_raises_activity_timed_out(
        wb: Whimbrel, clock: StepClock) -> None:
    """Finding: a late COMPLETED after TIMED_OUT raised StateConflict; the output was lost."""
    wx, first = _timed_out(wb, clock, "i20_late")
    with pytest.raises(ActivityTimedOut):
        wb.transition_activity(first, "COMPLETED", output={"rows": 42})
    after = wb.get_activity(first)
    assert after.state is A.TIMED_OUT  # the state never changes
    assert after.late_output == {"rows": 42}
    assert after.output is None
    # The retry is not disturbed by it.
    assert wb.get_activity(activity_exec_id(wx, "w", 2)).state is A.READY
    # And an operator sees it.
    result = CliRunner().invoke(app, ["status", wx, "--all-attempts"], env={
        "WHIMBREL_ENDPOINT_URL": wb.endpoint_url or "", "WHIMBREL_TABLE_PREFIX": wb.table_prefix,
        "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "late" in result.output.lower() and "42" in result.output, result.output


def test_a_late_failed_is_kept_as_late_error(wb: Whimbrel, clock: StepClock) -> None:
    _, first = _timed_out(wb, clock, "i20_late_fail")
    with pytest.raises(ActivityTimedOut):
        wb.transition_activity(first, "FAILED", error="disk full")
    after = wb.get_activity(first)
    assert after.state is A.TIMED_OUT
    assert after.late_error is not None and "disk full" in str(after.late_error)
    assert getattr(after, "late_output", None) is None
