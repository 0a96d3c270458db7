"""Streams of ``workflow_exec``, ``activity_exec`` and ``map_item``: publish each event
exactly once (a run ended, an activity failed for good, a wait started; docs/events.md)."""

from __future__ import annotations

import threading
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from lambdas._shared import client_for, emit_lock, logger, metrics, process_batch, spans_flushed
from whimbrel.observe import NotifyOutcome, NotifyResult, Publisher, publisher_from_settings
from whimbrel.settings import Settings

_lock = threading.Lock()
_publisher: Publisher | None = None


def publisher_for(context: Any) -> Publisher:
    """The publisher the caller put on ``context`` (the local runtime's events file),
    else this container's: EventBridge on ``WHIMBREL_EVENT_BUS``, or the file named by
    ``WHIMBREL_EVENTS_FILE``."""
    given = getattr(context, "whimbrel_publisher", None)
    if given is not None:
        return given  # type: ignore[no-any-return]
    global _publisher
    with _lock:
        if _publisher is None:
            _publisher = publisher_from_settings(Settings.from_env())
        return _publisher


def count(result: NotifyResult) -> None:
    """Emit the metrics one record's outcome is worth."""
    if result.published:
        metrics.add_metric(name="EventsPublished", unit=MetricUnit.Count,
                           value=len(result.published))
    if result.duplicates:
        metrics.add_metric(name="EventsDuplicateSkipped", unit=MetricUnit.Count,
                           value=len(result.duplicates))
    if result.resumed:
        metrics.add_metric(name="EventsResumed", unit=MetricUnit.Count,
                           value=len(result.resumed))
    if result.outcome is NotifyOutcome.REJECTED:
        metrics.add_metric(name="RejectedRecords", unit=MetricUnit.Count, value=1)


@spans_flushed
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    notifier = client_for(context).notifier(publisher_for(context))

    def handle(record: dict[str, Any]) -> None:
        result = notifier.process(record)
        with emit_lock:
            emit(result)

    def emit(result: NotifyResult) -> None:
        count(result)
        if result.outcome is NotifyOutcome.REJECTED:
            logger.warning("record rejected", extra={"reason": result.reason})
        elif result.published or result.duplicates:
            logger.info("events", extra={"published": list(result.published),
                                         "duplicates": list(result.duplicates),
                                         "resumed": list(result.resumed)})

    return process_batch(event, context, handle)
