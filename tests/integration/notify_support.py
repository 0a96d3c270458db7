"""Helpers of the events tests (a plain module: tests/ has no packages)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import boto3
from jsonschema import Draft202012Validator, FormatChecker

from whimbrel import Whimbrel
from whimbrel.contract.notifications import EVENT_SCHEMA, Notification
from whimbrel.local.streams import StreamPump
from whimbrel.observe import PublishError
from whimbrel.store import specs

SCHEMA = Draft202012Validator(EVENT_SCHEMA, format_checker=FormatChecker())


def filtered_records(wb: Whimbrel, consumer: specs.StreamConsumerSpec) -> list[dict[str, Any]]:
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

    def dead_letter(records: list[dict[str, Any]], reason: str) -> None:
        raise AssertionError(f"dead-lettered: {reason}")

    pump = StreamPump(consumer, streams=streams, stream_arn=arn, invoke=invoke,
                      dead_letter=dead_letter, stop=threading.Event())
    while pump.poll_once():
        pass
    return got


def notify_records(wb: Whimbrel) -> list[dict[str, Any]]:
    """The records both notify consumers would get."""
    return [r for consumer in specs.NOTIFY_CONSUMERS for r in filtered_records(wb, consumer)]


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
