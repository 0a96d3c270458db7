"""``cancel``, ``retry``, ``sweep``, ``rejections``."""

from __future__ import annotations

import json
import time

from cli_helpers import Run

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.records import REMOVE, RejectionRecord

A = ActivityState
#: An external activity with one automatic retry after a long back-off.
RETRYING = WorkflowDefinition("retrying", (
    ActivityDefinition("step", retry=RetryPolicy(max_attempts=3,
                                                 initial_interval_seconds=3600)),
    ActivityDefinition("after", ("step",)),
))
ONCE = WorkflowDefinition("once", (ActivityDefinition("step", heartbeat_timeout_seconds=30),))


def test_cancel(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(ONCE)
    waiting = wb.start_workflow("once")  # READY, never claimed: cancelled at once
    out = run.json("cancel", waiting)
    assert out == {"workflow_exec_id": waiting, "state": "CANCELLED", "still_running": []}
    assert run.json("cancel", waiting)["state"] == "CANCELLED"  # idempotent

    running = wb.start_workflow("once")
    act = wb.claim(workflow_name="once")
    assert act is not None and act.workflow_exec_id == running
    out = run.json("cancel", running)
    assert out == {"workflow_exec_id": running, "state": "CANCEL_REQUESTED",
                   "still_running": ["step"]}
    assert wb.get_activity(act.activity_exec_id).state is A.CANCELLED_RUNNING
    wb.transition_activity(act.activity_exec_id, "COMPLETED")  # it reports: CANCELLED
    assert "CANCELLED" in run("cancel", running, "--wait").stdout

    done = wb.start_workflow("once")
    act = wb.claim(workflow_name="once")
    assert act is not None
    wb.transition_activity(act.activity_exec_id, "COMPLETED")
    result = run("cancel", done, code=5)
    assert result.stderr.startswith(f"error: workflow {done} already ended COMPLETED")
    run("cancel", "no-such-run", code=3)


def test_retry_launches_the_scheduled_attempt_now(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(RETRYING)
    wx = wb.start_workflow("retrying")
    first = wb.claim(workflow_name="retrying")
    assert first is not None
    wb.transition_activity(first.activity_exec_id, "FAILED", error="disk full")
    wf = wb.get_workflow(wx)
    second = wf.activity("step")
    assert second.attempt == 2 and second.state is A.REQUESTED  # waits ~1 h
    out = run.json("retry", first.activity_exec_id)
    assert out["activity_exec_id"] == f"{wx}:step:2"
    assert out["state"] == "READY" and out["attempt"] == 2
    # the second attempt is claimable now, and succeeds
    claimed = wb.claim(workflow_name="retrying", activity_name="step")
    assert claimed is not None and claimed.attempt == 2
    run("retry", claimed.activity_exec_id, code=5)  # RUNNING: not retryable
    run("retry", first.activity_exec_id, code=5)  # attempt 2 already started


def test_retry_creates_the_next_attempt(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(ONCE)
    wx = wb.start_workflow("once")
    act = wb.claim(workflow_name="once")
    assert act is not None
    # A failure whose follow-ups never ran (the process died after the write).
    wb.store.move_activity(act.activity_exec_id, A.RUNNING, (A.FAILED,), {},
                           now=time.time(), actor="test")
    out = run.json("retry", act.activity_exec_id)
    assert (out["activity_exec_id"], out["state"]) == (f"{wx}:step:2", "READY")
    again = wb.claim(workflow_name="once")
    assert again is not None and again.attempt == 2
    wb.transition_activity(again.activity_exec_id, "COMPLETED")
    assert wb.get_workflow(wx).state is WorkflowState.COMPLETED


def test_retry_refuses_once_the_workflow_failed(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(ONCE)
    wx = wb.start_workflow("once")
    act = wb.claim(workflow_name="once")
    assert act is not None
    wb.transition_activity(act.activity_exec_id, "FAILED", error="nope")
    assert wb.get_workflow(wx).state is WorkflowState.FAILED
    result = run("retry", act.activity_exec_id, code=5)
    assert "is FAILED: a retry is only possible while it is RUNNING" in result.stderr
    err = json.loads(run("retry", act.activity_exec_id, "--json", code=5).stderr)
    assert err["error"] == "RetryNotAllowed" and err["workflow_state"] == "FAILED"
    run("retry", f"{wx}:step:9", code=3)
    run("retry", "not-an-id", code=4)


def test_sweep_times_out_a_silent_activity(run: Run, wb: Whimbrel) -> None:
    empty = run.json("sweep")
    assert empty == {"now": empty["now"], "timed_out": [], "retries_launched": [],
                     "cancelled": [], "reconciled": [], "checked": [],
                     "workflows_timed_out": [], "timers_fired": [], "errors": [],
                     "leases": [], "leased_elsewhere": []}
    wb.register_workflow(ONCE)
    wx = wb.start_workflow("once")
    act = wb.claim(workflow_name="once")
    assert act is not None
    # Its last heartbeat was an hour ago, and so its deadline passed: what that heartbeat
    # wrote (heartbeat_epoch, the real deadline_epoch) and a timer armed in the past.
    an_hour_ago = time.time() - 3600
    wb.store.set_activity(act.activity_exec_id, {"timer_epoch": an_hour_ago,
                                                 "deadline_epoch": an_hour_ago + 30,
                                                 "heartbeat_epoch": an_hour_ago},
                          states=[A.RUNNING])
    report = run.json("sweep")
    assert report["timed_out"] == [act.activity_exec_id] and report["errors"] == []
    assert wb.get_workflow(wx).state is WorkflowState.FAILED
    assert "timed out: 0" in run("sweep").stdout


def test_sweep_says_checked_not_reconciled_for_a_healthy_run(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(ONCE)
    wx = wb.start_workflow("once")
    # Make its first reconcile visit due now; nothing about the run needs repairing.
    wb.store.set_workflow(wx, {"check_epoch": time.time() - 1}, states=[WorkflowState.RUNNING])
    report = run.json("sweep")
    assert report["reconciled"] == [] and report["checked"] == [wx]
    # A run whose start died half-way (its root row missing) is repaired, and says so.
    wx2 = wb.start_workflow("once", request_id="half")
    raw = wb.store.get_activity(f"{wx2}:step:1")
    assert raw is not None
    wb.store.tables.client.call("DeleteItem", {
        "TableName": f"{wb.table_prefix}activity_exec",
        "Key": {"workflow_exec_id": {"S": wx2}, "activity_exec_id": {"S": f"{wx2}:step:1"}}})
    # ... before it said its roots were created (a row missing after that was lost:
    # LOST, never re-created; tests/integration/test_i20_lost_late.py).
    wb.store.set_workflow(wx2, {"check_epoch": time.time() - 1, "roots_ready": REMOVE},
                          states=[WorkflowState.RUNNING])
    repaired = run.json("sweep")
    assert repaired["reconciled"] == [wx2]
    assert wb.get_workflow(wx2).activity("step").state is A.READY


def test_rejections(run: Run, wb: Whimbrel) -> None:
    assert run.json("rejections") == []
    assert "no rejections" in run("rejections").stdout
    now = time.time()
    day = time.strftime("%Y-%m-%d", time.gmtime(now))
    wb.store.cold.put_rejection(RejectionRecord(
        day, "r-1", source="workflow_request", reason="no registered workflow 'x'",
        error_type="DefinitionNotFound", record='{"workflow_name": "x"}', when_epoch=now))
    rows = run.json("rejections")
    assert rows == [{"rejection_day": day, "rejection_id": "r-1", "when_epoch": now,
                     "source": "workflow_request", "error_type": "DefinitionNotFound",
                     "reason": "no registered workflow 'x'",
                     "record": {"workflow_name": "x"}}]
    assert "DefinitionNotFound" in run("rejections", "--day", day).stdout
    assert run.json("rejections", "--day", "2001-01-01", "--days", "2") == []
    assert run("rejections", "--day", "yesterday", code=4).stderr.startswith("error: --day")
