"""A code workflow's decision runs only where the code is (issue 26, "Code runs where the
code is"): a process that is not a worker for the workflow leaves the decision claimable
(engine/code_handoff.py); a worker for it — the client that registered it, or
``run_worker`` for its module — takes it and decides. On DynamoDB Local, two clients of
the same tables in this process: ``other`` never registers nor starts the workflow, so
it is no worker for it (its ``WorkerScope`` is empty) even though it could import it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import wb_code_workflows as code
import wb_test_activities as acts

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    LauncherSpec,
    Whimbrel,
    WorkflowContext,
    WorkflowDefinition,
    WorkflowState,
    workflow,
)
from whimbrel.contract.records import REMOVE
from whimbrel.engine.code_handoff import entry_id, leave
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.testing import wait_until

W = WorkflowState
A = ActivityState


def until(what: Callable[[], Any], seconds: float = 30.0) -> Any:
    return wait_until(what, timeout=seconds, interval=0.02, message=f"not within {seconds} s")


def client(ddb_endpoint: str, table_prefix: str) -> Whimbrel:
    return Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)


@pytest.fixture
def other(wb: Whimbrel, ddb_endpoint: str, table_prefix: str) -> Iterator[Whimbrel]:
    """A second client of ``wb``'s tables that registers and starts nothing."""
    second = client(ddb_endpoint, table_prefix)
    yield second
    second.close()


def state_of(wb: Whimbrel, aeid: str) -> ActivityState | None:
    row = wb.engine.store.get_activity(aeid)
    return None if row is None else row.state


def drive_signals(by: Whimbrel, wx: str) -> None:
    """What ``code.signals`` waits for, done by ``by``: the gate step completed, then
    three signals, each sent once its wait is READY (a decision made it)."""
    gate = f"{wx}:gate#1:1"
    until(lambda: state_of(by, gate) is A.READY)
    by.transition_activity(gate, "RUNNING")
    by.transition_activity(gate, "COMPLETED")
    until(lambda: state_of(by, f"{wx}:signal-paid#1:1") is A.READY)
    by.signal(wx, "paid", 1)
    until(lambda: state_of(by, f"{wx}:signal-shipped#1:1") is A.READY)
    by.signal(wx, "shipped", 3)
    until(lambda: state_of(by, f"{wx}:signal-paid#2:1") is A.READY)
    by.signal(wx, "paid", 2)


def test_decisions_another_client_asks_for_run_in_the_client_that_registered(
        wb: Whimbrel, other: Whimbrel) -> None:
    wb.register_workflow(code.signals)
    wx = wb.start_workflow("signals")
    drive_signals(other, wx)  # each step's end and signal applied in `other`
    run = until(lambda: (r := wb.get_workflow(wx)).state is W.COMPLETED and r)
    assert run.output == [1, 2, 3]
    asked, worker = other.engine.feature(CodeRuns), wb.engine.feature(CodeRuns)
    assert asked.decisions == 0  # it could import the code, but is no worker for it
    assert asked.left == 4  # the gate's end, then each of the three signals
    assert worker.decisions >= 5  # the start, and each decision left for it
    # the run's listing shows its steps only, not the decisions' entries
    assert sorted(a.activity_name for a in run.activities) == [
        "gate#1", "signal-paid#1", "signal-paid#2", "signal-shipped#1"]


