"""``submit``, ``status``, ``list``, ``events`` against DynamoDB Local."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import FANOUT_YAML, Run

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.store.transport import refuse_scans

FAILING = WorkflowDefinition("failing", (
    ActivityDefinition("ok", launcher=LauncherSpec.python("wb_test_activities:echo")),
    ActivityDefinition("boom", ("ok",), launcher=LauncherSpec.python("wb_test_activities:fail")),
))
EXTERNAL = WorkflowDefinition("external", (ActivityDefinition("step"),))


@pytest.fixture
def fanout(run: Run, write_definition: Callable[..., Path], wb: Whimbrel) -> Whimbrel:
    run("definitions", "register", str(write_definition(FANOUT_YAML)))
    return wb


def test_submit_wait_runs_the_fanout_to_completion(run: Run, fanout: Whimbrel,
                                                   tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text('{"day": "2024-06-01"}')
    wf = run.json("submit", "fanout", "--input", f"@{tmp_path / 'in.json'}", "--wait",
                  "--run-here")
    assert wf["state"] == "COMPLETED"
    assert set(wf) >= {"workflow_exec_id", "workflow_name", "version", "state", "input",
                       "created_epoch", "ended_epoch", "duration_seconds", "error",
                       "activities"}
    assert wf["input"] == {"day": "2024-06-01"}
    acts = wf["activities"]
    assert acts[0]["activity_name"] == "extract"
    assert acts[-1]["activity_name"] == "load"
    assert {a["state"] for a in acts} == {"COMPLETED"}
    load = acts[-1]
    assert set(load) == {"activity_exec_id", "activity_name", "attempt", "max_attempts",
                         "latest", "state", "created_epoch", "started_epoch", "ended_epoch",
                         "heartbeat_epoch", "heartbeat_details", "duration_seconds",
                         "not_before_epoch", "output", "error", "waiting_for", "late_output",
                         "late_error"}
    assert load["output"] == {"name": "load", "upstream": ["t1", "t2", "t3"]}
    assert load["attempt"] == 1 and load["max_attempts"] == 1 and load["latest"] is True


def test_submit_without_wait_prints_the_id(run: Run, fanout: Whimbrel) -> None:
    out = run.json("submit", "fanout", "--input", '{"a": 1}', "--request-id", "req-1")
    assert set(out) == {"workflow_exec_id", "workflow_request_id", "workflow_name", "mode"}
    assert out["workflow_request_id"] == "req-1"
    assert out["mode"] == "full"
    # python activities are never run by the one-shot CLI: it left them for a worker
    extract = fanout.get_workflow(out["workflow_exec_id"]).activity("extract")
    assert extract.state.value == "READY" and extract.error is None
    # the same request id is the same single run; with another input it is refused
    again = run("submit", "fanout", "--input", '{"a": 1}', "--request-id",
                "req-1").stdout.strip()
    assert again == out["workflow_exec_id"]
    assert "with another input" in run("submit", "fanout", "--request-id", "req-1",
                                       code=4).stderr


def test_submit_exit_codes(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(FAILING)
    failed = run.json("submit", "failing", "--wait", "--run-here", code=10)
    assert failed["state"] == "FAILED"
    assert "boom failed on purpose" in failed["error"]
    human = run("submit", "failing", "--wait", "--run-here", code=10)
    assert "FAILED" in human.stdout and "boom" in human.stdout
    assert run("submit", "nope", code=3).stderr.startswith("error: no registered workflow")
    bad = run("submit", "failing", "--input", "{nope", code=4)
    assert bad.stderr.startswith("error: --input is not valid JSON")
    assert run("submit", "failing", "--input", "@/no/such.json", code=4)


def test_submit_wait_timeout_exits_12(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(EXTERNAL)  # nobody claims the external step
    result = run("submit", "external", "--wait", "--timeout", "0.3", "--interval", "0.1",
                 code=12)
    assert "still RUNNING" in result.stderr


def test_status_json_table_and_tree(run: Run, fanout: Whimbrel) -> None:
    wx = fanout.start_workflow("fanout", {"x": 1})
    fanout.wait(wx, timeout=20)
    data = run.json("status", wx)
    assert data["workflow_exec_id"] == wx and data["state"] == "COMPLETED"
    assert len(data["activities"]) == 5
    table = run("status", wx).stdout
    assert "fanout v1" in table and "COMPLETED" in table
    for col in ("activity", "state", "attempt", "duration", "heartbeat", "after", "error"):
        assert col in table
    tree = run("status", wx, "--view", "tree").stdout
    assert "(after t1, t2, t3)" in tree and "└──" in tree
    watched = run.json("status", wx, "--watch")  # already ended: returns at once
    assert watched["state"] == "COMPLETED"


def test_status_errors_are_one_line_unless_debug(run: Run, wb: Whimbrel) -> None:
    result = run("status", "no-such-run", code=3)
    assert result.stderr == "error: no workflow execution 'no-such-run'\n"
    debug = run("status", "no-such-run", "--debug", code=3)
    assert "Traceback" in debug.stderr and "WorkflowNotFound" in debug.stderr
    as_json = run("status", "no-such-run", "--json", code=3)
    assert '"error": "WorkflowNotFound"' in as_json.stderr and as_json.stdout == ""


def test_list_uses_indexes_not_scan(run: Run, wb: Whimbrel,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    wb.register_workflow(EXTERNAL)
    wb.register_workflow(FAILING)
    ids = [wb.start_workflow("external") for _ in range(3)]
    failed = wb.start_workflow("failing")
    wb.wait(failed, timeout=20)
    cancelled = ids[0]
    wb.cancel_workflow(cancelled)

    refuse_scans(monkeypatch, "whimbrel list must not Scan")

    def listed(*args: str) -> list[str]:
        return [r["workflow_exec_id"] for r in run.json("list", *args)["items"]]

    page = run.json("list")
    assert [r["workflow_exec_id"] for r in page["items"]] == [failed, *reversed(ids)]
    assert page["cursor"] is None
    assert set(page["items"][0]) == {
        "workflow_exec_id", "workflow_name", "version", "state", "workflow_request_id",
        "created_epoch", "updated_epoch", "ended_epoch", "duration_seconds", "error",
        "attributes"}
    first = run.json("list", "--workflow", "external", "--limit", "2")
    assert [r["workflow_exec_id"] for r in first["items"]] == [ids[2], ids[1]]
    assert listed("--workflow", "external", "--limit", "2", "--cursor",
                  first["cursor"]) == [ids[0]]
    assert listed("--state", "CANCELLED") == [cancelled]
    assert listed("--workflow", "failing", "--state", "failed") == [failed]
    assert listed("--state", "running", "--state", "failed", "--limit", "1000") == [
        failed, ids[2], ids[1]]
    created = wb.get_workflow(ids[1]).created_epoch
    assert listed("--since", str(created), "--until", str(wb.get_workflow(failed)
                                                           .created_epoch)) == [ids[2], ids[1]]
    assert listed("--since", "1h", "--workflow", "external") == list(reversed(ids))
    # An age names the same window on every page: it counts from the first page's time.
    aged = run.json("list", "--since", "1h", "--limit", "2")
    assert listed("--since", "1h", "--limit", "2", "--cursor", aged["cursor"]) == [
        ids[1], ids[0]]
    assert listed("--until", "2000-01-01") == []
    assert listed("--days", "1", "--state", "CANCELLED") == [cancelled]
    assert run.json("list", "--workflow", "nope") == {"items": [], "cursor": None}
    human = run("list").stdout
    assert failed in human and "external v1" in human
    assert "no runs found" in run("list", "--workflow", "nope").stdout
    more = run("list", "--limit", "1")
    assert failed in more.stdout and "more runs: add --cursor " in more.stderr


def test_events_timeline(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(FAILING)
    wx = wb.start_workflow("failing")
    wb.wait(wx, timeout=20)
    data = run.json("events", wx)
    assert data["workflow_exec_id"] == wx and data["state"] == "FAILED"
    evs = data["events"]
    assert set(evs[0]) == {"at", "at_iso", "offset_seconds", "subject", "activity_name",
                           "attempt", "activity_exec_id", "state", "by", "error"}
    assert [e["at"] for e in evs] == sorted(e["at"] for e in evs)
    assert (evs[0]["subject"], evs[0]["state"]) == ("workflow", "REQUESTED")
    assert (evs[-1]["subject"], evs[-1]["state"]) == ("workflow", "FAILED")
    boom = [(e["state"]) for e in evs if e["subject"] == "boom#1"]
    assert boom[0] == "REQUESTED" and boom[-1] == "FAILED"
    assert "failed on purpose" in next(e["error"] for e in evs
                                       if e["subject"] == "boom#1" and e["state"] == "FAILED")
    only_ok = run.json("events", wx, "--activity", "ok")["events"]
    assert {e["subject"] for e in only_ok} == {"workflow", "ok#1"}
    human = run("events", wx).stdout
    assert "boom#1" in human and "FAILED_WAITING" in human


def test_submit_simple_writes_a_request_item(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(EXTERNAL)
    out = run.json("submit", "external", "--simple", "--input", '{"k": "v"}')
    assert out["mode"] == "simple"
    assert out["workflow_exec_id"] == workflow_exec_id_for(out["workflow_request_id"])
    item = wb.store.cold.get_request(out["workflow_request_id"])
    assert item is not None and item.workflow_name == "external" and not item.manual
    # Nothing consumes the stream here: --wait gives up with a hint.
    result = run("submit", "external", "--simple", "--wait", "--timeout", "0.5", code=12)
    assert "workflow_request Lambda (or `whimbrel dev`)" in result.stderr
