"""Issue 29, fork of a code run through the CLI: ``whimbrel fork RUN --from add#2`` starts
the fork (the client that registered the workflow makes its decisions), ``status`` shows
the reused steps; a step the run lacks exits 4 naming the steps it has."""

from __future__ import annotations

import wb_fork_code as fork
from cli_helpers import Run

from whimbrel import Whimbrel


def test_fork_a_code_run_from_a_step(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(fork.loop)
    src = wb.start_workflow("fork_loop", {"start": 1, "steps": 3})
    assert wb.wait(src, timeout=30).state.value == "COMPLETED"
    data = run.json("fork", src, "--from", "add#2", "--wait", "--timeout", "60")
    new = data["workflow_exec_id"]
    assert (data["forked_from"], data["state"], data["reused"]) == (
        src, "COMPLETED", ["add#1"])
    assert wb.get_workflow(new).output["total"] == 4
    assert [fork.calls(new, f"add#{k}") for k in (1, 2, 3)] == [0, 1, 1]
    status = run("status", new).stdout
    assert f"forked from {src}" in status, status
    assert f"reused from {src}:add#1:1" in status, status
    bad = run("fork", src, "--from", "add#7", code=4)
    assert "never reached step 'add#7'" in bad.stderr, bad.stderr
    bad = run("fork", src, "--from", "ad#1", code=4)
    assert "has no step 'ad#1'; its steps, in order: add#1, add#2, add#3" in bad.stderr
    bad = run("fork", src, "--from", "add#two", code=4)
    assert "is not a step <name>#<k>" in bad.stderr, bad.stderr
