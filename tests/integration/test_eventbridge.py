"""Events on EventBridge: the executions on DynamoDB Local, EventBridge and the rule's SQS
target on a moto server (DynamoDB Local has no EventBridge). What a subscriber's queue
receives is the documented envelope, once per fact."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer
from notify_support import expected_ids, make_runs, notify_records, schema_errors

from whimbrel import Whimbrel
from whimbrel.observe import EventBridgePublisher, NotifyOutcome, PublishError

os.environ["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _subscribed_queue(moto_url: str, bus: str) -> tuple[Any, str]:
    """An SQS queue that a rule on ``bus`` feeds with every ``source: whimbrel`` event."""
    sqs = boto3.client("sqs", endpoint_url=moto_url, region_name="us-east-1")
    events = boto3.client("events", endpoint_url=moto_url, region_name="us-east-1")
    url = sqs.create_queue(QueueName=f"whimbrel-{bus}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    events.put_rule(Name=f"all-whimbrel-{bus}", EventBusName=bus,
                    EventPattern=json.dumps({"source": ["whimbrel"]}))
    events.put_targets(Rule=f"all-whimbrel-{bus}", EventBusName=bus,
                       Targets=[{"Id": "queue", "Arn": arn}])
    return sqs, url


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    while True:
        msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not msgs:
            return got
        for msg in msgs:
            got.append(json.loads(msg["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])


@pytest.mark.parametrize("bus", ["default", "orders"])
def test_a_rule_on_the_bus_receives_each_event_once(wb: Whimbrel, moto_url: str,
                                                     bus: str) -> None:
    events = boto3.client("events", endpoint_url=moto_url, region_name="us-east-1")
    if bus != "default":
        events.create_event_bus(Name=bus)
    sqs, url = _subscribed_queue(moto_url, bus)
    runs = make_runs(wb)
    records = notify_records(wb)
    notifier = wb.notifier(EventBridgePublisher(events, bus=bus))
    for record in records + records:  # every record delivered twice
        notifier.process(record)

    received = _drain(sqs, url)
    assert sorted(e["detail"]["event_id"] for e in received) == sorted(expected_ids(runs))
    for envelope in received:
        # moto's default target template leaves out "account" (EventBridge sends it);
        # everything else is checked as delivered.
        assert schema_errors({"account": "123456789012", **envelope}) == []
        assert envelope["source"] == "whimbrel"
        assert envelope["detail-type"] in ("Workflow Ended", "Activity Failed", "Wait Started")
    ended = {e["detail"]["workflow_exec_id"]: e for e in received
             if e["detail-type"] == "Workflow Ended"}
    assert ended[runs["cancelled"]]["detail"]["state"] == "CANCELLED"


def test_a_bus_that_refuses_leaves_the_event_to_the_retry(wb: Whimbrel, moto_url: str) -> None:
    events = boto3.client("events", endpoint_url=moto_url, region_name="us-east-1")
    runs = make_runs(wb)
    records = notify_records(wb)
    [cancelled] = [r for r in records if runs["cancelled"] in json.dumps(r)]
    with pytest.raises(PublishError, match="no-such-bus"):
        wb.notifier(EventBridgePublisher(events, bus="no-such-bus")).process(cancelled)
    event_id = f"{runs['cancelled']}/ended/0"
    assert wb.store.markers.get_notification(event_id)["status"] == "PENDING"  # type: ignore[index]
    # Once the bus exists (the operator fixed it), the retried record goes out.
    events.create_event_bus(Name="no-such-bus")
    sqs, url = _subscribed_queue(moto_url, "no-such-bus")
    result = wb.notifier(EventBridgePublisher(events, bus="no-such-bus")).process(cancelled)
    assert result.outcome is NotifyOutcome.PUBLISHED and result.resumed == (event_id,)
    assert [e["detail"]["event_id"] for e in _drain(sqs, url)] == [event_id]
