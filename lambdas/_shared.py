"""What the handlers share: the Engine (one per container), Logger and Metrics, and
Powertools batch processing of stream events.

Configuration comes from the environment through ``Whimbrel.from_env`` (``whimbrel.settings``:
``WHIMBREL_TABLE_PREFIX``, ``WHIMBREL_ENDPOINT_URL`` — unset: real DynamoDB —,
``WHIMBREL_RETENTION_DAYS``, ``WHIMBREL_METRICS``). The local runtime passes its own client
on the invocation context (attribute ``whimbrel_client``) so several runtimes can share one
process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from whimbrel.client.whimbrel import Whimbrel
from whimbrel.contract.errors import LaunchError
from whimbrel.engine.intake import Intake, IntakeResult, Outcome, record_keys
from whimbrel.engine.ports import Launcher, LaunchRequest
from whimbrel.launch.aws import aws_launchers

SERVICE = "whimbrel"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace="Whimbrel", service=SERVICE)

_lock = threading.Lock()
_client: Whimbrel | None = None


#: The facade's launchers that run an activity in this process: a Lambda refuses them.
IN_PROCESS_KINDS = ("python", "command")


class InProcessRefused:
    """Stands in for an in-process launcher in a Lambda: an activity started there would
    run on a thread of a Lambda container that is frozen, or gone, once the handler
    returns. The launch fails, so the engine fails the attempt with this message on the
    activity (its ``error``, the run's error, the console), and the record is done."""

    in_process = False  # nothing runs here: the engine queues the attempt as for a push

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def launch(self, request: LaunchRequest) -> None:
        raise LaunchError(
            f"activity {request.activity_name!r} of workflow {request.workflow_name!r} has "
            f"the in-process {self.kind!r} launcher, which the deployed Lambdas refuse (it "
            "would run on a Lambda thread after the handler returns): give it an "
            "'external', 'lambda', 'sqs' or 'ecs' launcher, or start the run with the Full "
            "Logic API from a process that runs it")


def lambda_launchers() -> dict[str, Launcher]:
    """The launchers of a deployed Lambda: AWS's push launchers; in-process ones refused."""
    return {**aws_launchers(), **{k: InProcessRefused(k) for k in IN_PROCESS_KINDS}}


def client_for(context: Any) -> Whimbrel:
    """The client to use: the one the caller put on ``context``, else this container's."""
    given = getattr(context, "whimbrel_client", None)
    if isinstance(given, Whimbrel):
        return given
    global _client
    with _lock:
        if _client is None:
            _client = Whimbrel.from_env(launchers=lambda_launchers(), actor="lambda")
        return _client


def count(result: IntakeResult) -> None:
    """Emit the metrics one record's outcome is worth."""
    if result.outcome is Outcome.REJECTED:
        metrics.add_metric(name="RejectedRecords", unit=MetricUnit.Count, value=1)
    if result.conflict:
        metrics.add_metric(name="TransitionConflicts", unit=MetricUnit.Count, value=1)
    if result.outcome is Outcome.STARTED:
        metrics.add_metric(name="WorkflowsStarted", unit=MetricUnit.Count, value=1)
    if result.outcome is Outcome.APPLIED:
        name = {"COMPLETED": "ActivitiesCompleted", "FAILED": "ActivitiesFailed",
                "TIMED_OUT": "ActivitiesTimedOut"}.get(result.new_state or "")
        if name:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)


def log_result(result: IntakeResult) -> None:
    if result.outcome is Outcome.REJECTED:
        logger.warning("record rejected", extra={"reason": result.reason,
                                                 "conflict": result.conflict})
    else:
        logger.info("record processed", extra={"outcome": result.outcome.value,
                                               "new_state": result.new_state})


def process_stream(event: dict[str, Any], context: Any,
                   apply: Callable[[Intake, dict[str, Any]], IntakeResult]) -> dict[str, Any]:
    """Run ``apply`` on each record of a DynamoDB-stream batch; failed records (only
    retryable errors reach here) become ``batchItemFailures``."""
    intake = client_for(context).intake

    def handle(record: dict[str, Any]) -> None:
        result = apply(intake, record)
        count(result)
        log_result(result)

    return process_batch(event, context, handle)


def process_batch(event: dict[str, Any], context: Any,
                  handle: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Powertools batch processing of a DynamoDB-stream event: ``handle`` each record
    (with its ids in the log context); a record whose ``handle`` raises becomes a
    ``batchItemFailures`` entry, and the others go on."""
    metrics.add_metric(name="RecordsReceived", unit=MetricUnit.Count,
                       value=len(event.get("Records") or []))

    def record_handler(record: DynamoDBRecord) -> None:
        with logger.append_context_keys(**record_keys(record.raw_event)):
            handle(record.raw_event)

    # A fresh processor per call: it holds the batch's state.
    processor = BatchProcessor(event_type=EventType.DynamoDBStreams,
                               raise_on_entire_batch_failure=False)
    response = process_partial_response(event=event, record_handler=record_handler,
                                        processor=processor, context=context)
    return dict(response)
