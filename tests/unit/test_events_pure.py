"""Events without I/O: which attempt failed for good, the events' shape against the
documented schema, the notify filters (as the local runtime applies them, with Lambda's
syntax), the EMF lines, and the settings that switch them on."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from whimbrel import ActivityDefinition, InvalidInput, RetryPolicy, WorkflowState
from whimbrel.contract import notifications as events
from whimbrel.contract.records import ActivityRecord, Change, WorkflowRecord
from whimbrel.contract.states import ACTIVITY_TRANSITIONS, ActivityState
from whimbrel.contract.states import WorkflowState as W
from whimbrel.engine import rules
from whimbrel.local.filters import matches_any
from whimbrel.observe.emf import EmfMetrics
from whimbrel.observe.publishers import (
    EventBridgePublisher,
    JsonLinesPublisher,
    PublishError,
    publisher_from_settings,
)
from whimbrel.settings import Settings
from whimbrel.store import consumers

A = ActivityState
DOCS = Path(__file__).resolve().parents[2] / "docs"
VALIDATOR = Draft202012Validator(events.EVENT_SCHEMA, format_checker=FormatChecker())
T0 = 1_790_000_000.0


def attempt(state: A, n: int = 1, *, history: tuple[str, ...] = (), **kw: Any
            ) -> ActivityRecord:
    path = history or ("REQUESTED", "READY", "RUNNING", state.value)
    fields: dict[str, Any] = {"started_epoch": T0 + 1, "ended_epoch": T0 + 5, **kw}
    return ActivityRecord(
        workflow_exec_id="wx", activity_exec_id=f"wx:load:{n}", activity_name="load",
        workflow_name="etl", attempt=n, state=state, workflow_version=3,
        created_epoch=T0, updated_epoch=T0 + 5,
        history=tuple(Change(s, T0) for s in path), **fields)


SPEC = ActivityDefinition("load", retry=RetryPolicy(max_attempts=3))


# -- failed for good ---------------------------------------------------------------------


@pytest.mark.parametrize(("state", "n", "for_good"), [
    (A.FAILED, 1, False), (A.FAILED, 2, False), (A.FAILED, 3, True),
    (A.TIMED_OUT, 2, False), (A.TIMED_OUT, 3, True), (A.TIMED_OUT, 4, True),
    (A.COMPLETED, 3, False), (A.CANCELLED, 3, False), (A.RUNNING, 3, False),
])
def test_failed_for_good_is_the_last_attempt_its_policy_allows(state: A, n: int,
                                                               for_good: bool) -> None:
    item = attempt(state, n)
    assert rules.failed_for_good(SPEC, item) is for_good
    if state in events.FAILURE_STATES:
        # One decision: an event says "for good" exactly when on_failure does not retry.
        assert rules.retry_follows(SPEC, item) is not for_good


def test_an_attempt_asked_to_stop_that_times_out_was_cancelled_not_failed() -> None:
    item = attempt(A.TIMED_OUT, 3, history=("REQUESTED", "READY", "RUNNING",
                                            "CANCELLED_RUNNING", "TIMED_OUT"))
    assert not rules.failed_for_good(SPEC, item)
    assert rules.failed_for_good(ActivityDefinition("load"), attempt(A.TIMED_OUT, 1))


# -- the events and their schema ----------------------------------------------------------


def _valid(note: events.Notification) -> dict[str, Any]:
    envelope = note.envelope()
    errors = sorted(VALIDATOR.iter_errors(json.loads(json.dumps(envelope))), key=str)
    assert errors == [], [e.message for e in errors]
    return envelope


def run(state: W, **kw: Any) -> WorkflowRecord:
    return WorkflowRecord("wx", "etl", 3, state, workflow_request_id="req-1",
                          created_epoch=T0, updated_epoch=T0 + 90, ended_epoch=T0 + 90, **kw)


@pytest.mark.parametrize("state", sorted(s for s in W if s.is_terminal))
def test_workflow_ended_matches_the_schema(state: W) -> None:
    note = events.workflow_ended(run(state, error="boom" if state is not W.COMPLETED else None),
                                 previous="RUNNING",
                                 output={"load": {"rows": 1}} if state is W.COMPLETED else None)
    envelope = _valid(note)
    assert envelope["source"] == "whimbrel"
    assert envelope["detail-type"] == "Workflow Ended"
    assert envelope["time"] == events.iso_time(T0 + 90, millis=False)
    detail = envelope["detail"]
    assert detail["state"] == state.value and detail["duration_seconds"] == 90.0
    assert detail["event_id"] == note.event_id == "wx/ended/0"
    # The envelope id is stable, so a consumer of the local file can dedupe on it too.
    assert envelope["id"] == note.envelope()["id"]


def test_a_redriven_run_ends_under_a_new_event_id() -> None:
    first = events.workflow_ended(run(W.FAILED), previous="RUNNING")
    again = events.workflow_ended(run(W.FAILED), previous="RUNNING", redrive_count=1)
    assert first.event_id != again.event_id


def test_big_outputs_and_errors_are_cut() -> None:
    big = {"load": "x" * (events.MAX_EVENT_OUTPUT_BYTES + 1)}
    detail = _valid(events.workflow_ended(run(W.COMPLETED), previous="RUNNING",
                                          output=big))["detail"]
    assert "output" not in detail and detail["output_truncated"] is True
    failed = attempt(A.FAILED, 3, error="e" * 50_000, error_type="ValueError")
    detail = _valid(events.activity_failed(failed, previous="RUNNING", max_attempts=3))["detail"]
    assert len(detail["error"]) <= events.MAX_EVENT_ERROR_CHARS
    assert detail["error"].endswith("characters cut]")
    assert detail["error_type"] == "ValueError" and detail["max_attempts"] == 3


def test_activity_failed_and_wait_started_match_the_schema() -> None:
    failed = _valid(events.activity_failed(attempt(A.TIMED_OUT, 3), previous="RUNNING",
                                           max_attempts=3))
    assert failed["detail"]["event_id"] == "wx:load:3/failed"
    waiting = attempt(A.READY, 1, history=("REQUESTED", "READY"), timer_epoch=T0 + 3600)
    note = events.wait_started(waiting, waiting_for="approval", approvers=["ann", "bo"])
    detail = _valid(note)["detail"]
    assert detail["waiting_for"] == "approval" and detail["approvers"] == ["ann", "bo"]
    assert detail["deadline_at"] == events.iso_time(T0 + 3600)
    assert detail["event_id"] == "wx:load:1/waiting"
    # Without approvers the field is absent, and the schema allows that.
    assert "approvers" not in _valid(events.wait_started(waiting, waiting_for="timer:x"))[
        "detail"]


def test_the_schema_refuses_what_is_not_an_event() -> None:
    envelope = events.activity_failed(attempt(A.FAILED, 3), previous="RUNNING",
                                      max_attempts=3).envelope()
    for broken in ({**envelope, "source": "other"},
                   {**envelope, "detail": {**envelope["detail"], "state": "COMPLETED"}},
                   {**envelope, "detail": {**envelope["detail"], "surprise": 1}},
                   {**envelope, "detail-type": "Workflow Ended"}):
        assert list(VALIDATOR.iter_errors(broken)), broken


def test_docs_events_md_prints_the_schema() -> None:
    text = (DOCS / "events.md").read_text(encoding="utf-8")
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", text, re.DOTALL)]
    assert events.EVENT_SCHEMA in blocks
    for detail_type in events.DetailType:
        assert f"`{detail_type.value}`" in text


# -- the notify filters -------------------------------------------------------------------


def _image(state: str, **extra: dict[str, Any]) -> dict[str, Any]:
    return {"workflow_exec_id": {"S": "wx"}, "activity_exec_id": {"S": "wx:a:1"},
            "state": {"S": state}, **extra}


def _record(event: str, new: dict[str, Any], old: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    ddb: dict[str, Any] = {"NewImage": new}
    if old is not None:
        ddb["OldImage"] = old
    return {"eventName": event, "dynamodb": ddb}


WAITING = {"waiting_for": {"S": "approval"}}


def _activity_expected(old: A, new: A) -> bool:
    return new in events.FAILURE_STATES and old not in (*events.FAILURE_STATES,
                                                        A.CANCELLED_RUNNING)


@pytest.mark.parametrize(("old", "new"), sorted(
    {(s, n) for (s, _), n in ACTIVITY_TRANSITIONS.items()}))
def test_activity_filter_passes_failures_of_every_contract_move(old: A, new: A) -> None:
    patterns = consumers.NOTIFY_ACTIVITY_CONSUMER.filter_patterns
    record = _record("MODIFY", _image(new.value), _image(old.value))
    assert matches_any(patterns, record) is _activity_expected(old, new)


def test_activity_filter_passes_waits_that_start_only() -> None:
    patterns = consumers.NOTIFY_ACTIVITY_CONSUMER.filter_patterns
    assert matches_any(patterns, _record("MODIFY", _image("READY", **WAITING),
                                         _image("REQUESTED")))
    assert matches_any(patterns, _record("INSERT", _image("READY", **WAITING)))
    # A READY attempt that is no wait; bookkeeping on a waiting one (issue 13's suspend);
    # a wait that leaves READY; TTL deletes; attribute updates on ended attempts.
    assert not matches_any(patterns, _record("MODIFY", _image("READY"), _image("REQUESTED")))
    assert not matches_any(patterns, _record("INSERT", _image("READY")))
    assert not matches_any(patterns, _record("MODIFY", _image("READY", **WAITING),
                                             _image("READY", **WAITING)))
    assert not matches_any(patterns, _record("MODIFY", _image("RUNNING", **WAITING),
                                             _image("READY", **WAITING)))
    assert not matches_any(patterns, _record("REMOVE", _image("FAILED"), _image("FAILED")))
    assert not matches_any(patterns, _record("MODIFY", _image("FAILED"), _image("FAILED")))


@pytest.mark.parametrize("old", list(W))
@pytest.mark.parametrize("new", list(W))
def test_workflow_filter_passes_the_write_that_ends_a_run(old: W, new: W) -> None:
    patterns = consumers.NOTIFY_WORKFLOW_CONSUMER.filter_patterns
    record = _record("MODIFY", {"state": {"S": new.value}}, {"state": {"S": old.value}})
    assert matches_any(patterns, record) is (new.is_terminal and not old.is_terminal)
    assert not matches_any(patterns, _record("REMOVE", {"state": {"S": new.value}},
                                             {"state": {"S": old.value}}))


# -- metrics and settings -----------------------------------------------------------------


def test_emf_lines_carry_both_dimension_sets() -> None:
    out = io.StringIO()
    emf = EmfMetrics("orders_", stream=out)
    emf.workflow_ended(run(W.FAILED))
    emf.activity_ended(attempt(A.COMPLETED))
    emf.activity_ended(attempt(A.CANCELLED, history=("REQUESTED", "CANCELLED"),
                               started_epoch=None))
    wf, act, never_ran = (json.loads(line) for line in out.getvalue().splitlines())
    [meta] = wf["_aws"]["CloudWatchMetrics"]
    assert meta["Namespace"] == "Whimbrel"
    assert meta["Dimensions"] == [["TablePrefix", "State"],
                                  ["TablePrefix", "WorkflowName", "State"]]
    assert (wf["WorkflowsEnded"], wf["WorkflowDuration"], wf["State"]) == (1.0, 90.0, "FAILED")
    assert act["ActivityDuration"] == 4.0 and act["ActivityName"] == "load"
    assert {m["Name"] for m in act["_aws"]["CloudWatchMetrics"][0]["Metrics"]} == {
        "ActivitiesEnded", "ActivityDuration"}
    # An attempt that never ran has no duration, only its end.
    assert "ActivityDuration" not in never_ran and never_ran["ActivitiesEnded"] == 1.0


def test_emf_timestamps_are_the_end_unless_cloudwatch_would_drop_it() -> None:
    out = io.StringIO()
    emf = EmfMetrics("p_", stream=out)
    now = time.time()
    emf.workflow_ended(WorkflowRecord("wx", "etl", 1, W.COMPLETED, created_epoch=now - 20,
                                      ended_epoch=now - 10))
    emf.workflow_ended(WorkflowRecord("wx", "etl", 1, W.COMPLETED, created_epoch=1.0,
                                      ended_epoch=2.0))  # 1970: older than two weeks
    recent, ancient = (json.loads(line)["_aws"]["Timestamp"]
                       for line in out.getvalue().splitlines())
    assert recent == int((now - 10) * 1000)
    assert ancient >= int(now * 1000)


def test_settings_read_the_events_and_metrics_variables() -> None:
    settings = Settings.from_env({"WHIMBREL_METRICS": "EMF", "WHIMBREL_EVENT_BUS": "orders",
                                  "WHIMBREL_EVENTS_FILE": "/tmp/e.jsonl"})
    assert (settings.metrics, settings.event_bus, settings.events_file) == (
        "emf", "orders", "/tmp/e.jsonl")
    assert Settings.from_env({}).metrics is None
    assert Settings.from_env({"WHIMBREL_METRICS": "off"}).metrics is None
    with pytest.raises(InvalidInput, match="WHIMBREL_METRICS must be one of off, emf"):
        Settings.from_env({"WHIMBREL_METRICS": "prometheus"})


def test_workflow_ended_refuses_a_live_run() -> None:
    with pytest.raises(ValueError, match="not ended"):
        events.workflow_ended(run(WorkflowState.RUNNING), previous="REQUESTED")


def test_the_notify_handler_publishes_where_the_environment_says(tmp_path: Path) -> None:
    to_file = publisher_from_settings(Settings.from_env(
        {"WHIMBREL_EVENTS_FILE": str(tmp_path / "e.jsonl"), "WHIMBREL_EVENT_BUS": "x"}))
    assert isinstance(to_file, JsonLinesPublisher)
    assert to_file.path == tmp_path / "e.jsonl"
    to_bus = publisher_from_settings(Settings.from_env(
        {"WHIMBREL_EVENT_BUS": "arn:aws:events:eu-west-1:111122223333:event-bus/orders",
         "AWS_REGION": "eu-west-1"}))
    assert isinstance(to_bus, EventBridgePublisher)
    assert to_bus.bus.endswith("event-bus/orders")
    assert to_bus.client.meta.region_name == "eu-west-1"
    default = publisher_from_settings(Settings.from_env({"AWS_REGION": "us-east-1"}))
    assert isinstance(default, EventBridgePublisher) and default.bus == "default"


def test_an_unwritable_events_file_is_a_retryable_publish_error(tmp_path: Path) -> None:
    note = events.workflow_ended(run(W.FAILED), previous="RUNNING")
    with pytest.raises(PublishError, match="cannot append to the events file") as failed:
        JsonLinesPublisher(tmp_path / "missing" / "e.jsonl").publish([note])
    assert failed.value.retryable
