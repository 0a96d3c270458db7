"""``whimbrel exec`` with real child processes: success, failure, cancel, time-out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import Run

from whimbrel import ActivityDefinition, ActivityState, Whimbrel, WorkflowDefinition
from whimbrel.testing import wait_until

A = ActivityState
STEP = WorkflowDefinition("shell", (ActivityDefinition("step", heartbeat_timeout_seconds=1),))

#: A child that ignores SIGTERM (so only SIGKILL ends it) and says where it is.
STUBBORN = """
import os, signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "w").write(str(os.getpid()))
signal.pause()  # until SIGKILL
"""


@pytest.fixture
def ready(wb: Whimbrel) -> str:
    """The id of an external activity waiting in READY."""
    wb.register_workflow(STEP)
    wx = wb.start_workflow("shell")
    return wb.get_workflow(wx).activity("step").activity_exec_id


def test_exec_success(run: Run, wb: Whimbrel, ready: str) -> None:
    result = run("exec", "--activity-exec-id", ready, "--json", "--",
                 sys.executable, "-c", "print('hello')")
    assert json.loads(result.stdout) == {"activity_exec_id": ready, "exit_code": 0,
                                         "state": "COMPLETED"}
    act = wb.get_activity(ready)
    assert act.state is A.COMPLETED and act.output == {"exit_code": 0}


def test_exec_failure_records_the_stderr_tail(run: Run, wb: Whimbrel, ready: str) -> None:
    code = "import sys; sys.stderr.write('line 1\\ndisk is full\\n'); sys.exit(3)"
    result = run("exec", "--activity-exec-id", ready, "--", sys.executable, "-c", code,
                 code=3)
    assert f"{ready} FAILED (exit code 3)" in result.stderr
    act = wb.get_activity(ready)
    assert act.state is A.FAILED
    assert act.error is not None
    assert "exited with code 3" in act.error and "disk is full" in act.error


def test_exec_errors(run: Run, wb: Whimbrel, ready: str) -> None:
    assert "no activity" in run("exec", "--", "true", code=2).stderr
    missing = run("exec", "--activity-exec-id", ready, "--", "/no/such/binary", code=125)
    assert missing.stderr.startswith("error: cannot run '/no/such/binary'")
    assert wb.get_activity(ready).state is A.FAILED
    # FAILED is final: running it again is refused without starting the child
    again = run("exec", "--activity-exec-id", ready, "--", "true", code=125)
    assert "state conflict" in again.stderr


def test_exec_claim(run: Run, wb: Whimbrel, ready: str) -> None:
    out = run("exec", "--claim", "shell/step", "--json", "--", sys.executable, "-c",
              "import os; assert os.environ['WHIMBREL_ACTIVITY_NAME'] == 'step'")
    assert json.loads(out.stdout)["state"] == "COMPLETED"
    nothing = run("exec", "--claim", "shell", "--json", "--", "true")
    assert json.loads(nothing.stdout) == {"activity_exec_id": None, "claimed": False}


@pytest.fixture
def spawn(ddb_endpoint: str, table_prefix: str) -> Iterator[
        type[subprocess.Popen[str]] | object]:
    procs: list[subprocess.Popen[str]] = []

    def start(aeid: str, *argv: str) -> subprocess.Popen[str]:
        env = {**os.environ, "WHIMBREL_ENDPOINT_URL": ddb_endpoint,
               "WHIMBREL_TABLE_PREFIX": table_prefix, "WHIMBREL_ACTIVITY_EXEC_ID": aeid}
        proc = subprocess.Popen([sys.executable, "-m", "whimbrel.cli", "exec",
                                 "--kill-grace", "0.5", "--", *argv], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _started(wb: Whimbrel, aeid: str, pidfile: Path) -> int:
    wait_until(lambda: pidfile.exists() and pidfile.read_text(), timeout=30,
               message="child never started")
    assert wb.get_activity(aeid).state is A.RUNNING
    return int(pidfile.read_text())


def test_cancel_kills_the_child(wb: Whimbrel, ready: str, spawn: object,
                                tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    proc = spawn(ready, sys.executable, "-c", STUBBORN, str(pidfile))  # type: ignore[operator]
    pid = _started(wb, ready, pidfile)
    wb.cancel_workflow(wb.get_activity(ready).workflow_exec_id)
    assert proc.wait(timeout=30) == 143, proc.stderr.read()
    assert _dead(pid)  # SIGTERM was ignored: SIGKILL after the grace period
    assert wb.get_activity(ready).state is A.CANCELLED
    wx = wb.get_activity(ready).workflow_exec_id
    wait_until(lambda: wb.get_workflow(wx).state.value == "CANCELLED", timeout=10)


def test_time_out_stops_the_child(wb: Whimbrel, ready: str, spawn: object,
                                  tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    child = "import os,signal,sys; open(sys.argv[1],'w').write(str(os.getpid())); signal.pause()"
    proc = spawn(ready, sys.executable, "-c", child, str(pidfile))  # type: ignore[operator]
    pid = _started(wb, ready, pidfile)
    # The heartbeat listener runs an hour from now: the deadline has long passed.
    report = wb.sweep(now=time.time() + 3600)
    assert report.timed_out == [ready]
    assert proc.wait(timeout=30) == 143, proc.stderr.read()
    assert _dead(pid)
    assert wb.get_activity(ready).state is A.TIMED_OUT


def test_dev_runs_until_sigterm(ddb_endpoint: str, table_prefix: str, wb: Whimbrel) -> None:
    env = {**os.environ, "WHIMBREL_ENDPOINT_URL": ddb_endpoint,
           "WHIMBREL_TABLE_PREFIX": table_prefix}
    proc = subprocess.Popen([sys.executable, "-m", "whimbrel.cli", "dev", "--heartbeat-rate",
                             "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        banner = [proc.stdout.readline() for _ in range(2)]
        assert f"export WHIMBREL_ENDPOINT_URL={ddb_endpoint}" in "".join(banner)
        proc.terminate()
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
