"""Maps on DynamoDB Local: a list at run time becomes one item per element."""

from __future__ import annotations

import pytest
import wb_data_activities as data
from map_cost import measure

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowExec,
    WorkflowState,
)
from whimbrel.testing import assert_contract_holds

A, W = ActivityState, WorkflowState
py = LauncherSpec.python


def test_map_over_an_upstream_key_runs_one_item_per_element(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("photos", (
        Act("list", launcher=py("wb_data_activities:listing")),
        Act("thumb", ("list",), launcher=py("wb_data_activities:item"),
            map_over="list.keys", max_concurrency=2),
        Act("report", ("thumb",), launcher=py("wb_data_activities:summary")),
    ))
    wb.register_workflow(defn)
    wx = wb.start_workflow("photos", {"n": 5})
    wf = wb.wait(wx, timeout=30)
    assert wf.state is W.COMPLETED, wf
    assert_contract_holds(wf, defn)
    thumbs = [{"index": i, "element": f"img/{i:04d}.jpg"} for i in range(5)]
    assert wf.activity("thumb").output == thumbs
    assert wf.activity("report").output["upstream"] == {"thumb": thumbs}
    assert len(wf.items) == 5 and {a.state for a in wf.items} == {A.COMPLETED}
    assert str(wf.activity("thumb").progress) == "5/5 done"
    assert sorted(a.activity_name for a in wf.activities) == ["list", "report", "thumb"]


def test_map_over_the_input_and_an_empty_list(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("over_input", (
        Act("each", launcher=py("wb_data_activities:item"), map_over="$input.xs"),
        Act("after", ("each",), launcher=py("wb_data_activities:summary")),
    ))
    wb.register_workflow(defn)
    wf = wb.wait(wb.start_workflow("over_input", {"xs": [3, None, {"a": 1}]}), timeout=30)
    assert wf.state is W.COMPLETED
    assert wf.activity("each").output == [{"index": 0, "element": 3},
                                          {"index": 1, "element": None},
                                          {"index": 2, "element": {"a": 1}}]
    empty = wb.wait(wb.start_workflow("over_input", {"xs": []}), timeout=30)
    assert empty.state is W.COMPLETED
    assert empty.activity("each").output == [] and empty.items == ()
    bad = wb.wait(wb.start_workflow("over_input", {"xs": "nope"}), timeout=30)
    assert bad.state is W.FAILED
    assert "is a str, not a list" in (bad.activity("each").error or "")


def test_item_failures_within_tolerance_and_beyond(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("tolerant", (
        Act("each", launcher=py("wb_data_activities:flaky_item"), map_over="$input.xs",
            max_concurrency=3, tolerated_failures=1,
            retry=RetryPolicy(max_attempts=2, initial_interval_seconds=0)),
    ))
    wb.register_workflow(defn)
    data.FAILING.update({"bad-1", "bad-2"})
    ok = wb.wait(wb.start_workflow("tolerant", {"xs": ["a", "bad-1", "c", "d"]}), timeout=30)
    assert ok.state is W.COMPLETED, ok
    assert ok.activity("each").output[1] is None
    assert ok.map_items("each")[1].attempt == 2  # retried per item, then tolerated
    assert str(ok.activity("each").progress) == "3/4 done, 1 failed"
    assert_contract_holds(ok, defn)
    no = wb.wait(wb.start_workflow("tolerant", {"xs": ["bad-1", "x", "bad-2", "y", "z"]}),
                 timeout=30)
    assert no.state is W.FAILED
    assert "more than tolerated_failures" in (no.error or "") or \
        "item" in (no.activity("each").error or "")
    assert_contract_holds(no, defn)


def _peak_running(wf: WorkflowExec) -> int:
    """The most items RUNNING at once, from the stored histories: an item counts from
    its RUNNING entry to its end (ends first on equal times)."""
    events = []
    for act in wf.items:
        run = [h.at for h in act.history if h.state == "RUNNING"]
        events += [(run[0], 1), (act.history[-1].at, -1)]
    running = peak = 0
    for _, step in sorted(events):
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.slow
def test_a_1000_item_map_runs_20_at_a_time_with_o1_writes_per_item(
        ddb_endpoint: str, table_prefix: str) -> None:
    with Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                  max_workers=32) as wb:
        wb.create_tables()
        cost = measure(wb, 1000, 20, name="wide")
        print("\n" + cost.table())
        wx = wb.list_workflows(name="wide").items[0].workflow_exec_id
        wf = wb.get_workflow(wx)
        assert 1 <= _peak_running(wf) <= 20
        assert wf.activity("each").output == [None] * 1000
        assert len(wf.items) == 1000
        # O(1) writes per item and no hot row: create, RUNNING (one write from
        # REQUESTED), COMPLETED; a lane edge is written twice; the map's own row 3 times
        # (created, expanded RUNNING, COMPLETED); the workflow item twice.
        assert cost.writes_per_item == 3.0 and cost.most_item_writes == 3
        assert cost.edge_writes == 2 * 20
        assert cost.map_row_writes == 3 and cost.workflow_writes == 2
        assert cost.most_writes_any_row == 3
        assert_contract_holds(wf, wb.get_definition("wide"))
        wb.store.delete_tables()


def test_one_lane_runs_items_one_after_the_other(wb: Whimbrel) -> None:
    lanes = 1
    defn = WorkflowDefinition(f"wide{lanes}", (
        Act("each", launcher=py("wb_data_activities:noop"), map_over="$input.xs",
            max_concurrency=lanes),
    ))
    wb.register_workflow(defn)
    n = 60
    wf = wb.wait(wb.start_workflow(defn.name, {"xs": list(range(n))}), timeout=120)
    assert wf.state is W.COMPLETED
    assert len(wf.activity("each").output) == n
    assert _peak_running(wf) == 1
    assert_contract_holds(wf, defn)
