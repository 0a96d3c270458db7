"""``ctx.map`` on the ``map_item`` table (issue 26), through the Python API on DynamoDB
Local and the in-memory twin: the map is one step of the run (``<name>#<k>``) whose
items are a DAG map's (``<name>#<k>#<i>`` in ``map_item``); the history holds the one
step, the outputs come back in item order."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from whimbrel import ActivityState, StepFailed, Whimbrel, WorkflowContext, WorkflowState, workflow
from whimbrel.contract.code import CodeDefinition
from whimbrel.contract.dataflow import MAX_MAP_ITEMS
from whimbrel.engine.code_decide import load
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.engine.sweep import reconcile
from whimbrel.testing import wait_until
from whimbrel.worker.run import ActivityRun

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

W = WorkflowState
A = ActivityState

#: Calls of ``double`` by (run, item): each item runs once.
CALLS: Counter[tuple[str, str]] = Counter()


@pytest.fixture(params=["in_memory", "always_replay"])
def cwb(wb: Whimbrel, request: pytest.FixtureRequest) -> Whimbrel:
    wb.engine.feature(CodeRuns).always_replay = request.param == "always_replay"
    return wb


def double(run: ActivityRun) -> Any:
    CALLS[(run.workflow_exec_id, run.activity_name)] += 1
    return run.input * 2


def blob(run: ActivityRun) -> Any:
    return f"{run.input:04d}" + "x" * 3000


@workflow("big_outputs")
def big_outputs(ctx: WorkflowContext, input: Any) -> list[Any]:
    """30 outputs of ~3 KB: more than the map step's row keeps without a bucket."""
    return [(o[:4], len(o)) for o in ctx.map(blob, range(30), max_concurrency=5)]


@workflow("map_twice")
def map_twice(ctx: WorkflowContext, input: dict[str, Any]) -> list[Any]:
    """Two maps of one name in a loop: steps ``double#1`` and ``double#2``."""
    return [ctx.map(double, [r * 10 + i for i in range(input["n"])], max_concurrency=2)
            for r in range(2)]