def test_a_run_with_no_worker_waits_then_completes_when_a_worker_starts(
        wb: Whimbrel, other: Whimbrel, ddb_endpoint: str, table_prefix: str) -> None:
    starter = client(ddb_endpoint, table_prefix)
    starter.register_workflow(code.signals)
    wx = starter.start_workflow("signals")
    gate = f"{wx}:gate#1:1"
    until(lambda: state_of(other, gate) is A.READY)
    starter.close()  # no longer a worker: nobody is one now

    other.transition_activity(gate, "RUNNING")
    other.transition_activity(gate, "COMPLETED")
    entry = entry_id(wx, gate)
    assert other.engine.feature(CodeRuns).left == 1
    assert state_of(other, entry) is A.READY  # left claimable for a worker
    # the run waits, neither failed nor advanced: the code has not decided past the gate
    assert other.get_workflow(wx).state is W.RUNNING
    assert state_of(other, f"{wx}:signal-paid#1:1") is None
    # a redelivered step end leaves no second entry
    running = other.engine.store.get_workflow(wx)
    assert running is not None
    assert not leave(other.engine, running, other.get_definition("signals"),  # type: ignore[arg-type]
                     gate)

    worker = client(ddb_endpoint, table_prefix)
    thread = threading.Thread(target=worker.run_worker, args=(["wb_code_workflows"],),
                              daemon=True)
    thread.start()
    try:
        until(lambda: state_of(other, f"{wx}:signal-paid#1:1") is A.READY)
        until(lambda: state_of(other, entry) is A.COMPLETED)  # taken, by the worker
        other.signal(wx, "paid", 1)
        until(lambda: state_of(other, f"{wx}:signal-shipped#1:1") is A.READY)
        other.signal(wx, "shipped", 3)
        until(lambda: state_of(other, f"{wx}:signal-paid#2:1") is A.READY)
        other.signal(wx, "paid", 2)
        run = until(lambda: (r := other.get_workflow(wx)).state is W.COMPLETED and r)
        assert run.output == [1, 2, 3]
        assert other.engine.feature(CodeRuns).decisions == 0
        assert worker.engine.feature(CodeRuns).decisions >= 4
    finally:
        worker.stop()
        thread.join(30)
        worker.close()
    assert not thread.is_alive()


def test_a_closing_client_leaves_its_decisions_for_a_worker(
        wb: Whimbrel, ddb_endpoint: str, table_prefix: str) -> None:
    """A client whose ``close()`` began is no worker (its scope is closed): what it
    advances from then on is left, not decided."""
    starter = client(ddb_endpoint, table_prefix)
    starter.register_workflow(code.signals)
    wx = starter.start_workflow("signals")
    gate = f"{wx}:gate#1:1"
    until(lambda: state_of(starter, gate) is A.READY)
    runs = starter.engine.feature(CodeRuns)
    made = runs.decisions
    starter._python.scope.close()  # what close() does first
    starter.transition_activity(gate, "RUNNING")
    starter.transition_activity(gate, "COMPLETED")
    assert runs.decisions == made and runs.left == 1
    starter.close()
    assert state_of(wb, entry_id(wx, gate)) is A.READY
    assert state_of(wb, f"{wx}:signal-paid#1:1") is None
    wb.register_workflow(code.signals)  # a worker for it now: takes what was left
    until(lambda: state_of(wb, f"{wx}:signal-paid#1:1") is A.READY)


