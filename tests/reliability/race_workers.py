"""Code run in separate processes by test_races.py (importable by spawned children),
and the write rendezvous its thread races use to prove the race happened."""

from __future__ import annotations

import threading
import time
from typing import Any

from whimbrel import Whimbrel
from whimbrel.contract.errors import WhimbrelError
from whimbrel.contract.states import Transition
from whimbrel.testing import wait_until


def claim_until_done(endpoint: str, prefix: str, workflow_name: str,
                     workflow_ids: list[str], barrier: Any, deadline_s: float) -> list[str]:
    """Claim and complete activities until every workflow has finished."""
    wb = Whimbrel(endpoint_url=endpoint, table_prefix=prefix)
    claimed: list[str] = []
    barrier.wait()
    deadline = time.monotonic() + deadline_s

    def work_or_done() -> Any:
        """Something claimed, "done" once every workflow has finished, else None."""
        got = wb.claim(workflow_name=workflow_name)
        if got is not None:
            return got
        return "done" if all(
            wb.engine.reads.get_workflow(wx, with_activities=False).state.is_terminal
            for wx in workflow_ids) else None

    try:
        while True:
            try:  # an idle worker polls every 10 ms until its deadline
                got = wait_until(work_or_done, timeout=max(0.0, deadline - time.monotonic()),
                                 interval=0.01)
            except AssertionError:
                break  # the deadline: the caller's assertions say what is missing
            if got == "done":
                break
            claimed.append(got.activity_exec_id)
            wb.transition_activity(got.activity_exec_id, Transition.COMPLETED, output=len(claimed))
    finally:
        wb.close()
    return claimed


def move_once(endpoint: str, prefix: str, aeids: list[str], transition: str,
              barrier: Any) -> list[str]:
    """Try ``transition`` on each id right after the others are ready; report each result."""
    wb = Whimbrel(endpoint_url=endpoint, table_prefix=prefix)
    out: list[str] = []
    try:
        for aeid in aeids:
            barrier.wait()
            try:
                wb.transition_activity(aeid, Transition(transition))
                out.append("won")
            except WhimbrelError as exc:
                out.append(type(exc).__name__)
    finally:
        wb.close()
    return out


class WriteRendezvous:
    """A store write hook that makes a race happen, and says whether it did.

    The first write to ``table`` of each of ``parties`` threads waits (before it is
    sent) until every party has reached its own: both contenders then send their
    conditional writes for the contested row at the same moment, and DynamoDB picks one.
    :attr:`met` counts the parties that got through together: a round where a contender
    never wrote (refused before it reached the store, or it wrote nothing) leaves it
    below ``parties`` after the barrier's ``timeout``. Call :meth:`reset` between rounds.
    """

    def __init__(self, parties: int, table: str, timeout: float = 15.0) -> None:
        self.parties = parties
        self.table = table
        self.timeout = timeout
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._barrier = threading.Barrier(self.parties, timeout=self.timeout)
            self._seen: set[int] = set()
            self.met = 0

    def __call__(self, phase: str, operation: str, table: str) -> None:
        if phase != "before" or not table.endswith(self.table):
            return
        me = threading.get_ident()
        with self._lock:
            if me in self._seen:
                return  # only a thread's first write to the table is contested
            self._seen.add(me)
            barrier = self._barrier
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return
        with self._lock:
            self.met += 1


def start_runs(endpoint: str, prefix: str, workflow_name: str, n: int,
               barrier: Any) -> list[str]:
    """Start ``n`` runs right after the other processes are ready (issue 22's pools)."""
    wb = Whimbrel(endpoint_url=endpoint, table_prefix=prefix)
    try:
        barrier.wait()
        return [wb.start_workflow(workflow_name) for _ in range(n)]
    finally:
        wb.close()


def end_early_once(endpoint: str, prefix: str, aeids: list[str], barrier: Any) -> list[str]:
    """End each run early from its attempt right after the other processes are ready
    (issue 31): "won" when this call ended the run, "lost" when another end came first."""
    from whimbrel.engine.conditions import Conditions

    wb = Whimbrel(endpoint_url=endpoint, table_prefix=prefix)
    out: list[str] = []
    try:
        for aeid in aeids:
            barrier.wait()
            try:
                moved = wb.engine.feature(Conditions).end_early(aeid, {"by": aeid})
                out.append("won" if moved.ends_workflow else "lost")
            except WhimbrelError as exc:
                out.append(type(exc).__name__)
    finally:
        wb.close()
    return out
