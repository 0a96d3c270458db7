"""Issue 29, batch operations through the CLI: ``whimbrel runs`` lists by filter, and
``whimbrel runs cancel|redrive|signal|suspend|resume`` count first, ask (or --yes), act
with a progress bar and sum up; no filter without --yes is refused with nothing changed."""

from __future__ import annotations

from cli_helpers import Run

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)

W = WorkflowState
EXT = LauncherSpec.external()


def _failing(wb: Whimbrel, name: str, n: int) -> list[str]:
    wb.register_workflow(WorkflowDefinition(name, (Act(
        "w", launcher=EXT, retry=RetryPolicy(max_attempts=1)),)))
    ids = [wb.start_workflow(name) for _ in range(n)]
    for _ in ids:
        got = wb.claim(workflow_name=name)
        assert got is not None
        wb.transition_activity(got.activity_exec_id, Transition.FAILED, error="boom")
    return ids


def test_runs_redrive_counts_asks_acts_and_sums_up(run: Run, wb: Whimbrel) -> None:
    ids = _failing(wb, "cli_batch", 3)
    listed = run.json("runs", "--name", "cli_batch", "--state", "FAILED")
    assert sorted(r["workflow_exec_id"] for r in listed["items"]) == sorted(ids)
    dry = run("runs", "redrive", "--name", "cli_batch", "--state", "FAILED", "--dry-run")
    assert "3 runs match" in dry.stderr
    assert "redrive: 3 matched, 3 would, 0 skipped, 0 refused" in dry.stdout, dry.stdout
    assert all(wb.get_workflow(wx).state is W.FAILED for wx in ids)
    no = run("runs", "redrive", "--name", "cli_batch", "--state", "FAILED", input="n\n",
             code=1)
    assert "redrive them?" in no.stdout
    assert all(wb.get_workflow(wx).state is W.FAILED for wx in ids)
    done = run("runs", "redrive", "--name", "cli_batch", "--state", "FAILED", input="y\n")
    assert "redrive: 3 matched, 3 done, 0 skipped, 0 refused" in done.stdout, done.stdout
    assert all(wb.get_workflow(wx).state is W.RUNNING for wx in ids)
    again = run.json("runs", "redrive", "--name", "cli_batch", "--yes")
    assert (again["done"], len(again["skipped"])) == ([], 3)  # never twice


def test_runs_cancel_with_no_filter_needs_yes(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("cli_batch_live", (Act("w", launcher=EXT),)))
    wx = wb.start_workflow("cli_batch_live")
    refused = run("runs", "cancel", code=4)
    assert "no filter would act on every run" in refused.stderr
    assert wb.get_workflow(wx).state is W.RUNNING
    data = run.json("runs", "cancel", "--yes", "--per-second", "100")
    assert data["done"] == [wx]
    assert wb.get_workflow(wx).state is W.CANCELLED


def test_runs_signal_and_bad_options(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("cli_batch_sig", (
        Act("paid", launcher=LauncherSpec.signal("paid")),)))
    wx = wb.start_workflow("cli_batch_sig")
    data = run.json("runs", "signal", "paid", "--payload", '{"ok": 1}', "--name",
                    "cli_batch_sig", "--yes")
    assert data["done"] == [wx]
    assert wb.get_workflow(wx).state is W.COMPLETED
    run("runs", "suspend", "--name", "cli_batch_sig", "--per-second", "0", code=2)
    bad = run("runs", "resume", "--attr", "nokey", code=2)
    assert "--attr 'nokey' is not KEY=VALUE" in bad.stderr
    bad = run("runs", "cancel", "--name", "cli_batch_sig", "--batch-id", "a b", "--yes",
              code=4)
    assert "batch_id" in bad.stderr
