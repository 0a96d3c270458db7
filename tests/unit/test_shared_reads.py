"""Shared guard reads (engine/shared_reads.py): a caller is served only by a read that
began after its call, callers waiting together share one read, and a failure reaches
every caller that shared it. Driven with events, no sleeps."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from whimbrel.engine.shared_reads import SharedReads
from whimbrel.testing import wait_until


class Gate:
    """A read that records when it began and waits until the test lets it finish."""

    def __init__(self) -> None:
        self.began: list[int] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.fail = False
        self._lock = threading.Lock()

    def __call__(self, key: str) -> int:
        with self._lock:
            self.began.append(len(self.began))
            n = len(self.began)
        self.started.set()
        assert self.release.wait(10)
        if self.fail:
            raise RuntimeError(f"read {n} failed")
        return n


def test_a_lone_caller_reads_at_once() -> None:
    gate = Gate()
    gate.release.set()
    reads = SharedReads(gate)
    assert reads.read_after("wx") == 1
    assert reads.read_after("wx") == 2  # a later call never takes an earlier read
    assert (reads.reads, reads.served) == (2, 2)


def test_callers_arriving_during_a_read_share_the_next_one() -> None:
    gate = Gate()
    reads = SharedReads(gate)
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(reads.read_after, "wx")
        assert gate.started.wait(10)  # read 1 is in flight
        gate.started.clear()
        later = [pool.submit(reads.read_after, "wx") for _ in range(5)]

        # Every later caller has joined (or leads) the next read before read 1 ends.
        wait_until(lambda: reads.served == 6, timeout=10, interval=0.001,
                   message="the callers never arrived")
        gate.release.set()
        assert first.result(10) == 1
        # The five began waiting after read 1 began: read 1 serves none of them, one
        # read begun after all of them serves them all.
        assert {f.result(10) for f in later} == {2}
    assert reads.reads == 2 and reads.served == 6


def test_other_runs_are_not_shared_and_a_failure_reaches_every_sharer() -> None:
    gate = Gate()
    reads = SharedReads(gate)
    gate.fail = True
    gate.release.set()
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(reads.read_after, key) for key in ("a", "b")]
        for f in futures:
            with pytest.raises(RuntimeError, match="failed"):
                f.result(10)
    assert reads.reads == 2  # one per run
    gate.fail = False
    assert reads.read_after("a") == 3  # a failed read is not kept
