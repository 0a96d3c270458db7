"""Issue 29, attributes through the CLI: ``submit --attr``, ``whimbrel runs --attr``,
``status`` shows them, and a batch acts on a customer's runs; bad ones exit 4."""

from __future__ import annotations

from cli_helpers import Run

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition


def test_runs_by_attribute(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("cli_attr", (
        ActivityDefinition("w", launcher=LauncherSpec.external()),)))
    mine = run.json("submit", "cli_attr", "--attr", "customer=c-17", "--attr", "tier=2")
    wx = mine["workflow_exec_id"]
    other = wb.start_workflow("cli_attr", attributes={"customer": "c-18"})
    assert wb.get_workflow(wx).attributes == {"customer": "c-17", "tier": 2}
    listed = run.json("runs", "--attr", "customer=c-17")
    assert [r["workflow_exec_id"] for r in listed["items"]] == [wx]
    assert listed["items"][0]["attributes"] == {"customer": "c-17", "tier": 2}
    assert [r["workflow_exec_id"] for r in run.json("runs", "--attr", "tier=2", "--name",
                                                    "cli_attr")["items"]] == [wx]
    assert "attributes: customer=c-17, tier=2" in run("status", wx).stdout
    out = run("runs", "cancel", "--attr", "customer=c-17", "--yes")
    assert "1 runs match" in out.stderr and "1 done" in out.stdout, out.stdout
    assert wb.get_workflow(wx).state.value == "CANCELLED"
    assert wb.get_workflow(other).state.value == "RUNNING"
    bad = run("submit", "cli_attr", "--attr", "9x=1", code=4)
    assert "name '9x' must be a letter" in bad.stderr
    run("runs", "--attr", "customer", code=2)
