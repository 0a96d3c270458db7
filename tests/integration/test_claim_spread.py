"""``claim`` spreads workers over the shards (issue 19, item 4b), measured on DynamoDB
Local: N workers claiming at once, from a backlog and from a trickle of as many new
attempts as workers, each lost conditional write (a worker that read a candidate
another took first) counted, with the claim reading a window of shards at a random
offset (today) against every shard at once (before). The figures (``-s`` prints them)
are in docs/benchmarks.md, "Claims".

A lost claim is a conditional UpdateItem of ``activity_exec`` that failed: the store's
write hooks run before every write and after every write that landed, so the losses
are the difference. Each worker is a client of its own (to a claim, another process):
the threads of one process never race each other for an attempt (engine/claims.py).

The clock stands still (``CLOCK = StepClock``): every attempt of a backlog started in a
burst is an equal in serving order however long the machine takes to write it, so the
figures do not depend on the machine's load.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.engine import claims as claiming
from whimbrel.store import specs
from whimbrel.testing import StepClock

CLOCK = StepClock

WORKERS = 8
RUNS = 20
ROUNDS = 6
#: Per claim in the backlog: at most this many lost writes on average with the window
#: (seen 0.04-0.10 on an idle machine and under the full suite).
MAX_LOST_PER_CLAIM = 0.25
#: The same for the baseline that reads every shard: all workers see one candidate set
#: (0.29 was seen on a loaded CI machine before the clock stood still: its starts spread
#: over several seconds, so every worker went for the same oldest few).
MAX_LOST_PER_CLAIM_EVERY_SHARD = 1.0


@dataclass
class Figures:
    claims: int
    lost: int
    queries: int

    @property
    def lost_per_claim(self) -> float:
        return self.lost / self.claims

    @property
    def queries_per_claim(self) -> float:
        return self.queries / self.claims


class Workers:
    """WORKERS clients on ``wb``'s tables, one per worker, with one write counter."""

    def __init__(self, wb: Whimbrel, clock: StepClock) -> None:
        self.writes = _Writes()
        self.clients = [Whimbrel(endpoint_url=wb.store.endpoint_url,
                                 table_prefix=wb.store.table_prefix, clock=clock)
                        for _ in range(WORKERS)]
        for client in self.clients:
            client.store.write_hooks.append(self.writes)

    def reset(self) -> None:
        for client in self.clients:
            client.meter.reset()

    def queries(self) -> int:
        return sum(c.meter.calls["Query"] + c.meter.calls["ExecuteStatement"]
                   for c in self.clients)

    def close(self) -> None:
        for client in self.clients:
            client.close()


@pytest.fixture
def workers(wb: Whimbrel, clock: StepClock) -> Iterator[Workers]:
    made = Workers(wb, clock)
    yield made
    made.close()


