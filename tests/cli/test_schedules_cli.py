"""``whimbrel schedules …`` on DynamoDB Local: create, apply a YAML file, list, pause,
resume, backfill, delete; bad input exits 4 and stores nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from cli_helpers import Run

from whimbrel import Whimbrel
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.schedules import fire_request_id

WF = """\
name: report
activities:
  - name: build
    launcher: {type: signal, name: go}
"""


def test_schedules_commands(run: Run, wb: Whimbrel,
                            write_definition: Callable[..., Path]) -> None:
    run("definitions", "register", str(write_definition(WF)))
    made = run.json("schedules", "create", "nightly", "report", "--cron", "0 2 * * *",
                    "--timezone", "Europe/Berlin", "--input", '{"k": 1}')
    assert made["status"] == "ACTIVE" and made["timezone"] == "Europe/Berlin"
    assert made["next_fire"][11:] in ("01:00:00.000+00:00", "00:00:00.000+00:00")  # 02:00 CET/CEST
    assert made["input"] == {"k": 1}
    again = run("schedules", "create", "nightly", "report", "--cron", "0 2 * * *",
                "--timezone", "Europe/Berlin", "--input", '{"k": 1}')
    assert "created schedule nightly (ACTIVE)" in again.stdout  # idempotent
    run("schedules", "create", "nightly", "report", "--cron", "0 3 * * *", code=5)
    yaml_file = write_definition(
        "schedules:\n  - schedule_id: hourly\n    workflow_name: report\n"
        "    every_seconds: 3600\n    overlap: allow\n", "schedules.yaml")
    assert [r["schedule_id"] for r in run.json("schedules", "apply", str(yaml_file))] \
        == ["hourly"]
    listed = run("schedules", "list")
    assert "nightly" in listed.stdout and "every 3600 s" in listed.stdout
    assert run.json("schedules", "pause", "nightly")["status"] == "PAUSED"
    assert run.json("schedules", "resume", "nightly")["status"] == "ACTIVE"
    day = int(time.time()) // 86400 * 86400 - 2 * 86400
    end = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(day + 86400))
    start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(day))
    filled = run.json("schedules", "backfill", "hourly", "--start", start, "--end", end)
    assert len(filled["workflow_exec_ids"]) == 25
    assert filled["workflow_exec_ids"][0] == workflow_exec_id_for(
        fire_request_id("hourly", day))
    run("schedules", "delete", "hourly")
    assert [r["schedule_id"] for r in run.json("schedules", "list")] == ["nightly"]
    run("schedules", "delete", "hourly", code=3)


def test_bad_schedules_exit_4_and_store_nothing(run: Run, wb: Whimbrel,
                                               write_definition: Callable[..., Path]) -> None:
    run("definitions", "register", str(write_definition(WF)))
    bad = run("schedules", "create", "feb", "report", "--cron", "0 0 30 2 *", code=4)
    assert "never fires" in bad.stderr
    bad = run("schedules", "create", "tz", "report", "--cron", "0 0 * * *",
              "--timezone", "Mars/Base", code=4)
    assert "time zone" in bad.stderr
    run("schedules", "create", "ghost", "nope", "--every-seconds", "60", code=3)
    yaml_file = write_definition(
        "schedules:\n  - schedule_id: ok\n    workflow_name: report\n    every_seconds: 60\n"
        "  - schedule_id: bad\n    workflow_name: report\n    cron: '0 0 30 2 *'\n",
        "schedules.yaml")
    run("schedules", "apply", str(yaml_file), code=4)  # checked before anything is made
    assert run.json("schedules", "list") == []
