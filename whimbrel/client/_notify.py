"""Events and metrics on the public facade (mixed into :class:`whimbrel.Whimbrel`)."""

from __future__ import annotations

from whimbrel.engine import Engine
from whimbrel.observe.notify import Notifier
from whimbrel.observe.publishers import Publisher
from whimbrel.store.store import Store


class Notifications:
    """The notify consumer over this client's tables."""

    engine: Engine
    store: Store

    def notifier(self, publisher: Publisher) -> Notifier:
        """The adapter the ``notify`` handler runs on each stream record of
        ``workflow_exec``, ``activity_exec`` and ``map_item``: it publishes each event through
        ``publisher`` exactly once (docs/events.md)."""
        return Notifier(self.engine, self.store.markers, publisher)
