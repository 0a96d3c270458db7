"""Long code runs (issue 26): a decision reads only what is new and runs only the code
past the last wait, so the reads per step stay flat as a sequential run grows (the CPU
curve at 100 / 1,000 / 10,000 steps is the ``code`` benchmark's, docs/benchmarks.md)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
import wb_code_workflows as code

from whimbrel import ActivityState, Whimbrel, WorkflowContext, WorkflowState, workflow
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.testing import wait_until

READS = ("GetItem", "Query", "BatchGetItem", "Scan")


class RunReads:
    """The reads of one run's rows made by the engine's threads (not the test's own
    polling in ``wait``)."""

    def __init__(self) -> None:
        self.wx = ""
        self.count: Counter[str] = Counter()
        self._main = threading.main_thread()
        self._lock = threading.Lock()

    def __call__(self, operation: str, params: dict[str, Any],
                 response: dict[str, Any] | None) -> None:
        if operation not in READS or threading.current_thread() is self._main:
            return
        if self.wx and self.wx in repr(params.get("Key") or params.get(
                "ExpressionAttributeValues") or params):
            with self._lock:
                self.count[operation] += 1


def _chain_reads(wb: Whimbrel, steps: int) -> Counter[str]:
    reads = RunReads()
    wb.store.tables.client.observers.append(reads)
    try:
        reads.wx = workflow_exec_id_for(f"long-{steps}")
        wx = wb.start_workflow("chain", {"n": 0, "steps": steps}, request_id=f"long-{steps}")
        assert wx == reads.wx
        run = wb.wait(wx, timeout=120)
    finally:
        wb.store.tables.client.observers.remove(reads)
    assert run.state is WorkflowState.COMPLETED, run
    assert run.output == {"n": steps}
    return reads.count


@pytest.mark.parametrize("always_replay", [False, True])
def test_reads_per_step_stay_flat_as_a_sequential_run_grows(wb: Whimbrel,
                                                            always_replay: bool) -> None:
    wb.engine.feature(CodeRuns).always_replay = always_replay
    wb.register_workflow(code.chain)
    small, large = _chain_reads(wb, 10), _chain_reads(wb, 40)
    per_step = [sum(c.values()) / n for c, n in ((small, 10), (large, 40))]
    if always_replay:  # every decision reads the run's partition: it grows with the run
        assert large["Query"] > 3 * small["Query"] >= 30, (small, large)
        return
    # In memory: each step's follow-up reads the run's item (and the step's row only
    # when the stream brought no picture of it); nothing reads the history again.
    assert large["Query"] <= 2 and small["Query"] <= 2, (small, large)
    assert 1.0 <= per_step[1] <= 1.5, (per_step, large)  # 1.0 measured
    assert per_step[1] <= per_step[0] + 0.25, (per_step, small, large)


@workflow("ticks")
def ticks(ctx: WorkflowContext, input: dict[str, Any]) -> int:
    """``steps`` external steps one after the other; the test completes each."""
    return sum(int(ctx.step("tick", i)) for i in range(input["steps"]))


def _ready(wb: Whimbrel, aeid: str) -> None:
    wait_until(lambda: (act := wb.store.get_activity(aeid)) is not None
               and act.state is ActivityState.READY, timeout=30,
               message=lambda: f"{aeid} never READY: {wb.store.get_activity(aeid)}")


def test_two_processes_deciding_in_turn_schedule_each_step_once(
        wb: Whimbrel, ddb_endpoint: str, table_prefix: str) -> None:
    # Each keeps the run's function running between its own decisions; the other's
    # decisions in between leave it behind, and it catches up from the table.
    other = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    try:
        for client in (wb, other):
            client.register_workflow(ticks)
        wx = wb.start_workflow("ticks", {"steps": 8})
        for k in range(1, 9):
            aeid = f"{wx}:tick#{k}:1"
            _ready(wb, aeid)
            client = (wb, other)[k % 2]
            client.transition_activity(aeid, "RUNNING")
            client.transition_activity(aeid, "COMPLETED", output=k)
        run = wb.wait(wx, timeout=30)
    finally:
        other.close()
    assert run.state is WorkflowState.COMPLETED, run
    assert run.output == sum(range(1, 9))
    assert [(a.activity_name, a.attempt) for a in run.activities] == [
        (f"tick#{k}", 1) for k in range(1, 9)]


@workflow("many")
def many(ctx: WorkflowContext, input: dict[str, Any]) -> list[Any]:
    return ctx.map(code.add_one, [{"n": i} for i in range(input["n"])],
                   max_concurrency=input["lanes"])


def test_a_map_of_a_few_hundred_items_returns_their_outputs_in_order(wb: Whimbrel) -> None:
    # One map step; its items chain in lanes as a DAG map's, no decision per item.
    wb.register_workflow(many)
    wx = wb.start_workflow("many", {"n": 300, "lanes": 20})
    run = wb.wait(wx, timeout=300)
    assert run.state is WorkflowState.COMPLETED, run
    assert run.output == [{"n": i + 1} for i in range(300)]
    assert [a.activity_name for a in run.activities] == ["add_one#1"]
    items = run.map_items("add_one#1")
    assert sorted(items) == list(range(300))
    assert all(a.attempt == 1 for a in items.values())
