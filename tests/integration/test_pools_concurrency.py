"""Limits hold under concurrency (issue 22): many clients — each its own engine, as
separate processes would be — start runs and claim attempts at once; a pool never has
more attempts running than its slots, a definition never more runs RUNNING than its
``max_running``, nothing is launched twice and nothing is left waiting."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.pools import run_pool
from whimbrel.testing import RecordingLauncher, wait_until

CLIENTS = 6
RUNS_PER_CLIENT = 5


class Gauge:
    """How many are inside at once, and the most ever."""

    def __init__(self) -> None:
        self.now = self.most = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


@pytest.fixture
def clients(ddb_endpoint: str, table_prefix: str,
            launched: RecordingLauncher) -> Iterator[Callable[[], Whimbrel]]:
    made: list[Whimbrel] = []

    def make() -> Whimbrel:
        wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                      launchers={"lambda": launched})
        made.append(wb)
        return wb

    yield make
    for wb in made:
        wb.close()


def _all(fn: Callable[[int], object], n: int) -> None:
    with ThreadPoolExecutor(n) as pool:
        for f in [pool.submit(fn, i) for i in range(n)]:
            f.result()


def test_a_pool_of_three_never_runs_four_under_concurrent_starts_and_claims(
        wb: Whimbrel, clients: Callable[[], Whimbrel]) -> None:
    wb.set_pool("gpu", slots=3, per_second=None)
    wb.register_workflow(WorkflowDefinition("train", (ActivityDefinition(
        "a", launcher=LauncherSpec.external(), pool="gpu"),)))
    engines = [clients() for _ in range(CLIENTS)]
    runs: list[str] = []
    lock = threading.Lock()

    def start(i: int) -> None:
        for _ in range(RUNS_PER_CLIENT):
            wx = engines[i].start_workflow("train")
            with lock:
                runs.append(wx)

    _all(start, CLIENTS)
    assert wb.get_pool("gpu").in_use == 3
    gauge = Gauge()
    done: list[str] = []

    def work(i: int) -> None:
        me = engines[i]
        while True:
            with lock:
                if len(done) == len(runs):
                    return
            claimed = me.claim(workflow_name="train")
            if claimed is None:
                continue  # the others hold the slots; their ends let the next in
            gauge.enter()  # from its claim to its end it holds a slot: at most 3 inside
            assert me.get_activity(claimed.activity_exec_id).pool_slot is not None
            gauge.leave()  # before the end: the end gives the slot to a waiter
            me.transition_activity(claimed.activity_exec_id, Transition.COMPLETED,
                                   output={"by": i})
            with lock:
                done.append(claimed.activity_exec_id)

    _all(work, CLIENTS)
    assert gauge.most <= 3
    assert len(set(done)) == len(runs) == CLIENTS * RUNS_PER_CLIENT
    assert {wb.get_workflow(wx).state for wx in runs} == {WorkflowState.COMPLETED}
    info = wb.get_pool("gpu")
    assert (info.in_use, info.waiting) == (0, 0)


def test_max_running_two_never_runs_three_under_concurrent_starts(
        wb: Whimbrel, clients: Callable[[], Whimbrel], launched: RecordingLauncher) -> None:
    wb.register_workflow(WorkflowDefinition("etl", (ActivityDefinition(
        "a", launcher=LauncherSpec("lambda", {"function": "f"})),), max_running=2))
    engines = [clients() for _ in range(CLIENTS)]
    runs: list[str] = []
    lock = threading.Lock()

    def start(i: int) -> None:
        for _ in range(RUNS_PER_CLIENT):
            wx = engines[i].start_workflow("etl")
            with lock:
                runs.append(wx)

    _all(start, CLIENTS)
    states = [wb.get_workflow(wx).state for wx in runs]
    assert states.count(WorkflowState.RUNNING) == 2
    assert states.count(WorkflowState.QUEUED) == len(runs) - 2
    finished: set[str] = set()

    def running() -> int:
        return sum(wb.store.get_workflow(wx).state is WorkflowState.RUNNING  # type: ignore[union-attr]
                   for wx in runs)

    def finish(i: int) -> None:
        while True:
            with lock:
                if len(finished) == len(runs):
                    return
                todo = [r for r in launched.take()]
            for req in todo:
                engines[i].transition_activity(req.activity_exec_id, Transition.RUNNING)
                engines[i].transition_activity(req.activity_exec_id, Transition.COMPLETED)
                with lock:
                    finished.add(req.workflow_exec_id)

    most = 0
    with ThreadPoolExecutor(CLIENTS + 1) as pool:
        futures = [pool.submit(finish, i) for i in range(CLIENTS)]

        def settled() -> bool:
            nonlocal most
            most = max(most, running())
            return all(f.done() for f in futures)

        wait_until(settled, timeout=120, interval=0.01, message="every run finished")
        for f in futures:
            f.result()
    assert most <= 2
    assert {wb.get_workflow(wx).state for wx in runs} == {WorkflowState.COMPLETED}
    assert launched.doubled() == []
    assert wb.store.pools.held_slots(run_pool("etl"), 2) == []
    assert wb.store.pools.waiter_heads(run_pool("etl")) == []


def test_a_keyed_pool_of_two_never_runs_three_of_one_tenant_under_concurrency(
        wb: Whimbrel, clients: Callable[[], Whimbrel]) -> None:
    """Issue 29 item 5: 6 clients start runs of 3 tenants and claim at once; each tenant
    never has more than its 2 slots inside, all tenants together up to 6."""
    wb.set_pool("export", slots=2, per_second=None)
    wb.register_workflow(WorkflowDefinition("export", (ActivityDefinition(
        "a", launcher=LauncherSpec.external(), pool="export", pool_key="input.tenant"),)))
    engines = [clients() for _ in range(CLIENTS)]
    runs: dict[str, str] = {}
    lock = threading.Lock()

    def start(i: int) -> None:
        for j in range(RUNS_PER_CLIENT):
            tenant = f"t{(i + j) % 3}"
            wx = engines[i].start_workflow("export", {"tenant": tenant})
            with lock:
                runs[wx] = tenant

    _all(start, CLIENTS)
    assert [wb.get_pool(f"export~t{k}").in_use for k in range(3)] == [2, 2, 2]
    gauges = {f"t{k}": Gauge() for k in range(3)}
    done: list[str] = []

    def work(i: int) -> None:
        me = engines[i]
        while True:
            with lock:
                if len(done) == len(runs):
                    return
            claimed = me.claim(workflow_name="export")
            if claimed is None:
                continue
            gauge = gauges[runs[claimed.workflow_exec_id]]
            gauge.enter()
            assert me.get_activity(claimed.activity_exec_id).pool_slot is not None
            gauge.leave()
            me.transition_activity(claimed.activity_exec_id, Transition.COMPLETED)
            with lock:
                done.append(claimed.activity_exec_id)

    _all(work, CLIENTS)
    assert max(g.most for g in gauges.values()) <= 2
    assert len(set(done)) == len(runs) == CLIENTS * RUNS_PER_CLIENT
    assert {wb.get_workflow(wx).state for wx in runs} == {WorkflowState.COMPLETED}
    for k in range(3):
        info = wb.get_pool(f"export~t{k}")
        assert (info.in_use, info.waiting) == (0, 0)
