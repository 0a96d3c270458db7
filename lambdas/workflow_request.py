"""Stream of ``workflow_request``: start the workflow of each inserted, non-manual request."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from lambdas._shared import count, engine_for, log_result, logger, metrics
from whimbrel.engine.intake import Intake, record_keys


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    intake = Intake(engine_for(context))
    metrics.add_metric(name="RecordsReceived", unit=MetricUnit.Count,
                       value=len(event.get("Records") or []))

    def record_handler(record: DynamoDBRecord) -> None:
        with logger.append_context_keys(**record_keys(record.raw_event)):
            result = intake.workflow_request(record.raw_event)
            count(result)
            log_result(result)

    # A fresh processor per call: it holds the batch's state.
    processor = BatchProcessor(event_type=EventType.DynamoDBStreams,
                               raise_on_entire_batch_failure=False)
    response = process_partial_response(event=event, record_handler=record_handler,
                                        processor=processor, context=context)
    return dict(response)
