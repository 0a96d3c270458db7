"""Which version a start that names none runs: the latest, read without a hot key.

A name's versions live in one partition of ``workflow_definition``; reading the latest
there on every start put 1 RCU of every start of a definition on one key (3,000 starts/s
at AWS's per-key limit). The store keeps 16 copies of the latest version *number*
(``Store.latest_version`` reads one at random, ``Store.point_latest`` raises them all);
the version itself is parsed once per process. A register raises the copies before it
writes the version, so a copy may name a version that does not exist yet (a register in
flight) or ever (one that died between): the name's partition is read then, and its
latest is what runs. Once a minute per name and process the partition is read anyway and
copies behind it are raised, so a version written without them (by a library from
before them, during a rolling upgrade) is seen within a minute.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.records import DefinitionRecord
from whimbrel.engine.ports import StorePort

#: Seconds between a process's reads of a name's own partition (see the module).
LATEST_RECHECK_SECONDS = 60.0

__all__ = ["LATEST_RECHECK_SECONDS", "LatestVersions"]


class LatestVersions:
    """Resolves "the latest version" of a name for one engine (one process)."""

    def __init__(self, store: StorePort, *,
                 recheck_seconds: float = LATEST_RECHECK_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.recheck_seconds = recheck_seconds
        self._clock = clock
        self._checked: dict[str, float] = {}
        self._lock = threading.Lock()

    def _due(self, name: str) -> bool:
        now = self._clock()
        with self._lock:
            last = self._checked.get(name)
            if last is not None and now - last < self.recheck_seconds:
                return False
            self._checked[name] = now
            return True

    def resolve(self, name: str, parsed: Callable[[int], WorkflowDefinition | None],
                ) -> tuple[int, WorkflowDefinition] | DefinitionRecord | None:
        """The latest version of ``name``: ``(version, definition)`` when ``parsed``
        (this process's cache) has it, else its stored record; None if the name has no
        version."""
        pointed = self.store.cold.latest_version(name)
        if self._due(name):
            item = self.store.cold.latest_definition(name)
            if item is not None and (pointed is None or item.version >= pointed):
                if pointed is None or item.version > pointed:
                    self.store.cold.point_latest(name, item.version)  # copies behind: raise
                return item
        if pointed is not None:
            cached = parsed(pointed)
            if cached is not None:
                return pointed, cached
            item = self.store.cold.get_definition(name, pointed)
            if item is not None:
                return item
        # No copy yet (a table from before them), or one naming a version not written.
        item = self.store.cold.latest_definition(name)
        if item is not None and pointed is None:
            self.store.cold.point_latest(name, item.version)
        return item
