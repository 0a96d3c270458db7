"""The engine's thread pools (:class:`Threads`, a part of the engine). A call handed to
a pool that is shut down (the client closed while an activity it runs still ends, or the
interpreter exits) runs in place instead of raising "cannot schedule new futures"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

T = TypeVar("T")


def submit_or_run(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> Future[T]:
    """``pool.submit``, or, once the pool is shut down (the client closed while an
    activity it runs still ends, or the interpreter exits), the call here and now: an
    activity's end is recorded, never lost to "cannot schedule new futures"."""
    try:
        return pool.submit(fn, *args)
    except RuntimeError:
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args))
        except BaseException as exc:  # the caller's .result() raises it, as from the pool
            done.set_exception(exc)
        return done


#: From this many dependents on, one completion readies and launches them in parallel.
PARALLEL_FANOUT = 8

R = TypeVar("R")


class Threads:
    """The engine's thread pools (a part of the engine): reads overlapped with writes,
    a start's independent writes, and wide fan-outs."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="whimbrel-io")
        # Wide fan-outs: one completion readies and launches many dependents. Their
        # writes are independent, so they go out in parallel (a separate pool: the
        # caller waits on it, and nothing running on it waits on another task).
        self._fanout = ThreadPoolExecutor(max_workers=16, thread_name_prefix="whimbrel-fanout")

    def each(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(x) for x in items]``, in parallel once a fan-out is wide enough to gain.

        Narrow fan-outs stay in this thread, in order (the crash-point tests count on a
        deterministic write order for them). Every call finishes before this returns;
        the first exception is then raised.
        """
        if len(items) < PARALLEL_FANOUT:
            return [fn(x) for x in items]
        futures = [submit_or_run(self._fanout, fn, x) for x in items]
        wait(futures)
        return [f.result() for f in futures]

    def in_background(self, fn: Callable[[str], T], arg: str) -> Future[T]:
        """Run a read on the engine's I/O pool, to overlap it with a write."""
        return submit_or_run(self._pool, fn, arg)

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run independent writes on the engine's I/O pool (a start's phase one)."""
        return submit_or_run(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._fanout.shutdown(wait=False)
