"""Issue 29, nudge through the CLI: ``whimbrel nudge RUN`` repairs one run now (a lost
attempt row, a due deadline), as JSON and for people; an unknown run exits 3."""

from __future__ import annotations

import time

from cli_helpers import Run

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, RetryPolicy, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id

A = ActivityState


def _define(wb: Whimbrel, name: str, hb: float | None = None) -> None:
    wb.register_workflow(WorkflowDefinition(name, (Act(
        "w", launcher=LauncherSpec.external(), heartbeat_timeout_seconds=hb,
        retry=RetryPolicy(max_attempts=2, initial_interval_seconds=0.0)),)))


def test_nudge_records_a_lost_row_and_readies_the_retry(run: Run, wb: Whimbrel) -> None:
    _define(wb, "cli_nudge")
    wx = wb.start_workflow("cli_nudge")
    got = wb.claim(workflow_name="cli_nudge")
    assert got is not None
    wb.store.tables.client.call("DeleteItem", {
        "TableName": f"{wb.table_prefix}activity_exec",
        "Key": {"workflow_exec_id": {"S": wx}, "activity_exec_id": {"S": got.activity_exec_id}}})
    data = run.json("nudge", wx)
    assert (data["outcome"], data["state"]) == ("repaired", "RUNNING"), data
    assert wb.get_activity(got.activity_exec_id).state is A.LOST
    assert wb.get_activity(activity_exec_id(wx, "w", 2)).state is A.READY
    out = run("nudge", wx)
    assert f"{wx} RUNNING: in order" in out.stdout
    assert "nothing was due" in out.stderr


def test_nudge_times_out_a_silent_attempt(run: Run, wb: Whimbrel, ddb_endpoint: str) -> None:
    _define(wb, "cli_nudge_hb", hb=10.0)
    # Claimed an hour ago (a client whose clock says so): its heartbeat deadline is long due.
    with Whimbrel(ddb_endpoint, wb.table_prefix, clock=lambda: time.time() - 3600) as past:
        wx = past.start_workflow("cli_nudge_hb")
        got = past.claim(workflow_name="cli_nudge_hb")
    assert got is not None
    out = run("nudge", wx)
    assert f"timed out: {got.activity_exec_id}" in out.stdout, out.stdout
    assert wb.get_activity(got.activity_exec_id).state is A.TIMED_OUT


def test_nudge_of_an_unknown_run_exits_3(run: Run, wb: Whimbrel) -> None:
    result = run("nudge", "no-such-run", code=3)
    assert "no workflow execution 'no-such-run'" in result.stderr
