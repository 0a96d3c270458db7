"""Issue 29, heartbeat details: an attempt keeps the latest details its heartbeats
carried, the next attempt reads them as ``ActivityRun.previous_details``, and the helper
writes a heartbeat only when the deadline needs it (80% of the timeout) or the details
changed — on DynamoDB Local, through the Python API and a raw HEARTBEAT row. The clock
stands still (``CLOCK = StepClock``) until a test moves it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from whimbrel import (
    ActivityCancelled,
    ActivityState,
    InvalidInput,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel import ActivityDefinition as Act
from whimbrel.contract.ids import activity_exec_id
from whimbrel.local.runtime import LambdaContext
from whimbrel.store import specs
from whimbrel.testing import StepClock

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

from lambdas import activity_event  # noqa: E402

CLOCK = StepClock
A = ActivityState
HB = 100.0


def _define(wb: Whimbrel, name: str, hb: float | None = HB) -> None:
    wb.register_workflow(WorkflowDefinition(name, (Act(
        "w", launcher=LauncherSpec.external(), heartbeat_timeout_seconds=hb,
        retry=RetryPolicy(max_attempts=3, initial_interval_seconds=0.0)),)))


def _claim(wb: Whimbrel, name: str) -> str:
    got = wb.claim(workflow_name=name)
    assert got is not None
    return got.activity_exec_id


def _beat_at(wb: Whimbrel, aeid: str) -> float | None:
    return wb.get_activity(aeid).heartbeat_epoch


def test_details_are_kept_and_the_next_attempt_resumes_from_them(
        wb: Whimbrel, clock: StepClock) -> None:
    _define(wb, "hb_resume")
    wx = wb.start_workflow("hb_resume")
    first = _claim(wb, "hb_resume")
    with pytest.raises(RuntimeError), wb.run_activity(first) as run:
        assert run.previous_details is None  # the first attempt: nothing to resume
        for done in (1000, 5000, 9000):
            clock.advance(1)
            run.heartbeat({"done": done})  # new details: written each time
        assert wb.get_activity(first).heartbeat_details == {"done": 9000}
        raise RuntimeError("record 9,001 is malformed")
    assert wb.get_activity(first).state is A.FAILED
    assert wb.get_activity(first).heartbeat_details == {"done": 9000}
    second = _claim(wb, "hb_resume")
    assert second == activity_exec_id(wx, "w", 2)
    with pytest.raises(RuntimeError), wb.run_activity(second) as run:
        assert run.previous_details == {"done": 9000}
        raise RuntimeError("fails before any progress")
    third = _claim(wb, "hb_resume")
    with wb.run_activity(third) as run:  # attempt 2 kept none: attempt 1's still count
        assert run.previous_details == {"done": 9000}
        run.output = {"resumed_from": run.previous_details["done"]}
    assert wb.get_workflow(wx).output == {"w": {"resumed_from": 9000}}


def test_the_helper_writes_only_when_the_deadline_needs_it_or_details_change(
        wb: Whimbrel, clock: StepClock) -> None:
    _define(wb, "hb_pace")
    wb.start_workflow("hb_pace")
    aeid = _claim(wb, "hb_pace")
    with wb.run_activity(aeid) as run:
        started = _beat_at(wb, aeid)
        for _ in range(5):
            clock.advance(10)
            run.heartbeat()  # 10 to 50 s of a 100 s timeout: the deadline needs nothing
        assert _beat_at(wb, aeid) == started
        run.heartbeat({"done": 1})
        assert wb.get_activity(aeid).heartbeat_details == {"done": 1}
        written = _beat_at(wb, aeid)
        assert written == clock()
        clock.advance(10)
        run.heartbeat({"done": 1})  # the same details: nothing new to write
        assert _beat_at(wb, aeid) == written
        clock.advance(70)  # 80 s since the last write: 80% of the timeout
        run.heartbeat()
        assert _beat_at(wb, aeid) == clock()
        assert wb.get_activity(aeid).heartbeat_details == {"done": 1}  # kept
        run.output = "ok"
    assert wb.get_activity(aeid).state is A.COMPLETED


def test_a_cancel_is_still_learned_between_writes(wb: Whimbrel, clock: StepClock) -> None:
    _define(wb, "hb_cancel")
    wx = wb.start_workflow("hb_cancel")
    aeid = _claim(wb, "hb_cancel")
    with wb.run_activity(aeid) as run:
        wb.cancel_workflow(wx)
        clock.advance(HB / 3)  # a third of the timeout: one read asks whether to stop
        with pytest.raises(ActivityCancelled):
            run.heartbeat()
        assert run.stop_requested is not None
    assert wb.get_activity(aeid).state is A.CANCELLED


def test_the_client_heartbeat_always_writes_and_keeps_details(
        wb: Whimbrel, clock: StepClock) -> None:
    _define(wb, "hb_client")
    wb.start_workflow("hb_client")
    aeid = _claim(wb, "hb_client")
    clock.advance(1)
    wb.heartbeat(aeid, details={"page": 3})
    act = wb.get_activity(aeid)
    assert (act.heartbeat_epoch, act.heartbeat_details) == (clock(), {"page": 3})
    clock.advance(1)
    wb.heartbeat(aeid)  # no details: the kept ones stay
    act = wb.get_activity(aeid)
    assert (act.heartbeat_epoch, act.heartbeat_details) == (clock(), {"page": 3})


@pytest.mark.parametrize("bad, why", [
    (object(), "details is not JSON-serialisable"),
    ({"blob": "x" * 20_000}, "more than the limit of 16000"),
    (float("nan"), "details is not JSON-serialisable"),
])
def test_bad_details_are_refused_and_nothing_is_written(
        wb: Whimbrel, clock: StepClock, bad: Any, why: str) -> None:
    _define(wb, "hb_bad")
    wb.start_workflow("hb_bad")
    aeid = _claim(wb, "hb_bad")
    wb.heartbeat(aeid, details={"ok": 1})
    before = wb.get_activity(aeid)
    clock.advance(5)
    with pytest.raises(InvalidInput, match=why):
        wb.heartbeat(aeid, details=bad)
    with wb.run_activity(aeid) as run:
        with pytest.raises(InvalidInput, match=why):
            run.heartbeat(bad)
        run.output = 1
    after = wb.get_activity(aeid)
    assert (after.heartbeat_epoch, after.heartbeat_details) == (
        before.heartbeat_epoch, {"ok": 1})


# -- the Simple API row ---------------------------------------------------------------------

def _row(wb: Whimbrel, item: dict[str, Any]) -> dict[str, Any]:
    """A raw client's PutItem of an activity_event row, fed to the real Lambda handler."""
    spec = specs.table_spec("activity_event")
    table = spec.table_name(wb.table_prefix)
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    ddb.put_item(TableName=table, Item=item)
    record = {"eventID": f"ev-{item['activity_event_id']['S']}", "eventName": "INSERT",
              "eventVersion": "1.1", "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
              "eventSourceARN": f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}"
                                "/stream/2025-01-01T00:00:00",
              "dynamodb": {"ApproximateCreationDateTime": float(int(time.time())),
                           "Keys": {"activity_event_id": item["activity_event_id"]},
                           "NewImage": item, "SequenceNumber": "1000", "SizeBytes": 100,
                           "StreamViewType": "NEW_AND_OLD_IMAGES"}}
    assert activity_event.handler({"Records": [record]}, LambdaContext("hb-rows", wb)) == {
        "batchItemFailures": []}
    row: dict[str, Any] = ddb.get_item(TableName=table, ConsistentRead=True, Key={
        "activity_event_id": item["activity_event_id"]})["Item"]
    return row


