"""Scheduled heartbeat listener: one sweep (time-outs, due retries and timers, reconcile),
then the code workflows' decisions left for a worker that this container serves."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from lambdas._shared import client_for, logger, metrics, spans_flushed, take_left_decisions


@spans_flushed
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    client = client_for(context)
    report = client.sweep()
    decisions = take_left_decisions(client, context)
    # Emitted every run (0 included) so the alarm's series has no gaps.
    metrics.add_metric(name="ActivitiesTimedOut", unit=MetricUnit.Count,
                       value=len(report.timed_out))
    if report.timed_out or report.retries_launched or report.timers_fired or report.errors:
        logger.info("sweep", extra=report.to_dict())
    if decisions:
        logger.info("left decisions taken", extra={"decisions_taken": decisions})
    return {**report.to_dict(), "decisions_taken": decisions}
