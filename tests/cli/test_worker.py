"""``whimbrel worker --workflow NAME -- COMMAND``: the real console script in a child
process, real commands per attempt, real signals — pick-up, input and output, failure
from the exit code, a drain on SIGTERM and a hand-back on a second one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Run

from whimbrel import (
    ActivityDefinition,
    ActivityExec,
    ActivityState,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.testing import wait_until
from whimbrel.worker.command_worker import CommandWorker

A = ActivityState
WHIMBREL = str(Path(sys.executable).with_name("whimbrel"))
FLOW = WorkflowDefinition("shell-flow", (
    ActivityDefinition("step", heartbeat_timeout_seconds=5,
                       retry=RetryPolicy(max_attempts=2, initial_interval_seconds=0)),))

#: Reads the input (stdin, or WHIMBREL_INPUT_FILE), answers with JSON on stdout; the
#: input's "wait_for" names a file to wait for first, "fail" an exit code.
STEP = """
import json, os, sys, time
path = os.environ.get("WHIMBREL_INPUT_FILE")
data = json.load(open(path)) if path else json.load(sys.stdin)
open(os.path.join(data["dir"], os.environ["WHIMBREL_WORKFLOW_EXEC_ID"]), "w").write("")
deadline = time.monotonic() + 120  # a test that never opens the gate fails, not hangs
while data.get("wait_for") and not os.path.exists(data["wait_for"]):
    if time.monotonic() > deadline:
        sys.exit(9)
    time.sleep(0.02)
if data.get("fail"):
    sys.stderr.write("line 1\\nthe disk is full\\n")
    sys.exit(data["fail"])
print("a log line before the result", file=sys.stderr)
print(json.dumps({"doubled": data["n"] * 2,
                  "ids": [os.environ[k] for k in ("WHIMBREL_ACTIVITY_EXEC_ID",
                                                  "WHIMBREL_ACTIVITY_NAME",
                                                  "WHIMBREL_WORKFLOW_NAME",
                                                  "WHIMBREL_ATTEMPT")],
                  "via": "file" if path else "stdin"}))
"""


@pytest.fixture
def step(tmp_path: Path, wb: Whimbrel) -> Path:
    wb.register_workflow(FLOW)
    script = tmp_path / "step.py"
    script.write_text(STEP)
    (tmp_path / "started").mkdir()
    return script


@contextmanager
def worker(run: Run, tmp_path: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``whimbrel worker ARGS`` in a child process; killed if the test fails."""
    err = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen([WHIMBREL, "worker", *args],
                            env={**os.environ, **run.env}, stdout=subprocess.PIPE,
                            stderr=err, text=True)
    guard = threading.Timer(150, proc.kill)  # never hang the suite
    guard.start()
    try:
        yield proc
    finally:
        guard.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        err.close()


def _start(wb: Whimbrel, tmp_path: Path, **input: object) -> str:
    return wb.start_workflow("shell-flow", {"dir": str(tmp_path / "started"), **input})


def _step(wb: Whimbrel, wx: str, attempt: int = 1) -> ActivityExec:
    return wb.get_activity(f"{wx}:step:{attempt}")


def test_picks_up_runs_and_drains_on_sigterm(run: Run, wb: Whimbrel, step: Path,
                                             tmp_path: Path) -> None:
    release = tmp_path / "release"
    with worker(run, tmp_path, "--workflow", "shell-flow", "--concurrency", "2", "--json",
                "--", sys.executable, str(step)) as proc:
        first = _start(wb, tmp_path, n=21)
        done = wait_until(lambda: wb.get_workflow(first).state.value == "COMPLETED"
                          and wb.get_workflow(first), timeout=60)
        act = done.activity("step")
        assert act.output == {"doubled": 42, "via": "stdin", "ids": [
            act.activity_exec_id, "step", "shell-flow", "1"]}
        # A long one is running when SIGTERM comes: it finishes, nothing new starts.
        slow = _start(wb, tmp_path, n=1, wait_for=str(release))
        wait_until(lambda: (tmp_path / "started" / slow).exists(), timeout=60)
        proc.send_signal(signal.SIGTERM)
        late = _start(wb, tmp_path, n=2)
        release.write_text("")
        assert proc.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()
        assert proc.stdout is not None
        assert json.loads(proc.stdout.read()) == {"claimed": 2, "completed": 2, "failed": 0,
                                                  "handed_back": 0}
    assert wb.get_workflow(slow).state.value == "COMPLETED"
    assert wb.get_workflow(slow).activity("step").output["doubled"] == 2
    # Arrived after the stop: left for another worker.
    assert wb.get_workflow(late).activity("step").state is A.READY


