"""The deployed Lambdas refuse the ``command`` launcher (issue 20, item 7) and leave
``python`` work for a worker (issue 26): through the real
``workflow_request`` handler, configured from the environment as on AWS, on DynamoDB
Local."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.contract.ids import workflow_exec_id_for

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

from lambdas import _shared, workflow_request  # noqa: E402


class AwsContext:
    """Lambda's context as AWS passes it: no ``whimbrel_client`` on it."""

    function_name = "whimbrel-workflow_request"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:wr"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def insert(request_id: str, workflow: str, seq: int) -> dict[str, Any]:
    image = {"workflow_request_id": {"S": request_id}, "workflow_name": {"S": workflow},
             "input": {"S": "{}"}}
    return {"eventID": f"e{seq}", "eventName": "INSERT", "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
            "dynamodb": {"ApproximateCreationDateTime": 1735689600 + seq,
                         "Keys": {"workflow_request_id": {"S": request_id}},
                         "NewImage": image, "SequenceNumber": f"{1000 + seq}",
                         "SizeBytes": 100, "StreamViewType": "NEW_AND_OLD_IMAGES"},
            "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/"
                              "whimbrel_workflow_request/stream/2025-01-01T00:00:00.000"}


@pytest.fixture
def wb(monkeypatch: pytest.MonkeyPatch, ddb_endpoint: str,
       table_prefix: str) -> Iterator[Whimbrel]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("WHIMBREL_ENDPOINT_URL", ddb_endpoint)
    monkeypatch.setenv("WHIMBREL_TABLE_PREFIX", table_prefix)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    monkeypatch.setattr(_shared, "_client", None)  # this container's client, built anew
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    client.create_tables()
    client.register_workflow(WorkflowDefinition("in_proc", (
        Act("py", launcher=LauncherSpec.python("benchmarks.shapes:noop")),)))
    client.register_workflow(WorkflowDefinition("cmd", (
        Act("sh", launcher=LauncherSpec.command(["true"])),)))
    client.register_workflow(WorkflowDefinition("ext", (Act("claim_me"),)))
    yield client
    if _shared._client is not None:
        _shared._client.close()
    client.close()
    client.store.delete_tables()


def test_the_lambdas_refuse_in_process_launchers_and_go_on(wb: Whimbrel) -> None:
    event = {"Records": [insert("r-py", "in_proc", 1), insert("r-cmd", "cmd", 2),
                         insert("r-ext", "ext", 3)]}
    response = workflow_request.handler(event, AwsContext())
    # Every record is done: a refused launch is not a record to retry.
    assert response == {"batchItemFailures": []}
    for request_id, name in (("r-cmd", "command"),):
        wf = wb.get_workflow(workflow_exec_id_for(request_id))
        (act,) = wf.activities
        # The operator sees why, and what to do, on the attempt and on the run.
        assert act.state is ActivityState.FAILED
        assert act.error_type == "LaunchError"
        assert f"in-process {name!r} launcher" in (act.error or "")
        for fix in ("'external'", "'lambda'", "'sqs'", "'ecs'", "Full Logic API"):
            assert fix in (act.error or "")
        assert wf.state is WorkflowState.FAILED
    # The record behind them started its run: its activity waits for a worker.
    (ext,) = wb.get_workflow(workflow_exec_id_for("r-ext")).activities
    assert ext.state is ActivityState.READY
    # A python activity is no Lambda's to run: left claimable for a worker (issue 26,
    # "Code runs where the code is"), here the client that registered the workflow.
    done = wb.wait(workflow_exec_id_for("r-py"), timeout=30)
    assert done.state is WorkflowState.COMPLETED
    (py,) = done.activities
    assert [h.by for h in py.history if h.state == "READY"] == ["lambda"]
    # The container's client has AWS's push launchers, and refusals for the others.
    assert _shared._client is not None
    launchers = _shared._client.engine.launchers
    assert set(launchers) >= {"lambda", "sqs", "ecs", "python", "command"}
    assert all(isinstance(launchers[k], _shared.InProcessRefused)
               for k in _shared.IN_PROCESS_KINDS)
