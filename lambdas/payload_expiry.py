"""Stream of ``workflow_exec``: a run item TTL removed takes its payload objects with it
(whimbrel/store/blob_expiry.py)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from lambdas._shared import client_for, emit_lock, logger, metrics, process_batch
from whimbrel.store.blob_expiry import expire_run_payloads


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    blobs = client_for(context).store.blobs

    def handle(record: dict[str, Any]) -> None:
        result = expire_run_payloads(blobs, record)
        with emit_lock:
            if result.workflow_exec_id is None or result.reason:
                logger.info("record skipped", extra={"reason": result.reason,
                                                     "workflow_exec_id": result.workflow_exec_id})
                return
            metrics.add_metric(name="PayloadObjectsDeleted", unit=MetricUnit.Count,
                               value=result.deleted)
            logger.info("payloads deleted", extra={"workflow_exec_id": result.workflow_exec_id,
                                                   "deleted": result.deleted})

    return process_batch(event, context, handle)
