"""docs/simple-api.md says how to find a run from its request id with the AWS CLI alone:
its block computes the id as the code does and reads the run's state (issue 20)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract import ids

DOC = Path(__file__).resolve().parents[2] / "docs" / "simple-api.md"


def _block() -> str:
    text = DOC.read_text()
    found = re.search(r"<!-- run-state:[^>]*-->\n```sh\n(.*?)```", text, re.S)
    assert found, "docs/simple-api.md lost its run-state block"
    return found.group(1)


def test_the_documented_namespace_is_the_codes() -> None:
    text = DOC.read_text()
    assert f"uuid5({ids._NAMESPACE}, \"request:\" + workflow_request_id)" in text
    assert f'uuid.UUID("{ids._NAMESPACE}")' in _block()


def test_the_documented_get_item_reads_the_run(ddb_endpoint: str, table_prefix: str) -> None:
    block = _block()
    request_id = re.search(r"^REQ=(\S+)", block, re.M)
    assert request_id
    with Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix) as wb:
        wb.create_tables()
        wb.register_workflow(WorkflowDefinition("nightly_etl", (
            ActivityDefinition("a", launcher=LauncherSpec.external()),)))
        wx = wb.start_workflow("nightly_etl", request_id=request_id.group(1))
        env = {**os.environ, "WHIMBREL_TABLE_PREFIX": table_prefix,
               "AWS_ENDPOINT_URL_DYNAMODB": ddb_endpoint, "AWS_ACCESS_KEY_ID": "x",
               "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
        # The block as written, then the id it computed.
        done = subprocess.run(["bash", "-euc", block + 'echo "$WX"\n'], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["RUNNING", "None", wx]
        assert wx == ids.workflow_exec_id_for(request_id.group(1))
        wb.transition_activity(f"{wx}:a:1", "RUNNING")
        wb.transition_activity(f"{wx}:a:1", "FAILED", error="disk full")
        done = subprocess.run(["bash", "-euc", block], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.stdout.split("\t", 1)[0] == "FAILED", done.stdout + done.stderr
        wb.store.delete_tables()
