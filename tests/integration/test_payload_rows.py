"""Issue 27, raw rows: a ``workflow_request`` row may carry ``input_ref`` and an
``activity_event`` row ``output_ref`` (``s3://bucket/key``) instead of an inline value,
as docs/simple-api.md shows with the AWS CLI. The rows are written with a raw PutItem on
DynamoDB Local and fed, as Lambda-shaped stream records, to the real intake; the object
is read when the row is processed, so a bad reference rejects the row by name."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.engine.intake import Outcome
from whimbrel.local.s3 import LocalS3
from whimbrel.store import specs


@pytest.fixture
def wb(ddb_endpoint: str, table_prefix: str, payload_bucket: str) -> Iterator[Whimbrel]:
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                      payload_bucket=payload_bucket)
    client.create_tables()
    client.register_workflow(WorkflowDefinition(
        "refs", (ActivityDefinition("A", launcher=LauncherSpec.external()),)))
    yield client
    client.close()
    client.store.delete_tables()


@pytest.fixture
def their_bucket(local_s3: LocalS3, payload_bucket: str) -> str:
    """A bucket of the client's own (not Whimbrel's payload bucket)."""
    return local_s3.create_bucket(payload_bucket.replace("-payloads", "-theirs"))


def put_raw(wb: Whimbrel, logical: str, item: dict[str, Any]) -> dict[str, Any]:
    """A raw client's PutItem, and the stream record Lambda would get for it."""
    spec = specs.table_spec(logical)
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    ddb.put_item(TableName=spec.table_name(wb.table_prefix), Item=item)
    key = spec.hash_key.name
    return {"eventID": f"ev-{item[key]['S']}", "eventName": "INSERT", "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
            "dynamodb": {"ApproximateCreationDateTime": float(int(time.time())),
                         "Keys": {key: item[key]}, "NewImage": item,
                         "SequenceNumber": "1000", "SizeBytes": 100,
                         "StreamViewType": "NEW_AND_OLD_IMAGES"}}


def upload(bucket: str, key: str, value: Any) -> str:
    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=json.dumps(value).encode())
    return f"s3://{bucket}/{key}"


def test_input_ref_and_output_ref_rows_run_with_the_whole_values(
        wb: Whimbrel, their_bucket: str) -> None:
    value_in = {"rows": ["r" * 1000] * 300}  # ~300 KB: over the 128 KB an inline row has
    value_out = {"result": "o" * 500_000}
    request = put_raw(wb, "workflow_request", {
        "workflow_request_id": {"S": "ref-1"}, "workflow_name": {"S": "refs"},
        "input_ref": {"S": upload(their_bucket, "in/ref-1.json", value_in)}})
    assert wb.intake.workflow_request(request).outcome is Outcome.STARTED
    wx = workflow_exec_id_for("ref-1")
    assert wb.get_workflow(wx).input == value_in
    aeid = activity_exec_id(wx, "A", 1)
    running = put_raw(wb, "activity_event", {
        "activity_event_id": {"S": "ref-ev-1"}, "activity_exec_id": {"S": aeid},
        "transition": {"S": "RUNNING"}})
    assert wb.intake.activity_event(running).outcome is Outcome.APPLIED
    done = put_raw(wb, "activity_event", {
        "activity_event_id": {"S": "ref-ev-2"}, "activity_exec_id": {"S": aeid},
        "transition": {"S": "COMPLETED"},
        "output_ref": {"S": upload(their_bucket, "out/ref-ev-2.json", value_out)}})
    assert wb.intake.activity_event(done).outcome is Outcome.APPLIED
    wf = wb.get_workflow(wx)
    assert wf.state is W.COMPLETED
    assert wf.output == {"A": value_out}
    # The run keeps its own copies (in Whimbrel's bucket): deleting the client's objects
    # later changes nothing for it.
    s3 = boto3.client("s3")
    for key in ("in/ref-1.json", "out/ref-ev-2.json"):
        s3.delete_object(Bucket=their_bucket, Key=key)
    other = Whimbrel(endpoint_url=wb.endpoint_url, table_prefix=wb.table_prefix,
                     payload_bucket=wb.store.blobs.bucket)
    try:
        assert other.get_workflow(wx).output == {"A": value_out}
    finally:
        other.close()


