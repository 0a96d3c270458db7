"""``whimbrel schedules …`` on DynamoDB Local: create, apply a YAML file, list, pause,
resume, backfill, delete; bad input exits 4 and stores nothing."""

from __future__ import annotations

import json
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
    # Issue 31: the host's zone link is no IANA name (it fired at different times on
    # different hosts).
    bad = run("schedules", "create", "local", "report", "--cron", "0 0 * * *",
              "--timezone", "localtime", code=4)
    assert "'localtime' is not a known IANA time zone" in bad.stderr
    yaml_file = write_definition(
        "schedules:\n  - schedule_id: ok\n    workflow_name: report\n    every_seconds: 60\n"
        "  - schedule_id: bad\n    workflow_name: report\n    cron: '0 0 30 2 *'\n",
        "schedules.yaml")
    run("schedules", "apply", str(yaml_file), code=4)  # checked before anything is made
    assert run.json("schedules", "list") == []


def test_an_odd_stored_schedule_is_listed_and_swept_past(
        run: Run, wb: Whimbrel, write_definition: Callable[..., Path]) -> None:
    """Issue 31: a stored spec with a field this version does not know, or a value of a
    wrong type, made ``schedules list`` and ``sweep`` exit 1 with a TypeError."""
    run("definitions", "register", str(write_definition(WF)))
    for sid in ("newer", "odd"):
        run("schedules", "create", sid, "report", "--every-seconds", "60",
            "--overlap", "allow")
    table = wb.store.table_name("schedule")
    minute = int(time.time()) // 60 * 60
    for sid, extra in (("newer", {"jitter_seconds": 5}), ("odd", {"timezone": 5})):
        key = {"schedule_id": {"S": sid}}
        spec = json.loads(wb.store.tables.client.call(
            "GetItem", {"TableName": table, "Key": key})["Item"]["spec"]["S"])
        wb.store.tables.client.call("UpdateItem", {
            "TableName": table, "Key": key,
            # Its next look (and fire) moved to a minute ago: due, so the sweep reads it.
            "UpdateExpression": "SET spec = :s, next_fire_epoch = :n, last_fire_epoch = :l",
            "ExpressionAttributeValues": {":s": {"S": json.dumps({**spec, **extra})},
                                          ":n": {"N": str(minute)},
                                          ":l": {"N": str(minute - 60)}}})
    listed = run("schedules", "list")
    assert "newer" in listed.stdout and "ACTIVE (odd)" in listed.stdout
    assert "schedule odd is skipped by the sweep: timezone 5 is not a known IANA" \
        in " ".join(listed.stdout.split())
    rows = {r["schedule_id"]: r for r in run.json("schedules", "list")}
    assert rows["newer"]["problem"] is None and rows["newer"]["ignored_fields"] == [
        "jitter_seconds"]
    assert "timezone" in rows["odd"]["problem"]
    run("sweep", "--json")
    assert wb.get_schedule("newer").last_run == workflow_exec_id_for(
        fire_request_id("newer", minute))
    odd = wb.get_schedule("odd")
    assert odd.last_run is None and odd.next_fire_epoch == minute  # left as it was


def test_the_one_firing_recipe_through_the_cli(run: Run, wb: Whimbrel,
                                               write_definition: Callable[..., Path]) -> None:
    """docs/schedules.md: one firing is ``every_seconds`` with ``start_at`` and ``end_at``
    both at that time; a time with a fraction of a second was refused (issue 31)."""
    run("definitions", "register", str(write_definition(WF)))
    made = run.json("schedules", "create", "once", "report", "--every-seconds", "60",
                    "--start-at", "2030-01-01T00:00:00.5Z", "--end-at",
                    "2030-01-01T00:00:00.5Z")
    assert made["status"] == "ACTIVE"
    assert made["next_fire"] == "2030-01-01T00:00:01.000+00:00"
