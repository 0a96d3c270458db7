"""The runs page's counts by state, cached (docs/console.md, "What it costs").

A count of one state reads the keys of its write shards (``count_workflows``: one
Query per shard, ``specs.STATE_SHARDS`` or ``specs.NAME_STATE_SHARDS``), so the counts
of every state are ``len(STATE_ORDER) x 32`` Queries, whatever the number of
definitions. That is too much to repeat on every refresh of every open tab: the counts
load in their own fragment, after the runs, and are kept ``COUNTS_TTL`` seconds per
filter, shared by every tab of this console. With an attribute filter the runs are
read (one listing of at most ``cap`` runs, its states tallied) instead of once per
state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from whimbrel.client.whimbrel import Whimbrel
from whimbrel.contract.errors import StoreError
from whimbrel.contract.states import WorkflowState
from whimbrel.ui import present

#: Seconds counts are served from memory before they are read again.
COUNTS_TTL = 60.0
#: Entries kept at most (one per filter asked for); the oldest go first.
MAX_ENTRIES = 64

Counts = dict[WorkflowState, int]


class CountCache:
    """Counts per filter, read at most once per ``ttl`` seconds: concurrent pages that
    miss the same filter wait for one read instead of each making their own."""

    def __init__(self, ttl: float = COUNTS_TTL,
                 clock: Callable[[], float] = time.monotonic,
                 wait_seconds: float = 15.0) -> None:
        self.ttl, self.clock, self.wait_seconds = ttl, clock, wait_seconds
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, Counts]] = {}
        self._reading: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, read: Callable[[], Counts]) -> tuple[Counts, float]:
        """The counts for ``key`` and when they were read (this cache's clock)."""
        with self._lock:
            hit = self._fresh(key)
            if hit is not None:
                return hit[1], hit[0]
            gate = self._reading.setdefault(key, threading.Lock())
        # Bounded: a read that hangs (DynamoDB not answering) must not hold every page
        # thread that asks for the same counts.
        if not gate.acquire(timeout=self.wait_seconds):
            raise StoreError(f"the counts by state are still being read after "
                             f"{self.wait_seconds:g} s", aws_code=None, retryable=True)
        try:
            with self._lock:
                hit = self._fresh(key)
            if hit is not None:
                return hit[1], hit[0]
            counts, at = read(), self.clock()
            with self._lock:
                self._entries[key] = (at, counts)
                while len(self._entries) > MAX_ENTRIES:
                    self._entries.pop(next(iter(self._entries)))
            return counts, at
        finally:
            gate.release()

    def _fresh(self, key: Hashable) -> tuple[float, Counts] | None:
        hit = self._entries.get(key)
        return hit if hit is not None and self.clock() - hit[0] < self.ttl else None


def read_counts(wb: Whimbrel, *, workflow: str | None, since: str | None,
                until: str | None, attributes: dict[str, Any] | None,
                cap: int) -> Counts:
    """Runs per state under the runs page's filters, each counted up to ``cap``."""
    if attributes:
        # One listing of the attribute's runs (pages of up to ``cap``), tallied by
        # state: a count per state would read the same index once per state.
        counts = dict.fromkeys(present.STATE_ORDER, 0)
        seen, cursor = 0, None
        while seen < cap:
            page = wb.list_workflows(name=workflow, since=since, until=until,
                                     limit=cap - seen, cursor=cursor,
                                     attributes=attributes)
            for wf in page.items:
                counts[wf.state] = counts.get(wf.state, 0) + 1
            seen += len(page.items)
            if page.cursor is None:
                break
            cursor = page.cursor
        return counts
    return {s: wb.count_workflows(name=workflow, state=s, since=since, until=until,
                                  cap=cap)
            for s in present.STATE_ORDER}
