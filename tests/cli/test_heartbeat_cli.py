"""Issue 29, heartbeat details through the CLI: ``whimbrel status`` shows the details an
attempt keeps (its progress), in the table and as ``heartbeat_details`` in JSON."""

from __future__ import annotations

from cli_helpers import Run

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition


def test_status_shows_heartbeat_details(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("cli_hb", (ActivityDefinition(
        "crawl", launcher=LauncherSpec.external(), heartbeat_timeout_seconds=60),)))
    wx = wb.start_workflow("cli_hb")
    got = wb.claim(workflow_name="cli_hb")
    assert got is not None
    wb.heartbeat(got.activity_exec_id, details={"done": 9000, "of": 10000})
    data = run.json("status", wx)
    [act] = data["activities"]
    assert act["heartbeat_details"] == {"done": 9000, "of": 10000}
    out = run("status", wx).stdout
    assert '{"done": 9000, "of": 10000}' in out, out
