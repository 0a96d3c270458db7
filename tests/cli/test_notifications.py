"""``whimbrel notifications``: the events file ``whimbrel dev --events-file`` appends to,
printed, filtered and followed; and dev refusing an events file it cannot write."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_helpers import Run
from typer.testing import CliRunner

from whimbrel.contract import notifications as events
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.observe import JsonLinesPublisher
from whimbrel.testing import wait_until

WHIMBREL = str(Path(sys.executable).with_name("whimbrel"))
T0 = 1_795_262_400.0


def _notes() -> list[events.Notification]:
    ended = WorkflowRecord("wx-1", "nightly", 1, WorkflowState.FAILED, created_epoch=T0,
                           ended_epoch=T0 + 60, error="activity load FAILED\ntraceback…")
    other = WorkflowRecord("wx-2", "hourly", 1, WorkflowState.COMPLETED, created_epoch=T0,
                           ended_epoch=T0 + 5)
    failed = ActivityRecord("wx-1", "wx-1:load:2", "load", "nightly", 2, ActivityState.FAILED,
                            started_epoch=T0 + 50, ended_epoch=T0 + 59, error="boom")
    waiting = ActivityRecord("wx-2", "wx-2:ok:1", "ok", "hourly", 1, ActivityState.READY,
                             updated_epoch=T0 + 1)
    return [events.wait_started(waiting, waiting_for="approval"),
            events.activity_failed(failed, previous="RUNNING", max_attempts=2),
            events.workflow_ended(ended, previous="FAILED_WAITING"),
            events.workflow_ended(other, previous="RUNNING", output={})]


@pytest.fixture
def events_file(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    JsonLinesPublisher(path).publish(_notes())
    return path


@pytest.fixture
def run() -> Run:
    return Run(CliRunner(), {"COLUMNS": "200"})


def test_prints_every_event_one_line_each(run: Run, events_file: Path) -> None:
    out = run("notifications", "--events-file", str(events_file)).stdout
    lines = out.splitlines()
    assert len(lines) == 4
    assert "Wait Started" in lines[0] and "waiting for approval" in lines[0]
    assert "Activity Failed" in lines[1] and "load#2" in lines[1] and "boom" in lines[1]
    assert "Workflow Ended" in lines[2] and "FAILED" in lines[2] and "wx-1" in lines[2]
    assert "traceback" not in out  # the first line of an error only


def test_json_is_the_file_one_event_per_line(run: Run, events_file: Path) -> None:
    out = run("notifications", "--events-file", str(events_file), "--json").stdout
    assert [json.loads(line) for line in out.splitlines()] == [
        json.loads(line) for line in events_file.read_text().splitlines()]


def test_filters_by_type_and_run(run: Run, events_file: Path) -> None:
    def ids(*args: str) -> list[str]:
        out = run("notifications", "--events-file", str(events_file), "--json", *args).stdout
        return [json.loads(line)["detail"]["event_id"] for line in out.splitlines()]

    assert ids("--type", "workflow-ended") == ["wx-1/ended/0", "wx-2/ended/0"]
    assert ids("--type", "Activity Failed", "--type", "wait-started") == [
        "wx-2:ok:1/waiting", "wx-1:load:2/failed"]
    assert ids("--workflow-exec-id", "wx-2") == ["wx-2:ok:1/waiting", "wx-2/ended/0"]
    assert ids("-t", "workflow-ended", "-W", "wx-1") == ["wx-1/ended/0"]


def test_the_file_may_come_from_the_environment(events_file: Path) -> None:
    run = Run(CliRunner(), {"WHIMBREL_EVENTS_FILE": str(events_file)})
    assert len(run("notifications", "--json").stdout.splitlines()) == 4


@pytest.mark.parametrize(("args", "message"), [
    ((), "give --events-file or set WHIMBREL_EVENTS_FILE"),
    (("--events-file", "/nonexistent/e.jsonl"), "does not exist"),
    (("--type", "exploded"), "not one of activity-failed, wait-started, workflow-ended"),
])
def test_bad_arguments_are_usage_errors(run: Run, events_file: Path, args: tuple[str, ...],
                                        message: str) -> None:
    if args and args[0] == "--type":
        args = ("--events-file", str(events_file), *args)
    result = run("notifications", *args, code=2)
    assert message in " ".join(result.stderr.split())


def test_a_line_that_is_no_event_is_invalid_input(run: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"detail-type": "Workflow Ended"}\n[1, 2]\n')
    result = run("notifications", "--events-file", str(bad), code=4)
    assert "is not a JSON object" in result.stderr


def test_follow_prints_events_as_they_are_appended(tmp_path: Path) -> None:
    path = tmp_path / "later.jsonl"  # dev has not created it yet: follow waits for it
    proc = subprocess.Popen([WHIMBREL, "notifications", "--events-file", str(path),
                             "--follow", "--json", "--interval", "0.05", "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        publisher = JsonLinesPublisher(path)
        first, *rest = _notes()
        publisher.publish([first])
        wait_until(lambda: len(lines) == 1, timeout=30, message=lambda: proc.stderr.read()
                   if proc.poll() is not None and proc.stderr else "no line yet")
        publisher.publish(rest)
        wait_until(lambda: len(lines) == 4, timeout=30)
        assert [json.loads(line)["detail"]["event_id"] for line in lines] == [
            n.event_id for n in _notes()]
        assert proc.poll() is None  # still following
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        reader.join(timeout=30)


def test_dev_refuses_an_events_file_it_cannot_write(run: Run, tmp_path: Path) -> None:
    result = run("dev", "--events-file", str(tmp_path / "missing" / "e.jsonl"), code=2)
    assert "does not exist" in result.stderr
