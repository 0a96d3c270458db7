"""Stream of ``workflow_request``: start the workflow of each inserted, non-manual request."""

from __future__ import annotations

from typing import Any

from lambdas._shared import logger, metrics, process_stream, spans_flushed
from whimbrel.engine import Intake


@spans_flushed
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_stream(event, context, Intake.workflow_request)
