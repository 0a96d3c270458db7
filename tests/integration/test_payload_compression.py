"""Issue 27, compression: a payload kept in S3 is gzip-compressed when that saves enough
(``.json.gz``, ``Content-Encoding: gzip``), read back whole on every path, and objects
written plain (before compression, or by a writer with it off) are read as before
(DynamoDB Local, moto's S3 server)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import boto3
import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.errors import PayloadMissing
from whimbrel.contract.ids import activity_exec_id
from whimbrel.worker.run import upstream_outputs


def _listing(n: int) -> list[dict[str, object]]:
    return [{"Key": f"raw/2026/11/events-{i:07d}.parquet", "Size": i * 7919,
             "ETag": f'"{i * 2654435761 % 2**32:08x}"', "StorageClass": "STANDARD"}
            for i in range(n)]


def _client(ddb_endpoint: str, table_prefix: str, bucket: str) -> Whimbrel:
    return Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                    payload_bucket=bucket)


@pytest.fixture
def wb(ddb_endpoint: str, table_prefix: str, payload_bucket: str) -> Iterator[Whimbrel]:
    client = _client(ddb_endpoint, table_prefix, payload_bucket)
    client.create_tables()
    client.register_workflow(WorkflowDefinition("hand", (
        Act("a", launcher=LauncherSpec.external()),
        Act("b", launcher=LauncherSpec.external(), depends_on=("a",)))))
    yield client
    client.close()
    client.store.delete_tables()


def _objects(bucket: str) -> dict[str, bytes]:
    s3 = boto3.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", ())]
    return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def _complete(wb: Whimbrel, wx: str, output: object) -> str:
    aeid = activity_exec_id(wx, "a", 1)
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, "COMPLETED", output=output)
    return aeid


def test_json_is_kept_gzipped_and_every_reader_gets_it_whole(
        wb: Whimbrel, payload_bucket: str, ddb_endpoint: str, table_prefix: str) -> None:
    listing = _listing(5_000)  # ~450 KB of JSON
    wx = wb.start_workflow("hand", {"listing": listing})
    aeid = _complete(wb, wx, listing)
    objects = _objects(payload_bucket)
    assert len(objects) == 2 and all(k.endswith(".json.gz") for k in objects)
    for key, body in objects.items():
        raw = gzip.decompress(body)
        assert len(body) < len(raw) / 3  # what realistic JSON gives (probe_compression)
        head = boto3.client("s3").head_object(Bucket=payload_bucket, Key=key)
        assert head["ContentEncoding"] == "gzip"  # an HTTP download gets the JSON
    # The meter counts the bytes sent (the input is put twice: its request row's write
    # and the run's, one key), not the JSON's.
    raw_total = sum(len(gzip.decompress(b)) for b in objects.values())
    assert wb.store.meter.s3_bytes["PutObject"] < raw_total / 2
    # A fresh process reads through S3: a view, an attempt's input and upstreams.
    fresh = _client(ddb_endpoint, table_prefix, payload_bucket)
    try:
        view = fresh.get_workflow(wx)
        assert view.input == {"listing": listing}
        assert fresh.get_activity(aeid).output == listing
        b = fresh.get_activity(activity_exec_id(wx, "b", 1))
        assert upstream_outputs(fresh.engine, b) == {"a": listing}
    finally:
        fresh.close()


def test_objects_written_plain_are_read_as_before(
        wb: Whimbrel, payload_bucket: str, ddb_endpoint: str, table_prefix: str) -> None:
    # A writer from before compression (or with it off) keeps plain JSON objects.
    wb.store.blobs.compress = False
    listing = _listing(3_000)
    wx = wb.start_workflow("hand", {"listing": listing})
    aeid = _complete(wb, wx, listing)
    objects = _objects(payload_bucket)
    assert len(objects) == 2 and all(k.endswith(".json") for k in objects)
    assert all(json.loads(body) for body in objects.values())
    fresh = _client(ddb_endpoint, table_prefix, payload_bucket)  # compresses: reads both
    try:
        assert fresh.get_activity(aeid).output == listing
        assert fresh.get_workflow(wx).input == {"listing": listing}
    finally:
        fresh.close()


def test_a_corrupt_object_is_an_error_naming_its_key(
        wb: Whimbrel, payload_bucket: str, ddb_endpoint: str, table_prefix: str) -> None:
    wx = wb.start_workflow("hand")
    aeid = _complete(wb, wx, _listing(3_000))
    [key] = _objects(payload_bucket)
    boto3.client("s3").put_object(Bucket=payload_bucket, Key=key, Body=b"\x1f\x8b\x08\x00bad")
    fresh = _client(ddb_endpoint, table_prefix, payload_bucket)
    try:
        with pytest.raises(PayloadMissing, match=f"{key}.*corrupt gzip data"):
            fresh.get_activity(aeid)
    finally:
        fresh.close()
