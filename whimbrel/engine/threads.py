"""Handing work to the engine's thread pools: a call handed to a pool that is shut down
(the client closed while an activity it runs still ends, or the interpreter exits) runs
in place instead of raising "cannot schedule new futures"."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
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