def test_a_heartbeat_row_keeps_its_details(wb: Whimbrel, clock: StepClock,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    _define(wb, "hb_rows")
    wb.start_workflow("hb_rows")
    aeid = _claim(wb, "hb_rows")
    row = _row(wb, {"activity_event_id": {"S": "hb-1"}, "activity_exec_id": {"S": aeid},
                    "transition": {"S": "HEARTBEAT"}, "details": {"S": '{"offset": 42}'}})
    assert row["outcome"]["S"] == "APPLIED", row
    assert wb.get_activity(aeid).heartbeat_details == {"offset": 42}
    row = _row(wb, {"activity_event_id": {"S": "hb-2"}, "activity_exec_id": {"S": aeid},
                    "transition": {"S": "HEARTBEAT"},
                    "details": {"M": {"offset": {"N": "43"}}}})  # a native map too
    assert wb.get_activity(aeid).heartbeat_details == {"offset": 43}
    row = _row(wb, {"activity_event_id": {"S": "hb-3"}, "activity_exec_id": {"S": aeid},
                    "transition": {"S": "HEARTBEAT"}, "details": {"S": "{not json"}})
    assert row["outcome"]["S"] != "APPLIED", row
    assert "details" in row["reason"]["S"], row
    assert wb.get_activity(aeid).heartbeat_details == {"offset": 43}  # unchanged
