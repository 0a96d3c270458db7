"""What the three handlers share: the Engine (one per container), Logger and Metrics.

Configuration comes from ``WHIMBREL_TABLE_PREFIX`` and ``WHIMBREL_ENDPOINT_URL`` (unset:
real DynamoDB). The local runtime passes its own engine on the invocation context
(attribute ``whimbrel_engine``) so several runtimes can share one process.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from whimbrel.client.whimbrel import Whimbrel
from whimbrel.engine.engine import Engine
from whimbrel.engine.intake import IntakeResult, Outcome
from whimbrel.engine.ports import ENV_ENDPOINT_URL, ENV_TABLE_PREFIX
from whimbrel.launch.aws import aws_launchers
from whimbrel.store import specs

SERVICE = "whimbrel"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace="Whimbrel", service=SERVICE)

_lock = threading.Lock()
_client: Whimbrel | None = None


def engine_for(context: Any) -> Engine:
    """The engine to use: the one the caller put on ``context``, else this container's."""
    engine = getattr(context, "whimbrel_engine", None)
    if isinstance(engine, Engine):
        return engine
    global _client
    with _lock:
        if _client is None:
            _client = Whimbrel(
                endpoint_url=os.environ.get(ENV_ENDPOINT_URL) or None,
                table_prefix=os.environ.get(ENV_TABLE_PREFIX) or specs.DEFAULT_TABLE_PREFIX,
                launchers=aws_launchers(),
                actor="lambda",
            )
        return _client.engine


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