def test_a_missing_object_rejects_the_row_naming_its_key(
        wb: Whimbrel, their_bucket: str) -> None:
    request = put_raw(wb, "workflow_request", {
        "workflow_request_id": {"S": "ref-gone"}, "workflow_name": {"S": "refs"},
        "input_ref": {"S": f"s3://{their_bucket}/nowhere.json"}})
    result = wb.intake.workflow_request(request)
    assert result.outcome is Outcome.REJECTED
    assert f"s3://{their_bucket}/nowhere.json" in (result.reason or ""), result


def test_a_row_with_both_a_value_and_a_ref_is_rejected(wb: Whimbrel, their_bucket: str) -> None:
    request = put_raw(wb, "workflow_request", {
        "workflow_request_id": {"S": "ref-both"}, "workflow_name": {"S": "refs"},
        "input": {"S": "{}"}, "input_ref": {"S": upload(their_bucket, "x.json", {})}})
    result = wb.intake.workflow_request(request)
    assert result.outcome is Outcome.REJECTED
    assert "input or input_ref, not both" in (result.reason or ""), result


def test_an_object_that_is_not_json_rejects_the_row(wb: Whimbrel, their_bucket: str) -> None:
    boto3.client("s3").put_object(Bucket=their_bucket, Key="bad.txt", Body=b"not json")
    request = put_raw(wb, "workflow_request", {
        "workflow_request_id": {"S": "ref-bad"}, "workflow_name": {"S": "refs"},
        "input_ref": {"S": f"s3://{their_bucket}/bad.txt"}})
    result = wb.intake.workflow_request(request)
    assert result.outcome is Outcome.REJECTED
    assert "input_ref" in (result.reason or "") and "not JSON" in (result.reason or "")


def stream_record(wb: Whimbrel, logical: str, key: dict[str, Any]) -> dict[str, Any]:
    """The INSERT record Lambda would get for a row a Whimbrel client wrote."""
    spec = specs.table_spec(logical)
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    item = ddb.get_item(TableName=spec.table_name(wb.table_prefix), Key=key,
                        ConsistentRead=True)["Item"]
    return {"eventID": "ev", "eventName": "INSERT", "eventSource": "aws:dynamodb",
            "dynamodb": {"ApproximateCreationDateTime": float(int(time.time())),
                         "Keys": key, "NewImage": item, "SequenceNumber": "1",
                         "StreamViewType": "NEW_AND_OLD_IMAGES"}}


def test_a_clients_simple_api_rows_keep_large_values_in_s3(wb: Whimbrel) -> None:
    """``request_workflow`` and ``send_activity_event`` write one row each; a large
    value is kept in the bucket (the row holds its reference), and the intake reads it."""
    value_in = {"rows": ["i" * 1000] * 200}
    rid = wb.request_workflow("refs", value_in)
    record = stream_record(wb, "workflow_request", {"workflow_request_id": {"S": rid}})
    assert record["dynamodb"]["NewImage"]["input"]["S"].startswith("s3://")
    assert wb.intake.workflow_request(record).outcome is Outcome.STARTED
    wx = workflow_exec_id_for(rid)
    aeid = activity_exec_id(wx, "A", 1)
    wb.transition_activity(aeid, "RUNNING")
    event_id = wb.send_activity_event(aeid, "COMPLETED", output={"big": "e" * 100_000})
    done = stream_record(wb, "activity_event", {"activity_event_id": {"S": event_id}})
    assert done["dynamodb"]["NewImage"]["output"]["S"].startswith("s3://")
    assert wb.intake.activity_event(done).outcome is Outcome.APPLIED
    wf = wb.get_workflow(wx)
    assert (wf.state, wf.input, wf.output) == (W.COMPLETED, value_in,
                                               {"A": {"big": "e" * 100_000}})
    assert wb.get_request(rid).input == value_in  # type: ignore[union-attr]
