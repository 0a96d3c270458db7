"""The benchmarks' billing proxy: AWS's size rules, and a proxy the caller cannot see."""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from whimbrel import Whimbrel

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ is not installed
from benchmarks.billing import Meter, item_size, read_units, summarize, write_units


def test_item_size_follows_the_aws_rules() -> None:
    # name bytes + value bytes; a number is 1 byte per two significant digits + 1;
    # a list or map costs 3 bytes plus 1 per element.
    assert item_size({"pk": {"S": "héllo"}}) == 2 + 6
    assert item_size({"n": {"N": "123.45"}}) == 1 + 4
    assert item_size({"l": {"L": [{"S": "x"}, {"N": "1"}]}}) == 1 + 3 + (1 + 1) + (2 + 1)
    assert item_size({"m": {"M": {"k": {"BOOL": True}}}}) == 1 + 3 + (1 + 1 + 1)
    assert (write_units(1024), write_units(1025), write_units(0)) == (1, 2, 1)
    assert (read_units(4096, True), read_units(4097, True), read_units(0, False)) == (1, 2, 0.5)


def test_proxy_bills_what_aws_would_and_hides_what_it_asked_for(
        ddb_endpoint: str, table_prefix: str) -> None:
    meter = Meter(ddb_endpoint, table_prefix)
    try:
        with Whimbrel(meter.url, table_prefix) as wb:
            wb.create_tables()
        client = boto3.client("dynamodb", endpoint_url=meter.url)
        table = f"{table_prefix}workflow_request"
        item = {"workflow_request_id": {"S": "r1"}, "workflow_name": {"S": "w"}}
        meter.drain()
        put = client.put_item(TableName=table, Item=item)
        with pytest.raises(ClientError) as lost:
            client.put_item(TableName=table, Item=item,
                            ConditionExpression="attribute_not_exists(workflow_request_id)")
        got = client.get_item(TableName=table, Key={"workflow_request_id": {"S": "r1"}},
                              ConsistentRead=True)
        # The caller sees exactly what DynamoDB would have told it.
        assert "Attributes" not in put and "ConsumedCapacity" not in put
        assert lost.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
        assert "Item" not in lost.value.response
        assert got["Item"] == item and "ConsumedCapacity" not in got
        s = summarize(meter.drain())
        # The lost write is billed (AWS bills it; DynamoDB Local reports nothing).
        assert s["labels"]["PutItem workflow_request (condition failed)"][
            "wru"] == 1.0
        assert (s["wru_total"], s["reported_wru_total"]) == (2.0, 1.0)
        assert (s["rru_total"], s["reported_rru_total"]) == (1.0, 1.0)
        assert s["failed_writes"] == 1 and s["max_item_writes"] == 1
    finally:
        meter.close()
