"""DynamoDB Local as the tests get it: tables, and real streams."""

from __future__ import annotations

from typing import Any

import boto3

from whimbrel.testing import wait_until


def _client(service: str, endpoint: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1")


def _create_table(ddb: Any, name: str, **extra: Any) -> dict[str, Any]:
    description: dict[str, Any] = ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )["TableDescription"]
    ddb.get_waiter("table_exists").wait(
        TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30}
    )
    return description


def test_created_table_is_listed(ddb_endpoint: str, table_prefix: str) -> None:
    ddb = _client("dynamodb", ddb_endpoint)
    name = f"{table_prefix}things"

    _create_table(ddb, name)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}})

    assert name in _all_tables(ddb)
    item = ddb.get_item(TableName=name, Key={"pk": {"S": "a"}}, ConsistentRead=True)["Item"]
    assert item == {"pk": {"S": "a"}, "n": {"N": "1"}}


def test_other_region_and_credentials_see_the_same_tables(
    ddb_endpoint: str, table_prefix: str
) -> None:
    name = f"{table_prefix}shared"
    _create_table(_client("dynamodb", ddb_endpoint), name)

    other = boto3.client(
        "dynamodb",
        endpoint_url=ddb_endpoint,
        region_name="eu-west-1",
        aws_access_key_id="SomeoneElse",
        aws_secret_access_key="otherSecret",
    )

    assert name in _all_tables(other)


def test_stream_can_be_described_and_read(ddb_endpoint: str, table_prefix: str) -> None:
    ddb = _client("dynamodb", ddb_endpoint)
    streams = _client("dynamodbstreams", ddb_endpoint)
    name = f"{table_prefix}streamed"

    table = _create_table(
        ddb, name, StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    )
    stream_arn = table["LatestStreamArn"]
    stream = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]

    assert stream["StreamArn"] == stream_arn
    assert stream["TableName"] == name
    assert stream["StreamViewType"] == "NEW_IMAGE"
    assert stream["StreamStatus"] in {"ENABLING", "ENABLED"}
    assert stream["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert stream["Shards"], "a new stream should have at least one shard"

    ddb.put_item(TableName=name, Item={"pk": {"S": "k1"}, "v": {"S": "hello"}})
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn,
        ShardId=stream["Shards"][0]["ShardId"],
        ShardIteratorType="TRIM_HORIZON",
    )["ShardIterator"]

    def next_records() -> list[dict[str, Any]]:
        nonlocal iterator
        page = streams.get_records(ShardIterator=iterator)
        iterator = page["NextShardIterator"]
        records: list[dict[str, Any]] = page["Records"]
        return records

    records = wait_until(next_records, timeout=10.0, message="no stream record for put_item")
    assert [r["eventName"] for r in records] == ["INSERT"]
    assert records[0]["dynamodb"]["NewImage"] == {"pk": {"S": "k1"}, "v": {"S": "hello"}}
    assert "OldImage" not in records[0]["dynamodb"]


def _all_tables(client: Any) -> set[str]:
    """Every table name, across pages (the shared session server holds many)."""
    names: set[str] = set()
    for page in client.get_paginator("list_tables").paginate():
        names.update(page["TableNames"])
    return names
