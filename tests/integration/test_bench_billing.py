"""The benchmarks' billing proxy: AWS's size rules, and a proxy the caller cannot see."""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from whimbrel import Whimbrel

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ is not installed
from benchmarks.billing import Meter, item_size, read_units, summarize, write_units
from benchmarks.throttle import Throttle


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


def test_units_go_to_the_partition_key_of_the_table_and_of_each_index(
        ddb_endpoint: str, table_prefix: str) -> None:
    meter = Meter(ddb_endpoint, table_prefix)
    try:
        with Whimbrel(meter.url, table_prefix) as wb:
            wb.create_tables()
        client = boto3.client("dynamodb", endpoint_url=meter.url)
        table = f"{table_prefix}workflow_exec"
        meter.drain()
        # by_day and by_name_state get an entry; reconcile is sparse (no check_shard).
        client.put_item(TableName=table, Item={
            "workflow_exec_id": {"S": "w1"}, "created_day": {"S": "2026-11-25"},
            "created_epoch": {"N": "1"}, "name_state": {"S": "orders#RUNNING"}})
        # A new state moves the by_name_state entry: the old key and the new one get a
        # unit each; by_day's entry is unchanged (keys-only: nothing to bill).
        client.update_item(TableName=table, Key={"workflow_exec_id": {"S": "w1"}},
                           UpdateExpression="SET #n = :v",
                           ExpressionAttributeNames={"#n": "name_state"},
                           ExpressionAttributeValues={":v": {"S": "orders#COMPLETED"}})
        client.query(TableName=table, IndexName="by_day",
                     KeyConditionExpression="created_day = :d",
                     ExpressionAttributeValues={":d": {"S": "2026-11-25"}})
        reqs = meter.drain()
        writes: dict[tuple[str, str], float] = {}
        reads: dict[tuple[str, str], float] = {}
        for r in reqs:
            r.charge(writes, r.wkeys)
            r.charge(reads, r.rkeys)
        assert writes == {("workflow_exec", "w1"): 2.0,
                          ("workflow_exec.by_day", "2026-11-25"): 1.0,
                          ("workflow_exec.by_name_state", "orders#RUNNING"): 2.0,
                          ("workflow_exec.by_name_state", "orders#COMPLETED"): 1.0}
        assert reads == {("workflow_exec.by_day", "2026-11-25"): 0.5}
        # A batch of puts: each to its own item's key.
        client.batch_write_item(RequestItems={f"{table_prefix}activity_exec_dependency": [
            {"PutRequest": {"Item": {"dependency_key": {"S": f"w1/d{i}"},
                                     "upstream": {"S": "u"}}}} for i in range(2)]})
        (batch,) = meter.drain()
        assert batch.wkeys == {("activity_exec_dependency", "w1/d0"): 1.0,
                               ("activity_exec_dependency", "w1/d1"): 1.0}
        # The per-key units add up to the per-table ones.
        s = summarize(reqs)
        assert sum(writes.values()) == s["wru_total"]
    finally:
        meter.close()


def test_throttling_mode_answers_as_dynamodb_and_writes_nothing(
        ddb_endpoint: str, table_prefix: str) -> None:
    # scale 1,000: 1 WCU/s per key, 40 WCU/s per table; a bucket holds one second. The
    # clock stands still: no bucket refills during the test.
    throttle = Throttle(scale=1000, clock=lambda: 1000.0)
    meter = Meter(ddb_endpoint, table_prefix, throttle)
    try:
        with Whimbrel(meter.url, table_prefix) as wb:
            wb.create_tables()
        client = boto3.client("dynamodb", endpoint_url=meter.url,
                              config=Config(retries={"total_max_attempts": 1}))
        table = f"{table_prefix}workflow_exec"

        def put(wx: str) -> None:
            client.put_item(TableName=table, Item={
                "workflow_exec_id": {"S": wx}, "created_day": {"S": "d"},
                "created_epoch": {"N": "1"}})

        put("a")  # takes the by_day key "d" below zero
        # Another item, another base key, but its index entry lands on the exhausted
        # key: the base write is refused (GSI back-pressure).
        with pytest.raises(ClientError) as err:
            put("b")
        assert err.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert "Item" not in client.get_item(TableName=table,
                                             Key={"workflow_exec_id": {"S": "b"}})
        assert throttle.throttled == {
            "ProvisionedThroughputExceededException workflow_exec.by_day": 1}
        throttle.throttled.clear()
        # An update that would move another item's entry onto the exhausted key is
        # refused before it is sent: the item keeps its old entry.
        client.put_item(TableName=table, Item={"workflow_exec_id": {"S": "c"}})
        with pytest.raises(ClientError) as moved:
            client.update_item(TableName=table, Key={"workflow_exec_id": {"S": "c"}},
                               UpdateExpression="SET created_day = :d, created_epoch = :e",
                               ExpressionAttributeValues={":d": {"S": "d"}, ":e": {"N": "2"}})
        assert moved.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
        assert "created_day" not in client.get_item(
            TableName=table, Key={"workflow_exec_id": {"S": "c"}})["Item"]
        # The table quota: 40 writes to distinct keys with no index entry exhaust it.
        codes = set()
        for i in range(60):
            try:
                client.put_item(TableName=table, Item={"workflow_exec_id": {"S": f"x{i}"}})
            except ClientError as exc:
                codes.add(exc.response["Error"]["Code"])
        assert codes == {"ThrottlingException"}
    finally:
        meter.close()
