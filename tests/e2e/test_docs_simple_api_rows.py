"""docs/simple-api.md's rows with native DynamoDB types, with input_ref / output_ref, and
its CANCEL of a whole run,
run as written with the AWS CLI against DynamoDB Local, through the real stream handlers
of the local runtime (issue 20, "Done when")."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import RawClient, activity_state

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, WorkflowDefinition, WorkflowState
from whimbrel.contract.ids import activity_exec_id
from whimbrel.local.runtime import LocalRuntime
from whimbrel.local.s3 import LocalS3
from whimbrel.testing import wait_until

pytestmark = pytest.mark.slow
A, W = ActivityState, WorkflowState
DOC = Path(__file__).resolve().parents[2] / "docs" / "simple-api.md"


def _blocks(tag: str) -> list[str]:
    """The ``sh`` blocks after the ``<!-- tag: … -->`` marker, up to the next section."""
    text = DOC.read_text()
    start = text.find(f"<!-- {tag}:")
    assert start >= 0, f"docs/simple-api.md lost its {tag} block"
    end = text.find("\n## ", start)
    return re.findall(r"```sh\n(.*?)```", text[start:end if end >= 0 else None], re.S)


def _sh(rt: LocalRuntime, block: str, **env: str) -> str:
    full = {**os.environ, "WHIMBREL_TABLE_PREFIX": rt.table_prefix,
            "AWS_ENDPOINT_URL_DYNAMODB": rt.endpoint_url, "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1", **env}
    done = subprocess.run(["bash", "-euc", block], env=full, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _register(rt: LocalRuntime) -> None:
    rt.client.register_workflow(WorkflowDefinition("nightly_etl", (
        Act("transform", launcher=LauncherSpec.external()),
        Act("load", ("transform",), launcher=LauncherSpec.external()))))


def _last_event(raw: RawClient, rt: LocalRuntime, transition: str) -> dict[str, object]:
    """The one activity_event row of ``transition`` the block wrote, once marked."""
    def marked() -> dict[str, object] | None:
        items = raw.ddb.scan(TableName=f"{rt.table_prefix}activity_event",
                             ConsistentRead=True)["Items"]
        rows = [i for i in items if i["transition"]["S"] == transition]
        assert len(rows) <= 1, rows
        return rows[0] if rows and "outcome" in rows[0] else None
    return wait_until(marked, timeout=30, message=f"the {transition} row was never marked")


def test_the_documented_native_rows_start_and_complete(runtime: LocalRuntime,
                                                       raw: RawClient) -> None:
    start, complete = _blocks("native-rows")
    _register(runtime)
    wx = _sh(runtime, start).split()[-1]
    transform = activity_exec_id(wx, "transform", 1)
    wait_until(lambda: activity_state(runtime, transform) == "READY", timeout=30,
               message="the native request never started its run")
    assert runtime.client.get_workflow(wx).input == {"day": "2025-01-01", "limit": 10}
    _sh(runtime, complete, WX=wx)
    wait_until(lambda: activity_state(runtime, transform) == "COMPLETED", timeout=30,
               message="the native COMPLETED row was never applied")
    assert runtime.client.get_activity(transform).output == {"rows": 42}
    row = _last_event(raw, runtime, "COMPLETED")
    assert row["outcome"] == {"S": "APPLIED"}, row
    # The run ends (its end reads the native input back) and a sweep goes through it.
    load = activity_exec_id(wx, "load", 1)
    runtime.client.transition_activity(load, "RUNNING")
    runtime.client.transition_activity(load, "COMPLETED")
    assert runtime.client.wait(wx, timeout=30).state is W.COMPLETED
    runtime.client.sweep()


def test_the_documented_cancel_row_cancels_the_run(runtime: LocalRuntime,
                                                   raw: RawClient) -> None:
    (block,) = _blocks("cancel-run")
    _register(runtime)
    wx = runtime.client.start_workflow("nightly_etl", {"day": "2025-01-01"})
    transform = activity_exec_id(wx, "transform", 1)
    runtime.client.transition_activity(transform, "RUNNING")
    _sh(runtime, block, WX=wx)
    wait_until(lambda: activity_state(runtime, transform) == "CANCELLED_RUNNING", timeout=30,
               message="the CANCEL row never asked the running activity to stop")
    row = _last_event(raw, runtime, "CANCEL")
    assert row["outcome"] == {"S": "APPLIED"}, row
    assert row["result_state"] == {"S": "CANCEL_REQUESTED"}, row
    runtime.client.transition_activity(transform, "COMPLETED")  # it stops as asked
    assert runtime.client.wait(wx, timeout=30).state is W.CANCELLED
    assert runtime.client.get_activity(transform).state is A.CANCELLED
    assert runtime.client.get_activity(activity_exec_id(wx, "load", 1)).state is A.CANCELLED


@pytest.fixture
def bucketed(ddb_endpoint: str, table_prefix: str,
             payload_bucket: str) -> Iterator[LocalRuntime]:
    """The local runtime with a payload bucket (on the local S3)."""
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0.2,
                      lambda_log_level="WARNING", payload_bucket=payload_bucket) as rt:
        yield rt
        rt.client.store.delete_tables()


def test_the_documented_payload_ref_rows_start_and_complete(
        bucketed: LocalRuntime, local_s3: LocalS3, tmp_path: Path) -> None:
    """Issue 27: the input_ref / output_ref blocks, with the AWS CLI against DynamoDB
    Local and the local S3, through the real stream handlers."""
    runtime = bucketed
    start, complete = _blocks("payload-refs")
    local_s3.create_bucket("my-uploads")
    _register(runtime)
    listing = {"keys": [f"s3://data/{i:06d}.csv" for i in range(5000)]}  # ~110 KB
    result = {"rows": "r" * 300_000}  # over the 64,000 bytes a row may hold
    (tmp_path / "listing.json").write_text(json.dumps(listing))
    (tmp_path / "result.json").write_text(json.dumps(result))
    s3 = {"AWS_ENDPOINT_URL_S3": local_s3.url}
    wx = _sh(runtime, f"cd {tmp_path}\n{start}", **s3).split()[-1]
    transform = activity_exec_id(wx, "transform", 1)
    wait_until(lambda: activity_state(runtime, transform) == "READY", timeout=30,
               message="the input_ref request never started its run")
    assert runtime.client.get_workflow(wx).input == listing
    runtime.client.transition_activity(transform, "RUNNING")
    _sh(runtime, f"cd {tmp_path}\n{complete}", WX=wx, **s3)
    wait_until(lambda: activity_state(runtime, transform) == "COMPLETED", timeout=30,
               message="the output_ref COMPLETED row was never applied")
    assert runtime.client.get_activity(transform).output == result
