"""Issue 29, fork through the CLI: ``whimbrel fork RUN --from ACTIVITY`` starts the fork,
``status`` shows what it reused and where it came from; a missing activity exits 4."""

from __future__ import annotations

from cli_helpers import Run

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, RetryPolicy, Transition, Whimbrel, WorkflowDefinition

EXT = LauncherSpec.external()


def test_fork_from_the_failed_step(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("cli_fork", (
        Act("extract", launcher=EXT),
        Act("transform", ("extract",), launcher=EXT, retry=RetryPolicy(max_attempts=1)))))
    src = wb.start_workflow("cli_fork")
    for verb in (Transition.COMPLETED, Transition.FAILED):
        got = wb.claim(workflow_name="cli_fork")
        assert got is not None
        wb.transition_activity(got.activity_exec_id, verb, output={"n": 1}, error="bug")
    data = run.json("fork", src, "--from", "transform")
    assert (data["forked_from"], data["state"], data["reused"]) == (
        src, "RUNNING", ["extract"])
    status = run("status", data["workflow_exec_id"]).stdout
    assert f"forked from {src}" in status, status
    assert f"reused from {src}:extract:1" in status, status
    shown = run.json("status", data["workflow_exec_id"])
    assert shown["forked_from"] == src
    bad = run("fork", src, "--from", "nope", code=4)
    assert "has no activity 'nope'" in bad.stderr
    run("fork", "no-such-run", "--from", "transform", code=3)