def test_a_left_decision_is_taken_by_one_of_two_workers_at_once(
        other: Whimbrel, ddb_endpoint: str, table_prefix: str) -> None:
    starter = client(ddb_endpoint, table_prefix)
    starter.register_workflow(code.signals)
    wx = starter.start_workflow("signals")
    gate = f"{wx}:gate#1:1"
    until(lambda: state_of(other, gate) is A.READY)
    starter.close()
    other.transition_activity(gate, "RUNNING")
    other.transition_activity(gate, "COMPLETED")
    entry = other.engine.store.get_activity(entry_id(wx, gate))
    assert entry is not None and entry.state is A.READY
    # Two workers (clients that claim nothing in the background) take it at once.
    workers = [client(ddb_endpoint, table_prefix) for _ in range(2)]
    barrier = threading.Barrier(2)
    took: list[bool] = []

    def take(wb: Whimbrel) -> None:
        barrier.wait()
        took.append(wb.engine.feature(CodeRuns).take_left(entry, actor=wb.engine.actor))

    threads = [threading.Thread(target=take, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        assert sorted(took) == [False, True]
        assert sum(w.engine.feature(CodeRuns).decisions for w in workers) == 1
        assert state_of(other, entry.activity_exec_id) is A.COMPLETED
        assert state_of(other, f"{wx}:signal-paid#1:1") is A.READY  # decided once
        assert [a.activity_name for a in other.get_workflow(wx).activities] == [
            "gate#1", "signal-paid#1"]
    finally:
        for w in workers:
            w.close()


def test_a_worker_that_died_holding_a_decision_is_made_up_for_by_the_reconcile_visit(
        other: Whimbrel, ddb_endpoint: str, table_prefix: str) -> None:
    """A worker that took a left decision (READY → RUNNING) and died before deciding:
    the run's reconcile visit, in a process that is no worker either (the sweep), leaves
    a new entry of its own; a worker takes that one."""
    starter = client(ddb_endpoint, table_prefix)
    starter.register_workflow(code.signals)
    wx = starter.start_workflow("signals")
    gate = f"{wx}:gate#1:1"
    until(lambda: state_of(other, gate) is A.READY)
    starter.close()
    other.transition_activity(gate, "RUNNING")
    other.transition_activity(gate, "COMPLETED")
    store = other.engine.store
    store.move_activity(entry_id(wx, gate), A.READY, [A.RUNNING], {"claimable": REMOVE},
                        now=time.time(), actor="died", claimed=True)
    running = store.get_workflow(wx)
    assert running is not None and running.check_epoch is not None
    other.sweep(now=running.check_epoch + 1)  # the visit: no worker, so it leaves one
    visit = entry_id(wx, f"check/0/{running.check_epoch}")
    left = store.get_activity(visit)
    assert left is not None and left.state is A.READY
    assert json.loads(left.input or "") == {  # the worker decides cold, as the visit would
        "trigger": f"check/0/{running.check_epoch}", "cold": True}
    assert state_of(other, f"{wx}:signal-paid#1:1") is None

    worker = client(ddb_endpoint, table_prefix)
    thread = threading.Thread(target=worker.run_worker, args=(["wb_code_workflows"],),
                              daemon=True)
    thread.start()
    try:
        until(lambda: state_of(other, f"{wx}:signal-paid#1:1") is A.READY)
        until(lambda: state_of(other, visit) is A.COMPLETED)
    finally:
        worker.stop()
        thread.join(30)
        worker.close()


def test_a_client_that_starts_code_it_cannot_import_leaves_its_decisions(
        wb: Whimbrel, other: Whimbrel) -> None:
    """``other`` starts the workflow by name, but its function (defined in this test)
    cannot be imported by its ``module:qualname``: no worker for it, so even the run's
    first decision is left, for ``wb``, which registered the function."""

    @workflow("local_chain")
    def local_chain(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
        value = {"n": input["n"]}
        for _ in range(3):
            value = ctx.step(code.add_one, value)
        return value

    wb.register_workflow(local_chain)
    wx = other.start_workflow("local_chain", {"n": 0})
    run = until(lambda: (r := wb.get_workflow(wx)).state is W.COMPLETED and r)
    assert run.output == {"n": 3}
    asked, worker = other.engine.feature(CodeRuns), wb.engine.feature(CodeRuns)
    assert (asked.decisions, asked.left) == (0, 1)  # its start's decision, left
    assert worker.decisions >= 4  # that one, and one after each step, all in `wb`
    assert [code.CALLS[(wx, f"add_one#{k}")] for k in range(1, 4)] == [1, 1, 1]


def test_a_worker_whose_threads_are_all_busy_still_makes_left_decisions(
        other: Whimbrel, ddb_endpoint: str, table_prefix: str, gate: None) -> None:
    """A decision runs on the claim loop's thread, not on an activity thread: a worker
    whose only thread holds a long python activity still takes the decisions left for
    it."""
    starter = client(ddb_endpoint, table_prefix)
    starter.register_workflow(code.signals)
    wx = starter.start_workflow("signals")
    gate_step = f"{wx}:gate#1:1"
    until(lambda: state_of(other, gate_step) is A.READY)
    starter.close()

    worker = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix, max_workers=1)
    worker.register_workflow(WorkflowDefinition(name="hold", activities=[
        ActivityDefinition(name="hold", launcher=LauncherSpec.python(
            "wb_test_activities:gated"), heartbeat_timeout_seconds=600)]))
    held = worker.start_workflow("hold", {})
    until(lambda: acts.GATED["now"] == 1)  # its one thread is busy from now on
    thread = threading.Thread(target=worker.run_worker, args=(["wb_code_workflows"],),
                              kwargs={"concurrency": 1}, daemon=True)
    thread.start()
    try:
        other.transition_activity(gate_step, "RUNNING")
        other.transition_activity(gate_step, "COMPLETED")  # left for the worker
        until(lambda: state_of(other, f"{wx}:signal-paid#1:1") is A.READY)
        assert acts.GATED["now"] == 1  # decided while the activity still held the thread
        assert worker.engine.feature(CodeRuns).decisions >= 1
        acts.GATE.set()
        assert worker.wait(held, timeout=30).state is W.COMPLETED
    finally:
        worker.stop()
        thread.join(30)
        worker.close()