def test_a_non_zero_exit_fails_the_attempt_with_the_stderr_tail(
        run: Run, wb: Whimbrel, step: Path, tmp_path: Path) -> None:
    with worker(run, tmp_path, "--workflow", "shell-flow", "--activity", "step",
                "--input-file", "--", sys.executable, str(step)) as proc:
        wx = _start(wb, tmp_path, n=1, fail=3)
        # Both attempts (the retry policy allows two) fail the same way; the run fails.
        wait_until(lambda: wb.get_workflow(wx).state.value == "FAILED", timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()
    for attempt in (1, 2):
        act = _step(wb, wx, attempt)
        assert act.state is A.FAILED
        assert act.error is not None
        assert "exited with code 3" in act.error and "the disk is full" in act.error


def test_a_second_signal_hands_back_what_runs(run: Run, wb: Whimbrel, step: Path,
                                              tmp_path: Path) -> None:
    never = tmp_path / "never"
    with worker(run, tmp_path, "--workflow", "shell-flow", "--json", "--",
                sys.executable, str(step)) as proc:
        wx = _start(wb, tmp_path, n=1, wait_for=str(never))
        wait_until(lambda: (tmp_path / "started" / wx).exists(), timeout=60)
        proc.send_signal(signal.SIGTERM)
        # Still draining (the command waits): the attempt is RUNNING.
        assert _step(wb, wx).state is A.RUNNING
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()
        assert proc.stdout is not None
        assert json.loads(proc.stdout.read()) == {"claimed": 1, "completed": 0, "failed": 0,
                                                  "handed_back": 1}
    handed = _step(wb, wx, 1)
    assert handed.state is A.FAILED and handed.error_type == "WorkerStopped"
    # Its retry policy made the next attempt, claimable by another worker.
    latest = wait_until(lambda: (a := wb.get_workflow(wx).activity("step")).attempt == 2
                        and a, timeout=30)
    assert latest.state is A.READY


def test_usage_errors(run: Run) -> None:
    assert "nothing to run" in run("worker", code=2).stderr
    assert "add --workflow NAME" in run("worker", "--", "true", code=2).stderr
    assert "not both" in run("worker", "--module", "m", "--workflow", "w", code=2).stderr


def test_missing_tables_stop_the_worker_with_the_store_error(run: Run) -> None:
    # Not a warning ten times a second for ever: the store's answer, exit code 6.
    done = run("worker", "--workflow", "w", "--table-prefix", "never_created_", "--",
               "true", code=6)
    assert "table not found" in done.stderr and "whimbrel tables create" in done.stderr


def test_the_library_loop_keeps_text_output_and_stops_on_stop(wb: Whimbrel, step: Path,
                                                             tmp_path: Path) -> None:
    loop = CommandWorker(wb.engine, ["sh", "-c", 'test "$WHIMBREL_ATTEMPT" = 1 && echo done'],
                         workflow_name="shell-flow", concurrency=2,
                         table_prefix=wb.table_prefix, endpoint_url=wb.endpoint_url)
    runner = threading.Thread(target=loop.run)
    runner.start()
    try:
        runs = [_start(wb, tmp_path, n=i) for i in range(3)]
        for wx in runs:
            wait_until(lambda wx=wx: wb.get_workflow(wx).state.value == "COMPLETED",
                       timeout=60)
    finally:
        loop.stop()
        runner.join(timeout=60)
    assert not runner.is_alive()
    assert [_step(wb, wx).output for wx in runs] == ["done"] * 3  # not JSON: the text
    assert (loop.stats.claimed, loop.stats.completed) == (3, 3)
    assert loop.stats.polls >= 3


def test_a_busy_library_loop_claims_again_without_a_look(wb: Whimbrel, step: Path,
                                                         tmp_path: Path) -> None:
    """A look at the claimable index names every shard, so a look before every claim
    would make every key one that each claim reads (it caps the account's claims): after
    a claim that took something the loop claims again without one (issue 29)."""
    runs = [_start(wb, tmp_path, n=i) for i in range(6)]
    events: list[str] = []

    def observe(op: str, params: dict[str, Any], _resp: object) -> None:
        # Both on the loop's thread, in its order: a look, and a claim's write (the one
        # UpdateItem that takes the attempt out of the index).
        statement = str(params.get("Statement", "")) if op == "ExecuteStatement" else ""
        if '"claimable"' in statement and statement.startswith('SELECT "claim_key"'):
            events.append("look")
        elif op == "UpdateItem" and "claim_key" in params.get("ExpressionAttributeNames",
                                                              {}).values():
            events.append("claim")
    wb.store.transport.observers.append(observe)
    loop = CommandWorker(wb.engine, ["sh", "-c", "echo done"], workflow_name="shell-flow",
                         concurrency=2, table_prefix=wb.table_prefix,
                         endpoint_url=wb.endpoint_url)
    runner = threading.Thread(target=loop.run)
    runner.start()
    try:
        for wx in runs:
            wait_until(lambda wx=wx: wb.get_workflow(wx).state.value == "COMPLETED",
                       timeout=60)
        wait_until(lambda: events.count("look") > 1, timeout=30)  # idle: it looks again
    finally:
        loop.stop()
        runner.join(timeout=60)
    assert loop.stats.claimed == 6
    sixth = [i for i, e in enumerate(events) if e == "claim"][5]
    assert events[:sixth].count("look") == 1  # the first claim's, then none while busy


def test_a_cancel_stops_the_command_through_the_heartbeat(run: Run, wb: Whimbrel, step: Path,
                                                          tmp_path: Path) -> None:
    never = tmp_path / "never"
    with worker(run, tmp_path, "--workflow", "shell-flow", "--json", "--kill-grace", "1",
                "--", sys.executable, str(step)) as proc:
        wx = _start(wb, tmp_path, n=1, wait_for=str(never))
        wait_until(lambda: (tmp_path / "started" / wx).exists(), timeout=60)
        wb.cancel_workflow(wx)
        # The heartbeat (every 5/3 s) learns of it, the command is stopped, the run ends.
        wait_until(lambda: wb.get_workflow(wx).state.value == "CANCELLED", timeout=60)
        assert _step(wb, wx).state is A.CANCELLED
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()
        assert proc.stdout is not None
        assert json.loads(proc.stdout.read()) == {"claimed": 1, "completed": 0, "failed": 1,
                                                  "handed_back": 0}