class _Writes:
    """Counts conditional claim writes sent and landed (a store write hook)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, phase: str, operation: str, table: str) -> None:
        if operation == "UpdateItem" and table == "activity_exec":
            with self._lock:
                self.counts[phase] += 1


def _backlog(wb: Whimbrel, name: str, runs: int, width: int) -> None:
    wb.register_workflow(WorkflowDefinition(name, tuple(
        ActivityDefinition(f"a{i}", launcher=LauncherSpec.external()) for i in range(width))))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: wb.start_workflow(name), range(runs)))


def _claim_all(workers: Workers, name: str) -> Figures:
    """Every worker claims (and completes) until nothing is left; the figures of the
    claims alone (a completion's write never loses here: one actor per attempt)."""
    workers.reset()
    gate = threading.Barrier(WORKERS)
    claimed: list[int] = []

    def worker(client: Whimbrel) -> None:
        n = 0
        gate.wait()
        while (act := client.claim(workflow_name=name)) is not None:
            n += 1
            client.transition_activity(act.activity_exec_id, "COMPLETED")
        claimed.append(n)

    with ThreadPoolExecutor(WORKERS) as pool:
        for f in [pool.submit(worker, c) for c in workers.clients]:
            f.result()
    claims = sum(claimed)
    lost = workers.writes.counts["before"] - workers.writes.counts["after"]
    return Figures(claims, lost, workers.queries())


@pytest.mark.parametrize("window", [claiming.CLAIM_WINDOW, specs.CLAIM_SHARDS],
                         ids=["window", "every-shard"])
def test_workers_claiming_at_once_rarely_race_for_one_attempt(
        wb: Whimbrel, workers: Workers, window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claiming, "CLAIM_WINDOW", window)
    _backlog(wb, "spread", runs=RUNS, width=8)
    figures = _claim_all(workers, "spread")
    assert figures.claims == RUNS * 8  # each attempt claimed once, by one worker
    print(f"\nclaim window {window} of {specs.CLAIM_SHARDS} shards, {WORKERS} workers, "
          f"{figures.claims} claims: {figures.lost} lost writes "
          f"({figures.lost_per_claim:.3f} per claim), "
          f"{figures.queries_per_claim:.1f} reads of claimable per claim")
    assert figures.lost_per_claim <= (MAX_LOST_PER_CLAIM if window < specs.CLAIM_SHARDS
                                      else MAX_LOST_PER_CLAIM_EVERY_SHARD)
    if window < specs.CLAIM_SHARDS:
        # A claim in a backlog reads its window (and the rest only when the window is
        # empty: at the tail of the backlog), not every shard.
        assert figures.queries_per_claim < specs.CLAIM_SHARDS / 2


def _trickle(wb: Whimbrel, workers: Workers, name: str, rounds: int) -> Figures:
    """Rounds of WORKERS new attempts and WORKERS workers polling at once, one claim
    each: the case where every worker sees the same few candidates."""
    wb.register_workflow(WorkflowDefinition(name, (ActivityDefinition(
        "a", launcher=LauncherSpec.external()),)))
    claims = queries = 0
    with ThreadPoolExecutor(WORKERS) as pool:
        for _ in range(rounds):
            list(pool.map(lambda _: wb.start_workflow(name), range(WORKERS)))
            workers.reset()
            gate = threading.Barrier(WORKERS)

            def poll(client: Whimbrel, gate: threading.Barrier = gate) -> int:
                gate.wait()
                return 1 if client.claim(workflow_name=name) is not None else 0
            claims += sum(pool.map(poll, workers.clients))
            queries += workers.queries()
            while (act := wb.claim(workflow_name=name)) is not None:  # what is left
                wb.transition_activity(act.activity_exec_id, "COMPLETED")
    lost = workers.writes.counts["before"] - workers.writes.counts["after"]
    return Figures(claims, lost, queries)


@pytest.mark.parametrize("window", [claiming.CLAIM_WINDOW, specs.CLAIM_SHARDS],
                         ids=["window", "every-shard"])
def test_workers_polling_a_trickle_all_find_work(wb: Whimbrel, workers: Workers, window: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claiming, "CLAIM_WINDOW", window)
    figures = _trickle(wb, workers, "trickle", rounds=ROUNDS)
    print(f"\ntrickle, claim window {window}: {figures.claims} claims, {figures.lost} lost "
          f"writes ({figures.lost_per_claim:.3f} per claim), "
          f"{figures.queries_per_claim:.1f} reads of claimable per claim")
    # As many attempts as workers: every worker gets one. One whose window's candidates
    # others took goes on to the other shards instead of returning empty-handed.
    assert figures.claims == WORKERS * ROUNDS
    # Bounded races. Every worker that reads every shard sees the same candidates: 8
    # workers each trying 8 in a random order lose about one write per claim (seen:
    # 0.9-1.2); a window shows each worker a different few (seen: 0.4-0.75).
    assert figures.lost_per_claim < (1.5 if window == specs.CLAIM_SHARDS else 1.0)


def test_the_threads_of_one_process_never_race_each_other(wb: Whimbrel) -> None:
    """Threads of one client claiming from one backlog: a thread skips an attempt
    another is claiming or took, so no claim write of the process loses (each would be
    billed a WCU: the scale benchmark's 8 threads lost 0.07-0.17 per claim before)."""
    _backlog(wb, "alone", runs=RUNS, width=8)
    writes = _Writes()
    wb.store.write_hooks.append(writes)
    gate = threading.Barrier(WORKERS)

    def worker() -> int:
        n = 0
        gate.wait()
        while (act := wb.claim(workflow_name="alone")) is not None:
            n += 1
            wb.transition_activity(act.activity_exec_id, "COMPLETED")
        return n

    with ThreadPoolExecutor(WORKERS) as pool:
        claimed = sum(f.result() for f in [pool.submit(worker) for _ in range(WORKERS)])
    assert claimed == RUNS * 8
    assert writes.counts["before"] - writes.counts["after"] == 0