@workflow("gated_map")
def gated_map(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """A map of ``external`` items the test ends one by one."""
    try:
        return {"out": ctx.map("gate", list(range(input["n"])),
                               max_concurrency=input.get("lanes"),
                               tolerated_failures=input.get("tolerated", 0))}
    except StepFailed as exc:
        return {"failed": exc.step, "state": exc.state, "error": exc.error}


@workflow("too_many")
def too_many(ctx: WorkflowContext, input: Any) -> Any:
    return ctx.map(double, range(MAX_MAP_ITEMS + 1), max_concurrency=10)


@workflow("bad_map")
def bad_map(ctx: WorkflowContext, input: dict[str, Any]) -> Any:
    return ctx.map(double, [1, 2], **input)


def _items(wb: Whimbrel, wx: str) -> dict[int, Any]:
    return wb.get_workflow(wx).map_items("gate#1")


def _wait_items(wb: Whimbrel, wx: str, indexes: set[int]) -> None:
    """Until exactly ``indexes`` exist and each of the unfinished is READY."""
    def there() -> bool:
        items = _items(wb, wx)
        return set(items) == indexes and all(
            a.state is A.READY for a in items.values() if not a.state.is_terminal)
    wait_until(there, timeout=30, message=lambda: f"items {indexes}: {_items(wb, wx)}")


def _end(wb: Whimbrel, wx: str, index: int, *, fail: bool = False) -> None:
    aeid = f"{wx}:gate#1#{index}:1"
    wb.transition_activity(aeid, "RUNNING")
    if fail:
        wb.transition_activity(aeid, "FAILED", error=f"item {index} broke",
                               error_type="Broken")
    else:
        wb.transition_activity(aeid, "COMPLETED", output={"i": index})


def test_a_map_in_a_loop_is_one_step_per_call_with_its_items_apart(cwb: Whimbrel) -> None:
    cwb.register_workflow(map_twice)
    wx = cwb.start_workflow("map_twice", {"n": 5})
    run = cwb.wait(wx, timeout=60)
    assert run.state is W.COMPLETED, run
    assert run.output == [[2 * i for i in range(5)], [2 * (10 + i) for i in range(5)]]
    # The run's partition holds the two map steps; their items are map items.
    assert [(a.activity_name, a.attempt, a.map_size) for a in run.activities] == [
        ("double#1", 1, 5), ("double#2", 1, 5)]
    for k in (1, 2):
        items = run.map_items(f"double#{k}")
        assert sorted(items) == list(range(5))
        assert all(a.activity_name == f"double#{k}#{i}" and a.attempt == 1
                   and a.state is A.COMPLETED for i, a in items.items())
        assert [CALLS[(wx, f"double#{k}#{i}")] for i in range(5)] == [1] * 5
    assert load(cwb.engine, wx, 0).steps.keys() == {"double#1", "double#2"}


def test_outputs_come_in_item_order_at_most_max_concurrency_at_once(cwb: Whimbrel) -> None:
    cwb.register_workflow(gated_map)
    wx = cwb.start_workflow("gated_map", {"n": 7, "lanes": 3})
    _wait_items(cwb, wx, {0, 1, 2})
    node = cwb.get_workflow(wx).activities[0]
    assert (node.activity_name, node.state, node.map_size) == ("gate#1", A.RUNNING, 7)
    # Items end out of order; a lane's next item exists only once its previous ended.
    _end(cwb, wx, 2)
    _wait_items(cwb, wx, {0, 1, 2, 5})
    _end(cwb, wx, 1)
    _wait_items(cwb, wx, {0, 1, 2, 4, 5})
    for index in (5, 0, 3, 4, 6):
        items = _items(cwb, wx)
        assert sum(not a.state.is_terminal for a in items.values()) <= 3, items
        if index not in items:
            _wait_items(cwb, wx, set(items) | {index})
        _end(cwb, wx, index)
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output == {"out": [{"i": i} for i in range(7)]}
    # The history holds one step, whatever the number of items.
    assert [a.activity_name for a in run.activities] == ["gate#1"]


def test_tolerated_failures_give_none_and_one_more_raises_step_failed(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(gated_map)
    ok = cwb.start_workflow("gated_map", {"n": 4, "tolerated": 1})
    _wait_items(cwb, ok, {0, 1, 2, 3})
    _end(cwb, ok, 1, fail=True)
    for index in (0, 2, 3):
        _end(cwb, ok, index)
    run = cwb.wait(ok, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output == {"out": [{"i": 0}, None, {"i": 2}, {"i": 3}]}

    bad = cwb.start_workflow("gated_map", {"n": 4, "tolerated": 1})
    _wait_items(cwb, bad, {0, 1, 2, 3})
    _end(cwb, bad, 0)
    _end(cwb, bad, 3, fail=True)
    _end(cwb, bad, 1, fail=True)  # one more than tolerated: the map fails at once
    run = cwb.wait(bad, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output["failed"] == "gate#1" and run.output["state"] == "FAILED"
    assert "item 1 FAILED: item 1 broke" in run.output["error"]
    items = run.map_items("gate#1")
    assert items[2].state is A.CANCELLED  # asked to stop, never ran


def test_a_replayed_decision_and_a_redelivered_follow_up_schedule_the_map_once(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(gated_map)
    wx = cwb.start_workflow("gated_map", {"n": 5, "lanes": 2})
    _wait_items(cwb, wx, {0, 1})
    core = cwb.engine
    codes = core.feature(CodeRuns)
    wf = core.store.get_workflow(wx)
    assert wf is not None
    defn = core.definitions.definition_of(wf)
    assert isinstance(defn, CodeDefinition)
    for _ in range(2):  # a decision run again from the table, and a reconcile visit
        codes._decide(wf, defn, cold=True)
        reconcile(core, wx)
    _end(cwb, wx, 0)
    _wait_items(cwb, wx, {0, 1, 2})
    item = core.store.get_activity(f"{wx}:gate#1#0:1")
    assert item is not None and item.state is A.COMPLETED
    core.flow.after(item)  # the completion's stream record, delivered again
    _wait_items(cwb, wx, {0, 1, 2})
    node = core.store.get_activity(f"{wx}:gate#1:1")
    assert node is not None and node.state is A.RUNNING
    assert core.store.get_activity(f"{wx}:gate#1:2") is None
    assert [c.state for c in node.history].count("RUNNING") == 1
    for index in (1, 2, 3, 4):
        if index not in _items(cwb, wx):
            _wait_items(cwb, wx, set(_items(cwb, wx)) | {index})
        _end(cwb, wx, index)
    run = cwb.wait(wx, timeout=30)
    assert run.output == {"out": [{"i": i} for i in range(5)]}
    assert all(a.attempt == 1 for a in run.items)
    assert len(run.items) == 5


@pytest.mark.parametrize(("options", "problem"), [
    ({"max_concurrency": 0}, "max_concurrency must be an integer from 1 to 100000"),
    ({"tolerated_failures": -1}, "tolerated_failures must be an integer from 0 to 100000"),
    ({"lanes": 2}, "ctx.map got unknown option(s) lanes"),
])
def test_bad_map_options_fail_the_run_naming_the_problem(
        cwb: Whimbrel, options: dict[str, Any], problem: str) -> None:
    cwb.register_workflow(bad_map)
    run = cwb.wait(cwb.start_workflow("bad_map", options), timeout=30)
    assert run.state is W.FAILED, run
    assert problem in (run.error or ""), run.error
    assert run.activities == () and run.items == ()


def test_more_items_than_max_map_items_fail_the_run_naming_the_limit(cwb: Whimbrel) -> None:
    cwb.register_workflow(too_many)
    run = cwb.wait(cwb.start_workflow("too_many"), timeout=30)
    assert run.state is W.FAILED, run
    assert "ctx.map got 100001 items, more than the limit of 100000 items per map" in (
        run.error or ""), run.error
    assert run.activities == ()


@workflow("plain_map")
def plain_map(ctx: WorkflowContext, input: dict[str, Any]) -> list[Any]:
    return ctx.map("gate", list(range(input["n"])), max_concurrency=input.get("lanes"))


def test_a_redrive_runs_the_failed_items_again_and_keeps_the_completed(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(plain_map)
    wx = cwb.start_workflow("plain_map", {"n": 3})
    _wait_items(cwb, wx, {0, 1, 2})
    _end(cwb, wx, 0)
    _end(cwb, wx, 1, fail=True)  # the map fails, the code does not catch it
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.FAILED, run
    assert "StepFailed: step gate#1 FAILED: item 1 FAILED" in (run.error or "")
    stopped = cwb.store.get_activity(f"{wx}:gate#1#2:1")
    assert stopped is not None and stopped.state is A.CANCELLED  # stopped with the map
    cwb.redrive_workflow(wx)
    for index in (1, 2):  # the failed and the stopped item: their next attempt
        again = f"{wx}:gate#1#{index}:2"
        wait_until(lambda a=again: (x := cwb.store.get_activity(a)) is not None
                   and x.state is A.READY, timeout=30, message=lambda: str(_items(cwb, wx)))
    items = _items(cwb, wx)
    assert (items[0].attempt, items[0].state) == (1, A.COMPLETED)  # kept, not run again
    for index in (1, 2):
        again = f"{wx}:gate#1#{index}:2"
        cwb.transition_activity(again, "RUNNING")
        cwb.transition_activity(again, "COMPLETED", output={"i": index})
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert [(a.activity_name, a.attempt) for a in run.activities] == [
        ("gate#1", 1), ("gate#1", 2)]


def test_a_map_step_shows_its_progress_over_its_items(cwb: Whimbrel) -> None:
    cwb.register_workflow(gated_map)
    wx = cwb.start_workflow("gated_map", {"n": 4, "tolerated": 1})
    _wait_items(cwb, wx, {0, 1, 2, 3})
    _end(cwb, wx, 0)
    _end(cwb, wx, 2, fail=True)
    node = cwb.get_workflow(wx).activity("gate#1")
    assert node.progress is not None
    assert node.progress.to_dict() == {"total": 4, "done": 1, "running": 2, "failed": 1,
                                       "pending": 0}
    assert str(node.progress) == "1/4 done, 2 running, 1 failed"


def test_outputs_too_large_for_the_map_steps_row_reach_the_code_from_its_items(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(big_outputs)
    wx = cwb.start_workflow("big_outputs")
    run = cwb.wait(wx, timeout=60)
    assert run.state is W.COMPLETED, run
    assert run.output == [[f"{i:04d}", 3004] for i in range(30)]
    node = cwb.store.get_activity(f"{wx}:blob#1:1")
    assert node is not None and node.output is None and node.map_size == 30
    assert run.activity("blob#1").output[29] == "0029" + "x" * 3000  # the view assembles
