"""Guard reads of one run, shared by the callers of one process.

A guard creates its row first and reads the run second (a cancel that landed before the
read is seen; one that lands after it lists the row). Any consistent read of the run
that *began* after the row was created will do, so callers for one run share reads: a
caller joins the next read if it has not begun yet; otherwise it becomes that next
read's leader, which waits for the read in flight (while more callers join) and then
reads for all of them. One run's wide map run by one process thus reads the run's item
about once per round trip instead of once per item — the run's one item is a single
partition-key value (3,000 consistent 4 KB reads a second on AWS). Alone, a caller
reads at once, as before; a busy run costs it at most the read in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedReads(Generic[T]):
    """``read_after(key)``: the result of ``read(key)`` begun after the call was made."""

    def __init__(self, read: Callable[[str], T]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._next: dict[str, Future[T]] = {}  # the next read of a key, not begun yet
        self._busy: dict[str, Future[T]] = {}  # the read of a key in flight
        #: Reads made and callers served (a measure of the sharing).
        self.reads = 0
        self.served = 0

    def read_after(self, key: str) -> T:
        """A read of ``key`` that begins after this call does (shared; see the module).

        Raises:
            whatever ``read`` raises (to every caller that shared it).
        """
        with self._lock:
            self.served += 1
            mine = self._next.get(key)
            lead = mine is None
            if mine is None:
                mine = self._next[key] = Future()
            busy = self._busy.get(key) if lead else None
        if not lead:
            return mine.result()
        if busy is not None:
            wait([busy])  # callers arriving meanwhile join ``mine``
        with self._lock:
            del self._next[key]  # begun: later callers wait for the next one
            self._busy[key] = mine
            self.reads += 1
        try:
            mine.set_result(self._read(key))
        except BaseException as exc:
            mine.set_exception(exc)
        finally:
            with self._lock:
                if self._busy.get(key) is mine:
                    del self._busy[key]
        return mine.result()
