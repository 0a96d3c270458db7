"""``whimbrel worker --module M`` runs the python activities of M that other processes
left for a worker; ``whimbrel submit`` (a one-shot command) is never a worker unless
``--run-here`` asks it to run them while it waits (docs/contract.md, "Who runs code")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from cli_helpers import Run

from whimbrel import ActivityDefinition, ActivityState, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.testing import wait_until

A = ActivityState
WHIMBREL = str(Path(sys.executable).with_name("whimbrel"))
#: The activity module: only the worker's folder holds it (the test process cannot
#: import it, so neither the test's client nor the CLI could run it).
MODULE = """import os


def double(run):
    return {"doubled": run.input["n"] * 2, "pid": os.getpid()}
"""
FLOW = WorkflowDefinition("mod-flow", (
    ActivityDefinition("double", launcher=LauncherSpec.python("wmod_cli_acts:double")),))


def test_submit_leaves_python_work_for_a_worker_module_that_runs_it(
        run: Run, wb: Whimbrel, tmp_path: Path) -> None:
    wb.register_workflow(FLOW)
    wx = run.json("submit", "mod-flow", "--input", '{"n": 21}')["workflow_exec_id"]
    left = wb.get_workflow(wx).activity("double")
    assert left.state is A.READY and left.error is None  # left for a worker, not failed
    (tmp_path / "wmod_cli_acts.py").write_text(MODULE)
    log = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen([WHIMBREL, "worker", "--module", "wmod_cli_acts"],
                            cwd=tmp_path, env={**os.environ, **run.env},
                            stdout=subprocess.PIPE, stderr=log, text=True)
    guard = threading.Timer(150, proc.kill)  # never hang the suite
    guard.start()
    try:
        done = wait_until(lambda: wb.get_workflow(wx).state.value == "COMPLETED"
                          and wb.get_workflow(wx), timeout=90)
        output = done.activity("double").output
        assert output["doubled"] == 42 and output["pid"] == proc.pid  # ran in the worker
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()
    finally:
        guard.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        log.close()


def test_run_here_needs_wait_and_a_missing_module_is_a_clear_error(
        run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(FLOW)
    refused = run("submit", "mod-flow", "--run-here", code=2)
    assert "give --wait too" in refused.stderr
    missing = run("worker", "--module", "no_such_module_here", code=4)
    assert "no_such_module_here" in missing.stderr
