"""Deployed code workflows (issue 26, "Deployed"): the Lambdas given the user's code
(``WHIMBREL_MODULES``, what the CDK construct's ``workflow_modules`` sets) make its code
workflows' decisions; a Lambda without it leaves them for a worker.

The real handlers (``workflow_request``, ``activity_event``, ``heartbeat``) are called
in-process as on AWS — a context without a client, so each builds its container's client
from the environment — and fed the records of DynamoDB Local's real streams by the local
runtime's pump, with the consumers' filters, every batch delivered twice. The rows are
written with plain PutItems, as a worker in any language writes them; the test's own
client is no worker for the workflows (it neither registers nor starts them).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import wb_deployed_workflows

from whimbrel import ActivityState, InvalidInput, Whimbrel, WorkflowState
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.local.s3 import LocalS3
from whimbrel.local.streams import StreamPump
from whimbrel.settings import ENV_MODULES
from whimbrel.store import specs
from whimbrel.store.consumers import (
    ACTIVITY_EVENT_CONSUMER,
    WORKFLOW_REQUEST_CONSUMER,
    StreamConsumerSpec,
)
from whimbrel.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

from test_lambda_launchers import AwsContext  # noqa: E402  (Lambda's context, as AWS passes it)

from lambdas import _shared, activity_event, heartbeat, workflow_request  # noqa: E402

MODULE = wb_deployed_workflows.__name__
A = ActivityState
W = WorkflowState


class Deployed:
    """The deployed handlers over one table prefix: rows in, stream records out."""

    def __init__(self, wb: Whimbrel) -> None:
        self.wb = wb
        self.ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url,
                                region_name="us-east-1")
        streams = boto3.client("dynamodbstreams", endpoint_url=wb.endpoint_url,
                               region_name="us-east-1")
        self.pumps = [self._pump(consumer, streams, handler) for consumer, handler in (
            (WORKFLOW_REQUEST_CONSUMER, workflow_request.handler),
            (ACTIVITY_EVENT_CONSUMER, activity_event.handler))]

    def _pump(self, consumer: StreamConsumerSpec, streams: Any, handler: Any) -> StreamPump:
        table = consumer.table.table_name(self.wb.table_prefix)
        arn = self.ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]

        def invoke(event: dict[str, Any]) -> Any:
            response = handler(event, AwsContext())
            assert response == {"batchItemFailures": []}, response
            return response

        def dead_letter(records: list[dict[str, Any]], reason: str, error_type: str) -> None:
            raise AssertionError(f"dead-lettered: {reason}")

        # Every batch twice, as Lambda may deliver it: a decision redelivered schedules
        # nothing twice.
        return StreamPump(consumer, streams=streams, stream_arn=arn, invoke=invoke,
                          dead_letter=dead_letter, stop=threading.Event(),
                          deliver_twice=True)

    def deliver(self) -> None:
        """Feed the handlers every record written so far (and those their work wrote)."""
        while any([pump.poll_once() for pump in self.pumps]):
            pass

    def put(self, logical: str, item: dict[str, Any]) -> None:
        table = specs.table_spec(logical).table_name(self.wb.table_prefix)
        self.ddb.put_item(TableName=table, Item=item)
        self.deliver()

    def request(self, request_id: str, workflow: str, input_json: str) -> str:
        self.put("workflow_request", {"workflow_request_id": {"S": request_id},
                                      "workflow_name": {"S": workflow},
                                      "input": {"S": input_json}})
        return workflow_exec_id_for(request_id)

    def event(self, **attrs: str) -> None:
        self.put("activity_event", {"activity_event_id": {"S": str(uuid.uuid4())},
                                    **{k: {"S": v} for k, v in attrs.items()}})

    def complete(self, activity_exec_id: str, output_json: str) -> None:
        """What an external worker in any language does: RUNNING, then COMPLETED."""
        self.event(activity_exec_id=activity_exec_id, transition="RUNNING")
        self.event(activity_exec_id=activity_exec_id, transition="COMPLETED",
                   output=output_json)


class Queue:
    """The SQS queue of the ``sqs`` steps (moto's server), and what its consumer does."""

    def __init__(self, url: str, endpoint: str) -> None:
        self.url = url
        self.sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")

    def take(self) -> dict[str, Any]:
        """The one message waiting: what the Lambda's launch sent."""
        got = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10)
        (message,) = got.get("Messages", [])
        self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
        body: dict[str, Any] = json.loads(message["Body"])
        return body


def lambda_client() -> Whimbrel:
    """The client the handlers built for this container (from the environment)."""
    assert _shared._client is not None, "no handler ran yet"
    return _shared._client


