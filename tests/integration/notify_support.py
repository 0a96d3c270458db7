"""Helpers of the events tests (a plain module: tests/ has no packages)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import boto3
from jsonschema import Draft202012Validator, FormatChecker

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.notifications import EVENT_SCHEMA, Notification
from whimbrel.local.streams import StreamPump
from whimbrel.observe import PublishError
from whimbrel.store import consumers

A = ActivityState
PY = LauncherSpec.python("wb_test_activities:echo")
ONCE_THEN_RETRY = RetryPolicy(max_attempts=2, initial_interval_seconds=0.0)
SCHEMA = Draft202012Validator(EVENT_SCHEMA, format_checker=FormatChecker())


def filtered_records(wb: Whimbrel, consumer: consumers.StreamConsumerSpec) -> list[dict[str, Any]]:
    """Every record of ``consumer``'s table stream (from its start) that its Lambda filters
    let through, in Lambda's shape: read by the local runtime's own pump."""
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    streams = boto3.client("dynamodbstreams", endpoint_url=wb.endpoint_url,
                           region_name="us-east-1")
    table = consumer.table.table_name(wb.table_prefix)
    arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    got: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        got.extend(event["Records"])
        return {"batchItemFailures": []}

    def dead_letter(records: list[dict[str, Any]], reason: str, error_type: str) -> None:
        raise AssertionError(f"dead-lettered: {reason}")

    pump = StreamPump(consumer, streams=streams, stream_arn=arn, invoke=invoke,
                      dead_letter=dead_letter, stop=threading.Event())
    while pump.poll_once():
        pass
    return got


def notify_records(wb: Whimbrel) -> list[dict[str, Any]]:
    """The records both notify consumers would get."""
    return [r for consumer in consumers.NOTIFY_CONSUMERS for r in filtered_records(wb, consumer)]


def schema_errors(envelope: dict[str, Any]) -> list[str]:
    """Why ``envelope`` (as JSON would carry it) is not a valid event; empty if it is."""
    return [e.message for e in SCHEMA.iter_errors(json.loads(json.dumps(envelope)))]


class FlakyPublisher:
    """Keeps what it publishes; fails the events named in ``failing`` (once each, or
    for good with ``always``)."""

    def __init__(self, failing: Sequence[str] = (), *, always: bool = False) -> None:
        self.published: list[Notification] = []
        self.failing = set(failing)
        self.always = always

    def publish(self, notifications: Sequence[Notification]) -> None:
        for note in notifications:
            if note.event_id in self.failing:
                if not self.always:
                    self.failing.discard(note.event_id)
                raise PublishError(f"bus unavailable for {note.event_id}")
            self.published.append(note)

    def ids(self) -> list[str]:
        return [n.event_id for n in self.published]


def make_runs(wb: Whimbrel) -> dict[str, str]:
    """Runs with one fact of each kind, made in-process; their ids by name."""
    wb.register_workflow(WorkflowDefinition("ev_ok", (Act("a", launcher=PY),
                                                      Act("b", ("a",), launcher=PY))))
    wb.register_workflow(WorkflowDefinition("ev_retried", (Act("x", retry=ONCE_THEN_RETRY),)))
    wb.register_workflow(WorkflowDefinition("ev_cancel", (Act("e"),)))
    wb.register_workflow(WorkflowDefinition("ev_wait", (Act("prep"), Act("approve", ("prep",)))))
    ok = wb.start_workflow("ev_ok", {"n": 1})
    assert wb.wait(ok, timeout=30).state is WorkflowState.COMPLETED
    retried = wb.start_workflow("ev_retried")
    for n in (1, 2):  # attempt 1 fails and is retried at once; attempt 2 fails for good
        aeid = activity_exec_id(retried, "x", n)
        wb.transition_activity(aeid, "RUNNING")
        wb.transition_activity(aeid, "FAILED", error=f"planned failure {n}")
    cancelled = wb.start_workflow("ev_cancel")
    wb.cancel_workflow(cancelled)
    return {"ok": ok, "retried": retried, "cancelled": cancelled, "waits": make_waits(wb)}


def make_waits(wb: Whimbrel) -> str:
    """A run whose attempts become waits the way issue 13's READY writes will: an item
    transition through the store carrying ``waiting_for`` (and approvers), and an
    attempt created READY with it."""
    wx = wb.start_workflow("ev_wait")
    now = wb.clock()
    approve = activity_exec_id(wx, "approve", 1)
    wb.store.move_activity(approve, A.REQUESTED, (A.READY,),
                           {"waiting_for": "approval", "approvers": ["ana", "bo"],
                            "timer_epoch": now + 3600}, now=now, actor="test-waits")
    # Bookkeeping on a waiting attempt (as a suspend would write) is no new wait.
    wb.store.set_activity(approve, {"note": "suspended"}, states=[A.READY])
    hold = activity_exec_id(wx, "hold", 1)
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    ddb.put_item(TableName=wb.store.tables.activity_table, Item={
        "workflow_exec_id": {"S": wx}, "activity_exec_id": {"S": hold},
        "activity_name": {"S": "hold"}, "workflow_name": {"S": "ev_wait"},
        "attempt": {"N": "1"}, "workflow_version": {"N": "1"}, "state": {"S": "READY"},
        "created_epoch": {"N": str(int(now))}, "updated_epoch": {"N": str(int(now))},
        "waiting_for": {"S": "timer:cool-down"}})
    return wx


def expected_ids(runs: dict[str, str]) -> set[str]:
    return {f"{runs['ok']}/ended/0", f"{runs['retried']}/ended/0",
            f"{runs['retried']}:x:2/failed", f"{runs['cancelled']}/ended/0",
            f"{runs['waits']}:approve:1/waiting", f"{runs['waits']}:hold:1/waiting"}
