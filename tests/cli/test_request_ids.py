"""``submit --simple --request-id``, unknown workflows, and ``status --request-id``."""

from __future__ import annotations

import json

from cli_helpers import Run

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.testing import wait_until

EXTERNAL = WorkflowDefinition("external", (ActivityDefinition("step"),))
QUICK = WorkflowDefinition("quick", (
    ActivityDefinition("only", launcher=LauncherSpec.python("wb_test_activities:echo")),))


def test_submit_simple_keeps_the_request_id(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(EXTERNAL)
    out = run.json("submit", "external", "--simple", "--request-id", "nightly-2026-11-21")
    assert out == {"workflow_exec_id": workflow_exec_id_for("nightly-2026-11-21"),
                   "workflow_request_id": "nightly-2026-11-21", "workflow_name": "external",
                   "mode": "simple"}
    row = wb.store.cold.get_request("nightly-2026-11-21")
    assert row is not None and row.workflow_name == "external" and row.source == "cli"
    # The same id again is the same single request.
    assert run.json("submit", "external", "--simple", "--request-id",
                    "nightly-2026-11-21") == out


def test_submit_simple_refuses_an_unregistered_workflow(run: Run, wb: Whimbrel) -> None:
    result = run("submit", "ghost", "--simple", "--request-id", "ghost-1", code=3)
    assert result.stderr == "error: no registered workflow definition 'ghost'\n"
    assert result.stdout == ""
    assert wb.store.cold.get_request("ghost-1") is None  # no request the Lambda could only reject
    as_json = run("submit", "ghost", "--simple", "--json", code=3)
    body = json.loads(as_json.stderr)
    assert body["error"] == "DefinitionNotFound" and body["workflow_name"] == "ghost"
    assert body["exit_code"] == 3


def test_status_by_request_id(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(QUICK)
    wx = run("submit", "quick", "--request-id", "order-42").stdout.strip()
    # The one-shot CLI left the python activity for a worker: this test's client, which
    # registered the workflow and imports its code, is one.
    assert wait_until(lambda: wb.get_workflow(wx).state.value == "COMPLETED", timeout=60)
    data = run.json("status", "--request-id", "order-42")
    assert data["workflow_exec_id"] == wx == workflow_exec_id_for("order-42")
    assert data["workflow_request_id"] == "order-42" and data["state"] == "COMPLETED"
    assert [a["activity_name"] for a in data["activities"]] == ["only"]
    human = run("status", "--request-id", "order-42").stdout
    assert wx in human and "quick v1" in human and "COMPLETED" in human


def test_status_by_request_id_explains_a_missing_run(run: Run, wb: Whimbrel) -> None:
    never = run("status", "--request-id", "never-sent", code=3)
    assert never.stderr.startswith("error: no workflow request 'never-sent'")
    wb.register_workflow(EXTERNAL)
    run("submit", "external", "--simple", "--request-id", "pending-1")
    # Nothing consumes the stream here: written, but no run yet.
    pending = run("status", "--request-id", "pending-1", code=3)
    assert "'pending-1' was written but has not started run" in pending.stderr
    assert "`whimbrel rejections`" in pending.stderr
    as_json = json.loads(run("status", "--request-id", "pending-1", "--json", code=3).stderr)
    assert as_json["exit_code"] == 3 and "pending-1" in as_json["message"]


def test_status_takes_one_id_or_the_other(run: Run, wb: Whimbrel) -> None:
    neither = run("status", code=2)
    assert "either a WORKFLOW_EXEC_ID or --request-id" in neither.stderr
    both = run("status", "some-run", "--request-id", "x", code=2)
    assert "either a WORKFLOW_EXEC_ID or --request-id" in both.stderr
    assert run("status", "--request-id", "r-\udc80", code=4).stderr.startswith(
        "error: workflow_request_id must be a non-empty string")