def step(wb: Whimbrel, wx: str, name: str) -> Any:
    (act,) = [a for a in wb.get_workflow(wx).activities if a.activity_name == name]
    return act


def step_input(wb: Whimbrel, activity_exec_id: str) -> Any:
    """The input a worker claiming the step reads (the item's JSON text)."""
    item = wb.store.get_activity(activity_exec_id)
    assert item is not None
    return json.loads(item.input or "null")


@pytest.fixture
def wb(monkeypatch: pytest.MonkeyPatch, ddb_endpoint: str,
       table_prefix: str) -> Iterator[Whimbrel]:
    """The environment a deployed Lambda has, and a client that is no worker (it only
    creates the tables and reads)."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("WHIMBREL_ENDPOINT_URL", ddb_endpoint)
    monkeypatch.setenv("WHIMBREL_TABLE_PREFIX", table_prefix)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    monkeypatch.setattr(_shared, "_client", None)  # a cold start: the container's client anew
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    client.create_tables()
    yield client
    if _shared._client is not None:
        _shared._client.close()
    client.close()
    client.store.delete_tables()


@pytest.fixture
def queue(local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch, table_prefix: str) -> Queue:
    """A queue on moto's server, where the Lambdas' ``sqs`` launcher sends (the
    container's clients read ``AWS_ENDPOINT_URL_SQS`` at its cold start)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", local_s3.url)
    sqs = boto3.client("sqs", endpoint_url=local_s3.url, region_name="us-east-1")
    url = sqs.create_queue(QueueName=f"{table_prefix}ship".replace("_", "-"))["QueueUrl"]
    return Queue(url, local_s3.url)


def order_input(order_id: int, queue: Queue) -> str:
    return json.dumps({"id": order_id, "queue": queue.url})


def test_lambdas_given_the_code_make_its_decisions(
        wb: Whimbrel, queue: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MODULES, MODULE)
    deployed = Deployed(wb)
    # Nobody registered "deployed_order": the Lambda did at its cold start, so a
    # request row alone starts it.
    wx = deployed.request("order-1", "deployed_order", order_input(7, queue))
    assert wb.get_definition("deployed_order").code == f"{MODULE}:deployed_order"
    reserve = step(wb, wx, "reserve#1")
    assert reserve.state is A.READY  # decided by the Lambda: the first step, claimable
    deployed.complete(reserve.activity_exec_id, '{"room": 12}')
    run = wb.get_workflow(wx)
    assert run.state is W.RUNNING and run.properties == {"stage": "reserved"}

    # The signal, as a row: the wait ends, the Lambda decides the next step and, the
    # winner of its QUEUED write, pushes it onto the queue.
    deployed.event(workflow_exec_id=wx, transition="SIGNAL", signal="paid",
                   payload='{"eur": 12}')
    ship = step(wb, wx, "ship#1")
    assert ship.state is A.QUEUED
    message = queue.take()
    assert message["whimbrel"]["activity_exec_id"] == ship.activity_exec_id
    assert step_input(wb, ship.activity_exec_id) == {"id": 7, "eur": 12}
    deployed.complete(ship.activity_exec_id, '"shipped"')

    done = wb.get_workflow(wx)
    assert done.state is W.COMPLETED, done.error
    assert done.output == {"reserved": {"room": 12}, "paid": {"eur": 12},
                           "shipped": "shipped"}
    assert done.properties == {"stage": "shipped"}
    # Every decision was the Lambdas' own: none left for a worker, none by this client.
    runs = lambda_client().engine.feature(CodeRuns)
    assert runs.decisions >= 3 and runs.left == 0
    assert wb.engine.feature(CodeRuns).decisions == 0
    # Each step was scheduled once, though every record came twice.
    assert [(a.activity_name, a.attempt) for a in done.activities] == [
        ("reserve#1", 1), ("signal-paid#1", 1), ("ship#1", 1)]
    # The container runs no thread of its own that would outlive an invocation (a claim
    # loop of a client that registered workflows): Lambda freezes it after each.
    assert lambda_client()._background is None


def test_a_lambda_runs_no_python_step_of_the_code_it_was_given(
        wb: Whimbrel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MODULES, MODULE)
    deployed = Deployed(wb)
    wx = deployed.request("py-1", "deployed_python", '{"n": 21}')
    # Decided here, but the step is a python function: it would run on a Lambda thread
    # frozen once the handler returns, so it waits, claimable, for a worker.
    double = step(wb, wx, "double#1")
    assert double.state is A.READY
    assert lambda_client().engine.feature(CodeRuns).decisions == 1
    worker = Whimbrel(endpoint_url=wb.endpoint_url, table_prefix=wb.table_prefix)
    thread = threading.Thread(target=worker.run_worker, args=([MODULE],))
    thread.start()
    try:
        wait_until(lambda: worker.get_workflow(wx).state is W.COMPLETED, timeout=30,
                   message="the worker did not run the python step")
    finally:
        worker.stop()
        thread.join(timeout=30)
        worker.close()
    # The worker ran the step, applied its end and decided the run's end.
    assert wb.get_workflow(wx).output == {"n": 42}
    assert lambda_client().engine.feature(CodeRuns).decisions == 1


def test_the_heartbeat_takes_decisions_left_by_other_processes(
        wb: Whimbrel, queue: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MODULES, MODULE)
    deployed = Deployed(wb)
    wx = deployed.request("order-2", "deployed_order", order_input(8, queue))
    deployed.complete(step(wb, wx, "reserve#1").activity_exec_id, '{"room": 3}')
    # A process without the code (a script, the CLI) sends the signal with the Full
    # Logic API: it applies it, but is no worker for the code, so it leaves the decision.
    wb.signal(wx, "paid", {"eur": 30})
    assert wb.engine.feature(CodeRuns).left == 1
    assert "ship#1" not in [a.activity_name for a in wb.get_workflow(wx).activities]

    # Nothing deployed reads map_item's stream: the heartbeat's scheduled pass takes it.
    report = heartbeat.handler({"source": "aws.events"}, AwsContext())
    assert report["decisions_taken"] == 1
    ship = step(wb, wx, "ship#1")
    assert ship.state is A.QUEUED
    assert queue.take()["whimbrel"]["activity_exec_id"] == ship.activity_exec_id
    assert step_input(wb, ship.activity_exec_id) == {"id": 8, "eur": 30}
    # The next pass finds nothing more to take (the entry is done).
    assert heartbeat.handler({"source": "aws.events"}, AwsContext())["decisions_taken"] == 0
    deployed.complete(ship.activity_exec_id, '"ok"')
    assert wb.get_workflow(wx).state is W.COMPLETED


def test_a_lambda_without_the_code_leaves_the_decisions_for_a_worker(
        wb: Whimbrel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MODULES, raising=False)
    # A deploy script registers the workflow and exits (no worker once closed).
    with Whimbrel(endpoint_url=wb.endpoint_url, table_prefix=wb.table_prefix) as script:
        script.register_workflow(wb_deployed_workflows.deployed_order)
    deployed = Deployed(wb)
    wx = deployed.request("order-3", "deployed_order", '{"id": 9, "queue": "unused"}')
    # This process can import the module, but the Lambda was not given it: it does not
    # decide; the run waits, RUNNING, nothing failed, its first decision left.
    runs = lambda_client().engine.feature(CodeRuns)
    assert (runs.decisions, runs.left) == (0, 1)
    run = wb.get_workflow(wx)
    assert run.state is W.RUNNING and run.activities == ()
    # Nor does its heartbeat take it.
    assert heartbeat.handler({"source": "aws.events"}, AwsContext())["decisions_taken"] == 0
    assert wb.get_workflow(wx).activities == ()

    # A worker for the module does.
    worker = Whimbrel(endpoint_url=wb.endpoint_url, table_prefix=wb.table_prefix)
    thread = threading.Thread(target=worker.run_worker, args=([MODULE],))
    thread.start()
    try:
        wait_until(lambda: [a.activity_name for a in worker.get_workflow(wx).activities],
                   timeout=30, message="the worker did not take the decision")
    finally:
        worker.stop()
        thread.join(timeout=30)
        worker.close()
    assert step(wb, wx, "reserve#1").state is A.READY


@pytest.mark.parametrize(("modules", "says"), [
    ("wb_no_such_module", "WHIMBREL_MODULES: cannot import module 'wb_no_such_module'"),
    ("shop/workflows", "'shop/workflows' is not a module name"),
])
def test_a_cold_start_with_modules_it_cannot_use_fails_and_says_why(
        wb: Whimbrel, monkeypatch: pytest.MonkeyPatch, modules: str, says: str) -> None:
    monkeypatch.setenv(ENV_MODULES, modules)
    with pytest.raises(InvalidInput, match=re.escape(says)):
        heartbeat.handler({"source": "aws.events"}, AwsContext())
    # No half-built client is kept: the next invocation tries again (Lambda retries a
    # stream batch whose handler raised; the errors alarm reports it).
    assert _shared._client is None
