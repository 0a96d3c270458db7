"""Issue 27, "objects expire with their run": when TTL removes a run's item, the
``payload_expiry`` consumer deletes the run's objects (DynamoDB Local's real stream,
moto's S3 server, the real Lambda handler). A redelivered record deletes nothing twice
and fails nothing; a removal that is not TTL's leaves the objects; a run that holds
another run's payload (a fork's kept output) has its own copy and outlives the other."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import payload_activities
import pytest

from lambdas.payload_expiry import handler
from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.local.filters import matches_any
from whimbrel.local.runtime import LambdaContext, LocalRuntime
from whimbrel.local.streams import StreamPump
from whimbrel.store.blob_expiry import TTL_IDENTITY
from whimbrel.store.consumers import PAYLOAD_EXPIRY_CONSUMER, StreamConsumerSpec
from whimbrel.testing import StepClock

MB = 1_000_000


@pytest.fixture
def clock() -> StepClock:
    return StepClock(1_800_000_000.0)


@pytest.fixture
def big(ddb_endpoint: str, table_prefix: str, payload_bucket: str,
        clock: StepClock) -> Iterator[Whimbrel]:
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                  payload_bucket=payload_bucket, clock=clock, retention_days=1)
    wb.create_tables()
    wb.register_workflow(WorkflowDefinition("big_pipeline", (
        Act("make", launcher=LauncherSpec.python("payload_activities:sized")),
        Act("look", launcher=LauncherSpec.python("payload_activities:measure"),
            depends_on=("make",)),
    )))
    yield wb
    wb.close()
    wb.store.delete_tables()


def _keys(bucket: str, wx: str) -> list[str]:
    s3 = boto3.client("s3")
    got = s3.list_objects_v2(Bucket=bucket, Prefix=f"whimbrel/runs/{wx}/")
    return sorted(o["Key"] for o in got.get("Contents", ()))


def _run(wb: Whimbrel) -> str:
    wx = wb.start_workflow("big_pipeline", {"size": MB, "pad": "p" * MB})
    wf = wb.wait(wx, timeout=60)
    assert wf.state is WorkflowState.COMPLETED, wf.error
    return wx


def _remove_as_ttl_would(wb: Whimbrel, wx: str, clock: StepClock) -> None:
    """Past the run's expiry, delete its item as TTL's background process does (DynamoDB
    Local runs no TTL process)."""
    table = wb.store.table_name("workflow_exec")
    item = wb.store.botocore.get_item(TableName=table, ConsistentRead=True,
                                      Key={"workflow_exec_id": {"S": wx}})["Item"]
    expires = float(item["expires_epoch"]["N"])
    clock.advance(expires - clock() + 1)
    wb.store.botocore.delete_item(
        TableName=table, Key={"workflow_exec_id": {"S": wx}},
        # What TTL checks: the item's time is up.
        ConditionExpression="expires_epoch < :now",
        ExpressionAttributeValues={":now": {"N": str(int(clock()))}})


def _removals(wb: Whimbrel) -> list[dict[str, Any]]:
    """Every REMOVE record of the run table's stream, in Lambda's shape (the local
    runtime's own pump, no filter)."""
    everything = StreamConsumerSpec(name="all", table=PAYLOAD_EXPIRY_CONSUMER.table,
                                    handler=PAYLOAD_EXPIRY_CONSUMER.handler)
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    streams = boto3.client("dynamodbstreams", endpoint_url=wb.endpoint_url,
                           region_name="us-east-1")
    arn = ddb.describe_table(TableName=everything.table.table_name(wb.table_prefix)
                             )["Table"]["LatestStreamArn"]
    got: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        got.extend(r for r in event["Records"] if r["eventName"] == "REMOVE")
        return {"batchItemFailures": []}

    def dead_letter(records: list[dict[str, Any]], reason: str, error_type: str) -> None:
        raise AssertionError(reason)

    pump = StreamPump(everything, streams=streams, stream_arn=arn, invoke=invoke,
                      dead_letter=dead_letter, stop=threading.Event())
    while pump.poll_once():
        pass
    return got


def _as_ttl(record: dict[str, Any]) -> dict[str, Any]:
    """The record as TTL's deletion carries it (DynamoDB Streams: the service's identity)."""
    tagged = copy.deepcopy(record)
    tagged["userIdentity"] = dict(TTL_IDENTITY)
    return tagged


def _invoke(wb: Whimbrel, records: list[dict[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = handler({"Records": records},
                                     LambdaContext("whimbrel-payload_expiry", wb))
    return result


def test_a_runs_objects_go_when_ttl_removes_its_item_and_redelivery_is_harmless(
        big: Whimbrel, payload_bucket: str, clock: StepClock) -> None:
    wx, other = _run(big), _run(big)
    assert len(_keys(payload_bucket, wx)) >= 2  # the 2 MB input, the 1 MB output
    kept = _keys(payload_bucket, other)
    # A listing reads its runs' inputs whole too (a reference is never shown as JSON).
    listed = {w.workflow_exec_id: w for w in big.list_workflows(name="big_pipeline").items}
    assert listed[wx].input == {"size": MB, "pad": "p" * MB}
    _remove_as_ttl_would(big, wx, clock)
    [removal] = _removals(big)
    assert removal["dynamodb"]["Keys"] == {"workflow_exec_id": {"S": wx}}
    # DynamoDB Local's record has no userIdentity: the consumer's filter lets it pass
    # only as TTL's deletion carries it.
    filters = PAYLOAD_EXPIRY_CONSUMER.filter_patterns
    assert not matches_any(filters, removal)
    ttl = _as_ttl(removal)
    assert matches_any(filters, ttl)
    # Delivered twice in one batch, then the batch again: nothing fails.
    assert _invoke(big, [ttl, copy.deepcopy(ttl)]) == {"batchItemFailures": []}
    assert _invoke(big, [ttl]) == {"batchItemFailures": []}
    assert _keys(payload_bucket, wx) == []
    assert _keys(payload_bucket, other) == kept  # another run's objects stay
    assert big.store.meter.s3_requests.get("DeleteObjects", 0) >= 1


def test_a_removal_that_is_not_ttls_leaves_the_objects(
        big: Whimbrel, payload_bucket: str) -> None:
    wx = _run(big)
    before = _keys(payload_bucket, wx)
    big.store.botocore.delete_item(TableName=big.store.table_name("workflow_exec"),
                                   Key={"workflow_exec_id": {"S": wx}})
    [removal] = _removals(big)
    # A person's DeleteItem (a restore may bring the item back): even if it reached the
    # handler, which it does not (the filter), nothing is deleted.
    assert _invoke(big, [removal]) == {"batchItemFailures": []}
    assert _keys(payload_bucket, wx) == before
    forged = _as_ttl(removal)
    forged["dynamodb"]["Keys"] = {"workflow_exec_id": {"S": "../x"}}  # not a run id
    assert _invoke(big, [forged]) == {"batchItemFailures": []}
    assert _keys(payload_bucket, wx) == before


def test_a_fork_keeps_its_own_copy_of_what_it_reuses(
        big: Whimbrel, payload_bucket: str, clock: StepClock) -> None:
    src = _run(big)
    fork = big.fork_workflow(src, from_activity="look")
    wf = big.wait(fork, timeout=60)
    assert wf.state is WorkflowState.COMPLETED, wf.error
    # Its kept "make" output (1 MB) and its input are objects under its own prefix.
    assert len(_keys(payload_bucket, fork)) >= 2
    _remove_as_ttl_would(big, src, clock)
    [removal] = _removals(big)
    assert _invoke(big, [_as_ttl(removal)]) == {"batchItemFailures": []}
    assert _keys(payload_bucket, src) == []
    # A fresh process (no cache) reads the fork whole: nothing of it was under src.
    fresh = Whimbrel(endpoint_url=big.endpoint_url, table_prefix=big.table_prefix,
                     payload_bucket=payload_bucket)
    try:
        view = fresh.get_workflow(fork)
        assert len(json.dumps(view.activity("make").output)) == MB + 2
        assert view.activity("look").output["upstream"] == {"make": MB + 2}
    finally:
        fresh.close()


def test_whimbrel_dev_pumps_the_expiry_consumer_with_a_bucket() -> None:
    assert PAYLOAD_EXPIRY_CONSUMER in LocalRuntime("http://x", payload_bucket="b").consumers
    assert PAYLOAD_EXPIRY_CONSUMER not in LocalRuntime("http://x").consumers


def test_a_parent_keeps_its_own_copy_of_a_code_childs_output(
        big: Whimbrel, payload_bucket: str, clock: StepClock) -> None:
    big.register_workflow(payload_activities.big_code_child)
    big.register_workflow(WorkflowDefinition("parent", (
        # 50 KB: over the 16 KB threshold (a code run's return value is still capped at
        # 64,000 bytes, bucket or not: contract/code/context.py).
        Act("sub", launcher=LauncherSpec.workflow("big_code_child"),
            input={"size": 50_000}),)))
    wx = big.start_workflow("parent")
    wf = big.wait(wx, timeout=60)
    assert wf.state is WorkflowState.COMPLETED, wf.error
    [child] = _children(big, wx)
    # The child's output is its object; the parent's attempt holds a copy under its own
    # prefix, so the child expiring first takes nothing the parent reads.
    raw = big.store.botocore.get_item(
        TableName=big.store.table_name("activity_exec"), ConsistentRead=True,
        Key={"workflow_exec_id": {"S": wx}, "activity_exec_id": {"S": f"{wx}:sub:1"}},
    )["Item"]["output"]["S"]
    assert raw.startswith(f"s3://{payload_bucket}/whimbrel/runs/{wx}/"), raw
    _remove_as_ttl_would(big, child, clock)
    [removal] = _removals(big)
    assert _invoke(big, [_as_ttl(removal)]) == {"batchItemFailures": []}
    assert _keys(payload_bucket, child) == []
    fresh = Whimbrel(endpoint_url=big.endpoint_url, table_prefix=big.table_prefix,
                     payload_bucket=payload_bucket)
    try:
        assert fresh.get_workflow(wx).activity("sub").output == "z" * 50_000
    finally:
        fresh.close()


def _children(wb: Whimbrel, parent: str) -> list[str]:
    return [w.workflow_exec_id for w in wb.list_workflows(name="big_code_child").items]
