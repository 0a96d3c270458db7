"""Issue 27: payloads of any size through an S3 bucket (moto's server on 127.0.0.1 for
S3, DynamoDB Local for the tables). A value over the threshold is kept in S3 under a
run-scoped, content-addressed key, written before the item that references it; readers
get the whole value back, once per process; without a bucket, today's limits with an
error that says how to lift them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from notify_support import notify_records

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.contract.errors import InvalidInput, PayloadMissing
from whimbrel.contract.ids import activity_exec_id
from whimbrel.observe import MemoryPublisher
from whimbrel.testing import Crash, FaultInjector

MB = 1_000_000
A = ActivityState


def _client(ddb_endpoint: str, table_prefix: str, bucket: str | None,
            **kwargs: Any) -> Whimbrel:
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                  payload_bucket=bucket, **kwargs)
    wb.create_tables()
    return wb


@pytest.fixture
def big(ddb_endpoint: str, table_prefix: str, payload_bucket: str) -> Iterator[Whimbrel]:
    wb = _client(ddb_endpoint, table_prefix, payload_bucket)
    yield wb
    wb.close()
    wb.store.delete_tables()


@pytest.fixture
def small(ddb_endpoint: str, table_prefix: str) -> Iterator[Whimbrel]:
    wb = _client(ddb_endpoint, table_prefix, None)
    yield wb
    wb.close()
    wb.store.delete_tables()


def _keys(bucket: str) -> list[str]:
    s3 = boto3.client("s3")
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", ()))


def _raw(wb: Whimbrel, logical: str, key: dict[str, str]) -> dict[str, Any]:
    item = wb.store.botocore.get_item(TableName=wb.store.table_name(logical),
                                      Key={k: {"S": v} for k, v in key.items()},
                                      ConsistentRead=True)["Item"]
    return dict(item)


def _pipeline(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("big_pipeline", (
        Act("make", launcher=LauncherSpec.python("payload_activities:sized")),
        Act("look", launcher=LauncherSpec.python("payload_activities:measure"),
            depends_on=("make",)),
    )))


def test_large_input_and_output_are_kept_in_s3_and_read_back_whole(
        big: Whimbrel, payload_bucket: str, ddb_endpoint: str, table_prefix: str) -> None:
    _pipeline(big)
    pad = "p" * (2 * MB)
    wx = big.start_workflow("big_pipeline", {"size": MB, "pad": pad})
    wf = big.wait(wx, timeout=60)
    assert wf.state is WorkflowState.COMPLETED, wf.error
    # Readers got the whole values: the input (2 MB) and the upstream output (1 MB).
    seen = wf.activity("look").output
    assert seen["input"] == len(json.dumps({"size": MB, "pad": pad}))
    assert seen["upstream"] == {"make": MB + 2}
    assert wf.input == {"size": MB, "pad": pad}
    assert wf.activity("make").output == "y" * MB
    # The items hold references to run-scoped, content-addressed keys.
    make = _raw(big, "activity_exec", {"workflow_exec_id": wx,
                                       "activity_exec_id": activity_exec_id(wx, "make", 1)})
    ref = make["output"]["S"]
    assert ref.startswith(f"s3://{payload_bucket}/whimbrel/runs/{wx}/")
    data = _raw(big, "workflow_exec_data", {"workflow_exec_id": wx, "part": "input"})
    assert data["input"]["S"].startswith(f"s3://{payload_bucket}/whimbrel/runs/{wx}/")
    keys = _keys(payload_bucket)
    assert keys and all(k.startswith(f"whimbrel/runs/{wx}/") for k in keys), keys
    # The request row and the run share the input's one object (same content, same run).
    assert len(keys) == 2, keys
    # This process wrote every object: it never read one back.
    assert big.meter.s3_requests["GetObject"] == 0, big.meter.snapshot()
    # Another process reads each object once, however often it asks.
    other = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                     payload_bucket=payload_bucket)
    try:
        for _ in range(2):
            again = other.get_workflow(wx)
            assert again.input == {"size": MB, "pad": pad}
            assert again.activity("make").output == "y" * MB
            assert other.get_activity(activity_exec_id(wx, "make", 1)).output == "y" * MB
        assert other.meter.s3_requests["GetObject"] == 2, other.meter.snapshot()
    finally:
        other.close()


def test_small_payloads_stay_in_the_item(big: Whimbrel, payload_bucket: str) -> None:
    _pipeline(big)
    wx = big.start_workflow("big_pipeline", {"size": 1000})
    assert big.wait(wx, timeout=60).state is WorkflowState.COMPLETED
    assert _keys(payload_bucket) == []
    assert big.meter.s3_requests == {}


def test_fifty_megabytes_through_a_run(big: Whimbrel, payload_bucket: str) -> None:
    wb = big
    wb.register_workflow(WorkflowDefinition("fifty", (
        Act("a", launcher=LauncherSpec.external()),)))
    wx = wb.start_workflow("fifty", {"pad": "i" * (50 * MB)})
    aeid = activity_exec_id(wx, "a", 1)
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, "COMPLETED", output="o" * (50 * MB))
    wf = wb.wait(wx, timeout=120)
    assert wf.state is WorkflowState.COMPLETED
    assert wf.output == {"a": "o" * (50 * MB)}
    assert len(wf.input["pad"]) == 50 * MB


def test_a_payload_over_the_maximum_is_refused_by_name(
        ddb_endpoint: str, table_prefix: str, payload_bucket: str) -> None:
    wb = _client(ddb_endpoint, table_prefix, payload_bucket, payload_max_bytes=200_000)
    try:
        wb.register_workflow(WorkflowDefinition("capped", (
            Act("a", launcher=LauncherSpec.external()),)))
        with pytest.raises(InvalidInput, match=r"limit of 200000.*payload_max_bytes"):
            wb.start_workflow("capped", "x" * 300_000)
        wx = wb.start_workflow("capped", "x" * 150_000)  # over today's 128 KB: fine
        assert wb.get_workflow(wx).input == "x" * 150_000
    finally:
        wb.close()
        wb.store.delete_tables()


def test_without_a_bucket_the_caller_is_told_to_set_one(small: Whimbrel) -> None:
    wb = small
    wb.register_workflow(WorkflowDefinition("nobucket", (
        Act("a", launcher=LauncherSpec.external()),
        Act("w", launcher=LauncherSpec.signal("go"), depends_on=("a",)),)))
    with pytest.raises(InvalidInput, match=r"payload_bucket.*WHIMBREL_PAYLOAD_BUCKET"):
        wb.start_workflow("nobucket", "x" * 200_000)
    wx = wb.start_workflow("nobucket")
    aeid = activity_exec_id(wx, "a", 1)
    wb.transition_activity(aeid, "RUNNING")
    with pytest.raises(InvalidInput, match=r"payload_bucket.*WHIMBREL_PAYLOAD_BUCKET"):
        wb.transition_activity(aeid, "COMPLETED", output="x" * 100_000)
    with pytest.raises(InvalidInput, match=r"payload_bucket.*WHIMBREL_PAYLOAD_BUCKET"):
        wb.signal(wx, "go", "x" * 100_000)
    # Nothing was lost: the attempt still runs and ends normally.
    wb.transition_activity(aeid, "COMPLETED", output="fine")
    assert wb.get_activity(aeid).state is A.COMPLETED


def test_without_a_bucket_a_python_activity_too_large_fails_its_attempt(
        small: Whimbrel) -> None:
    _pipeline(small)
    wx = small.start_workflow("big_pipeline", {"size": 100_000})
    wf = small.wait(wx, timeout=60)
    assert wf.state is WorkflowState.FAILED
    make = wf.activity("make")
    assert make.state is A.FAILED
    assert make.error and "WHIMBREL_PAYLOAD_BUCKET" in make.error, make.error


def test_object_written_before_the_item_a_crash_between_leaves_an_orphan(
        big: Whimbrel, payload_bucket: str) -> None:
    wb = big
    wb.register_workflow(WorkflowDefinition("crashy", (
        Act("a", launcher=LauncherSpec.external()),)))
    wx = wb.start_workflow("crashy")
    aeid = activity_exec_id(wx, "a", 1)
    wb.transition_activity(aeid, "RUNNING")
    out = "z" * 100_000
    # Write 1 is the attempt's item; the object is written inside it, before it is sent
    # (write 2): crash right after the object landed.
    crash = FaultInjector(at=2)
    wb.store.write_hooks.append(crash)
    with pytest.raises(Crash):
        wb.transition_activity(aeid, "COMPLETED", output=out)
    assert crash.fired == (2, "PutObject", "payload"), crash.writes
    assert crash.writes[0][1:] == ("UpdateItem", "activity_exec"), crash.writes
    wb.store.write_hooks.remove(crash)
    # The object is there, the item does not reference it yet: an orphan, not a dangler.
    [key] = _keys(payload_bucket)
    assert wb.store.get_activity(aeid).state is A.RUNNING  # type: ignore[union-attr]
    # The retry writes the same key again (content-addressed, run-scoped): one object.
    wb.transition_activity(aeid, "COMPLETED", output=out)
    assert _keys(payload_bucket) == [key]
    assert wb.get_activity(aeid).output == out


def test_a_redelivered_start_writes_the_same_key(big: Whimbrel, payload_bucket: str) -> None:
    wb = big
    wb.register_workflow(WorkflowDefinition("again", (
        Act("a", launcher=LauncherSpec.external()),)))
    value = {"blob": "r" * 100_000}
    wx = wb.start_workflow("again", value, request_id="req-1")
    assert wb.start_workflow("again", value, request_id="req-1") == wx
    assert len(_keys(payload_bucket)) == 1


def test_a_missing_object_is_an_error_naming_its_key(
        big: Whimbrel, payload_bucket: str, ddb_endpoint: str, table_prefix: str) -> None:
    wb = big
    wb.register_workflow(WorkflowDefinition("lost", (
        Act("a", launcher=LauncherSpec.external()),)))
    wx = wb.start_workflow("lost")
    aeid = activity_exec_id(wx, "a", 1)
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, "COMPLETED", output="q" * 100_000)
    [key] = _keys(payload_bucket)
    boto3.client("s3").delete_object(Bucket=payload_bucket, Key=key)
    other = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                     payload_bucket=payload_bucket)
    try:
        with pytest.raises(PayloadMissing, match=key) as caught:
            other.get_activity(aeid)
        assert caught.value.ref == f"s3://{payload_bucket}/{key}"
    finally:
        other.close()


def test_signal_payloads_and_map_lists_go_through_the_bucket(
        big: Whimbrel, payload_bucket: str) -> None:
    wb = big
    wb.register_workflow(WorkflowDefinition("lists", (
        Act("src", launcher=LauncherSpec.external()),
        Act("m", launcher=LauncherSpec.external(), map_over="src", depends_on=("src",)),
        Act("w", launcher=LauncherSpec.signal("go"), depends_on=("m",)),
    )))
    wx = wb.start_workflow("lists")
    src = activity_exec_id(wx, "src", 1)
    wb.transition_activity(src, "RUNNING")
    # 3 elements of 30 KB: a list of 90 KB (over today's 64 KB output limit).
    elements = [str(i) * 30_000 for i in range(3)]
    wb.transition_activity(src, "COMPLETED", output=elements)
    for i in range(3):
        item = activity_exec_id(wx, f"m#{i}", 1)
        assert wb.get_activity(item).state is not None
        wb.transition_activity(item, "RUNNING")
        wb.transition_activity(item, "COMPLETED", output={"echo": elements[i]})
    payload = {"big": "s" * 200_000}
    wb.signal(wx, "go", payload)
    wf = wb.wait(wx, timeout=60)
    assert wf.state is WorkflowState.COMPLETED, wf.error
    assert wf.activity("m").output == [{"echo": e} for e in elements]
    assert wf.activity("w").output == payload
    assert all(k.startswith(f"whimbrel/runs/{wx}/") for k in _keys(payload_bucket))


def test_when_and_input_from_read_the_real_value_of_a_large_upstream(
        big: Whimbrel, payload_bucket: str, ddb_endpoint: str, table_prefix: str) -> None:
    wb = big
    wb.register_workflow(WorkflowDefinition("choose", (
        Act("src", launcher=LauncherSpec.external()),
        Act("yes", launcher=LauncherSpec.python("payload_activities:measure"),
            depends_on=("src",), when="src.kind == 'big'",
            input_from={"first": "src.rows[0]", "n": "length(src.rows)"}),
        Act("no", launcher=LauncherSpec.external(), depends_on=("src",),
            when="src.kind != 'big'"),
    )))
    wx = wb.start_workflow("choose")
    src = activity_exec_id(wx, "src", 1)
    rows = [f"row-{i:06d}-" + "v" * 100 for i in range(2000)]  # ~230 KB
    # Another client (another process: nothing in its cache) reports the end, so the
    # readers below must read the object from S3.
    other = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                     payload_bucket=payload_bucket)
    try:
        other.transition_activity(src, "RUNNING")
        other.transition_activity(src, "COMPLETED", output={"kind": "big", "rows": rows})
        # Kept open until the run ends: its follow-up may be what runs "yes".
        wf = wb.wait(wx, timeout=60)
    finally:
        other.close()
    assert wf.state is WorkflowState.COMPLETED, wf.error
    assert wf.activity("no").state is not A.COMPLETED  # its `when` was false
    yes = wf.activity("yes").output
    assert yes["upstream"] == {"src": len(json.dumps({"kind": "big", "rows": rows}))}
    assert yes["input"] == len(json.dumps({"first": rows[0], "n": 2000}))


def test_moves_and_guards_read_no_object(
        big: Whimbrel, payload_bucket: str, ddb_endpoint: str, table_prefix: str) -> None:
    """A run of external activities with a 10 MB input and 10 MB outputs, driven by a
    process that wrote none of them: every move (and its guards and hand-offs) reads no
    S3 object; only the reader that asks for a value does."""
    wb = big
    wb.register_workflow(WorkflowDefinition("guarded", (
        Act("a", launcher=LauncherSpec.external()),
        Act("b", launcher=LauncherSpec.external(), depends_on=("a",)),
    )))
    wx = wb.start_workflow("guarded", {"pad": "i" * (10 * MB)})
    mover = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                     payload_bucket=payload_bucket)
    try:
        for name in ("a", "b"):
            aeid = activity_exec_id(wx, name, 1)
            mover.transition_activity(aeid, "RUNNING")
            mover.transition_activity(aeid, "COMPLETED", output=name * (10 * MB))
        assert mover.meter.s3_requests["GetObject"] == 0, mover.meter.snapshot()
        assert mover.get_workflow(wx).state is WorkflowState.COMPLETED
        # The view above is a reader: it read the run's input and the two outputs once
        # (the outputs were in its cache: it wrote them).
        assert mover.meter.s3_requests["GetObject"] == 1, mover.meter.snapshot()
        assert mover.meter.s3_requests["PutObject"] == 2, mover.meter.snapshot()
    finally:
        mover.close()


def test_events_carry_large_outputs_as_references(big: Whimbrel, payload_bucket: str) -> None:
    """EventBridge takes events up to 256 KB: an output kept in S3 is published as its
    reference (publishing reads no object)."""
    wb = big
    wb.register_workflow(WorkflowDefinition("evented", (
        Act("a", launcher=LauncherSpec.external()),
        Act("b", launcher=LauncherSpec.external()),)))
    wx = wb.start_workflow("evented")
    for name, out in (("a", "L" * 400_000), ("b", "small")):
        aeid = activity_exec_id(wx, name, 1)
        wb.transition_activity(aeid, "RUNNING")
        wb.transition_activity(aeid, "COMPLETED", output=out)
    assert wb.wait(wx, timeout=30).state is WorkflowState.COMPLETED
    publisher = MemoryPublisher()
    notifier = wb.notifier(publisher)
    gets = wb.meter.s3_requests["GetObject"]
    for record in notify_records(wb):
        notifier.process(record)
    [ended] = [n for n in publisher.published if n.event_id == f"{wx}/ended/0"]
    ref = ended.detail["output"]["a"]["output_ref"]
    assert ref.startswith(f"s3://{payload_bucket}/whimbrel/runs/{wx}/")
    assert ended.detail["output"]["b"] == "small"
    assert len(json.dumps(ended.detail)) < 256_000
    assert wb.meter.s3_requests["GetObject"] == gets


def test_a_runs_objects_are_deleted_together(big: Whimbrel, payload_bucket: str) -> None:
    """The objects of a run share its key prefix: deleting them is one listing and one
    batch (the building block for deleting them when the run's items expire)."""
    wb = big
    wb.register_workflow(WorkflowDefinition("gone", (
        Act("a", launcher=LauncherSpec.external()),)))
    keep = wb.start_workflow("gone", {"pad": "k" * 50_000})
    wx = wb.start_workflow("gone", {"pad": "g" * 50_000})
    aeid = activity_exec_id(wx, "a", 1)
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, "COMPLETED", output="o" * 50_000)
    assert wb.store.blobs.delete_run(wx) == 2
    assert [k for k in _keys(payload_bucket) if wx in k] == []
    assert len([k for k in _keys(payload_bucket) if keep in k]) == 1
    assert wb.store.blobs.delete_run(wx) == 0  # again: nothing left, nothing fails
