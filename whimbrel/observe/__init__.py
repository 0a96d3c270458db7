"""What happened, told to the outside: events (docs/events.md) and metrics.

* :mod:`whimbrel.observe.notify` — the notify consumer: stream records of the execution
  tables in, each event published exactly once (``Whimbrel.notifier``);
* :mod:`whimbrel.observe.publishers` — EventBridge, a JSON-lines file, a list;
* :mod:`whimbrel.observe.emf` — the engine's metrics as CloudWatch EMF lines.

Layered like ``whimbrel.launch``: above the engine and the store, below the client.
"""

from whimbrel.observe.emf import EmfMetrics
from whimbrel.observe.notify import Notifier, NotifyOutcome, NotifyResult
from whimbrel.observe.publishers import (
    EventBridgePublisher,
    JsonLinesPublisher,
    MemoryPublisher,
    Publisher,
    PublishError,
    publisher_from_settings,
    read_events,
)

__all__ = [
    "EmfMetrics",
    "EventBridgePublisher",
    "JsonLinesPublisher",
    "MemoryPublisher",
    "Notifier",
    "NotifyOutcome",
    "NotifyResult",
    "PublishError",
    "Publisher",
    "publisher_from_settings",
    "read_events",
]
