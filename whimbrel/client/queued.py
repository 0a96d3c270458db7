"""An executor that runs nothing until asked: a test's python activities run when it calls
:meth:`Whimbrel.drain` (or :meth:`QueuedExecutor.run_pending`), on its own thread."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["QueuedExecutor"]

T = TypeVar("T")


class QueuedExecutor(Executor):
    """Keeps each submitted call until :meth:`run_pending`. Give it to a client
    (``Whimbrel.in_memory(executor=QueuedExecutor())``) and its python activities run
    only inside ``wb.drain()``, in launch order, on the test's thread: no thread to wait
    for, and the same order every time. (Running them inside ``submit`` instead would run
    an activity while its launcher still holds its lock.)"""

    def __init__(self) -> None:
        self._queue: deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...],
                                 dict[str, Any]]] = deque()
        self._lock = threading.Lock()
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queue.append((future, fn, args, kwargs))
        return future

    def run_pending(self) -> int:
        """Run the queued calls, and those they queue, until none is left; returns how
        many ran (a cancelled one is dropped)."""
        ran = 0
        while True:
            with self._lock:
                if not self._queue:
                    return ran
                future, fn, args, kwargs = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # the future carries it, as a pool's would
                future.set_exception(exc)
            ran += 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                while self._queue:
                    self._queue.popleft()[0].cancel()
