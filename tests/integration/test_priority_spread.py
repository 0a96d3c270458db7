"""The priority shards of ``claimable`` are read a window at a time (issue 29), on
DynamoDB Local: no priority shard is read by every claim (before, every claim read all
4, so their key capped the account's claims at ~6,000/s: docs/benchmarks.md, "Scale"),
yet urgent work still goes before default work — at once in the process that readied
it, within 4 claims in any other.

Which shards a claim reads is taken from the requests it sends (the store's transport
observers see every request), so nothing of the claim is replaced.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.engine.claims import PRIORITY_WINDOW
from whimbrel.store import specs
from whimbrel.testing import StepClock

CLOCK = StepClock

PULL = LauncherSpec.external()
PRIORITY_SHARD = re.compile(r"p\d+")
#: A process's claims after its first read every priority shard within this many.
TURN = specs.PRIORITY_CLAIM_SHARDS // PRIORITY_WINDOW


class PriorityReads:
    """The priority shards named by the requests a client sends (a transport observer),
    per claim."""

    def __init__(self, client: Whimbrel) -> None:
        self.named: set[str] = set()
        self._lock = threading.Lock()
        client.store.transport.observers.append(self)

    def __call__(self, op: str, params: dict[str, Any], _resp: object) -> None:
        if op == "ExecuteStatement" and '"claimable"' in params.get("Statement", ""):
            keys = [p.get("S", "") for p in params.get("Parameters", ())]
        elif op == "Query" and params.get("IndexName") == "claimable":
            keys = [params["ExpressionAttributeValues"][":s"]["S"]]
        else:
            return
        with self._lock:
            self.named.update(k for k in keys if PRIORITY_SHARD.fullmatch(k))

    def take(self) -> set[str]:
        with self._lock:
            named, self.named = self.named, set()
        return named


@pytest.fixture
def other(wb: Whimbrel, clock: StepClock) -> Iterator[Whimbrel]:
    """A second client on the same tables: to a claim, another process (it knows nothing
    of what ``wb`` wrote)."""
    client = Whimbrel(endpoint_url=wb.store.endpoint_url, table_prefix=wb.store.table_prefix,
                      clock=clock)
    yield client
    client.close()


def _backlog(wb: Whimbrel, runs: int, width: int = 8) -> None:
    """``runs`` runs of ``width`` default-priority external activities, all READY."""
    wb.register_workflow(WorkflowDefinition("bulk", tuple(
        ActivityDefinition(f"a{i}", launcher=PULL) for i in range(width))))
    for _ in range(runs):
        wb.start_workflow("bulk")


def test_no_priority_shard_is_read_by_every_claim(wb: Whimbrel, other: Whimbrel) -> None:
    _backlog(wb, runs=25)  # 200 attempts: every window of 4 shards holds some
    reads = PriorityReads(other)
    per_claim = []
    for _ in range(41):
        assert other.claim(workflow_name="bulk") is not None
        per_claim.append(reads.take())
    every = {f"p{i}" for i in range(specs.PRIORITY_CLAIM_SHARDS)}
    # A process's first claim reads them all (it cannot know what waits) ...
    assert per_claim[0] == every
    later = per_claim[1:]
    # ... then each claim reads one group, the groups in turn: any TURN consecutive
    # claims read every priority shard, and each shard is read by one claim in TURN.
    assert all(len(named) == PRIORITY_WINDOW for named in later)
    for i in range(len(later) - TURN + 1):
        assert set().union(*later[i:i + TURN]) == every
    counts = Counter(shard for named in later for shard in named)
    assert set(counts) == every
    assert max(counts.values()) == len(later) // TURN


def test_urgent_work_from_another_process_goes_within_its_turn(
        wb: Whimbrel, other: Whimbrel, clock: StepClock) -> None:
    _backlog(wb, runs=25)
    wb.register_workflow(WorkflowDefinition("urgent", (ActivityDefinition(
        "a", launcher=PULL, priority=0),)))
    assert other.claim() is not None  # its first claim (it read every priority shard)
    waited = []
    for _ in range(2 * TURN):
        clock.advance(1)
        urgent = wb.start_workflow("urgent")
        for n in range(TURN):
            got = other.claim()
            assert got is not None
            if got.workflow_exec_id == urgent:
                waited.append(n)
                break
        else:
            pytest.fail(f"urgent run {urgent} not claimed in {TURN} claims of a process")
    # Every position of the turn was tried: some claims took default work first.
    assert max(waited) > 0


def test_the_process_that_readied_urgent_work_serves_it_at_once(
        wb: Whimbrel, clock: StepClock) -> None:
    _backlog(wb, runs=25)
    wb.register_workflow(WorkflowDefinition("urgent", (ActivityDefinition(
        "a", launcher=PULL, priority=1),)))
    reads = PriorityReads(wb)
    for _ in range(2 * TURN):
        clock.advance(1)
        urgent = wb.start_workflow("urgent")
        reads.take()
        got = wb.claim()
        assert got is not None and got.workflow_exec_id == urgent
        assert len(reads.take()) == specs.PRIORITY_CLAIM_SHARDS  # it read them all
        # With nothing new of its own, its next claim reads one group only.
        assert wb.claim() is not None
        assert len(reads.take()) == PRIORITY_WINDOW
