"""What the hooks after a move share instead of reading again: a run's workflow item
(:class:`RunRead`) and its attempt rows (:class:`RunRows`), each read at most once.
Re-exported by :mod:`whimbrel.engine.feature`; kept below it and below the core's parts
(``core_parts.py`` names them in ``Flow``'s signatures)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

from whimbrel.contract.records import ActivityRecord, WorkflowRecord

__all__ = ["RunRead", "RunRows"]


class RunRead:
    """The workflow item of an attempt's run, read at most once (or taken from a read
    started ahead): the hooks after a move share it, so no feature reads it again."""

    def __init__(self, read: Callable[[], WorkflowRecord],
                 started: Future[WorkflowRecord] | None = None) -> None:
        self._read = read
        self._started = started
        self._value: WorkflowRecord | None = None

    def get(self) -> WorkflowRecord:
        if self._value is None:
            self._value = self._started.result() if self._started is not None \
                else self._read()
        return self._value

    def cancel(self) -> None:
        """Not needed after all: a read started ahead is cancelled."""
        if self._started is not None and self._value is None:
            self._started.cancel()


class RunRows:
    """A run's attempt rows, listed at most once for the moves that share it: the
    dependents one completion releases (``flow.after_completed``) are each decided by
    a ``when`` from one listing, however many they are. Taken after every release of
    that completion, it holds each released dependent's upstreams as they ended (a
    dependent released with it is never one of them: its edge would still be there)."""

    def __init__(self, read: Callable[[], list[ActivityRecord]]) -> None:
        self._read = read
        self._lock = threading.Lock()  # parallel dependents wait for the one listing
        self._rows: list[ActivityRecord] | None = None

    def get(self) -> list[ActivityRecord]:
        with self._lock:
            if self._rows is None:
                self._rows = self._read()
            return self._rows
