"""Maps on DynamoDB Local: a list at run time becomes one item per element."""

from __future__ import annotations

import pytest
import wb_data_activities as data

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
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


@pytest.mark.parametrize("lanes", [1, 20])
def test_never_more_items_running_than_max_concurrency(wb: Whimbrel, lanes: int) -> None:
    defn = WorkflowDefinition(f"wide{lanes}", (
        Act("each", launcher=py("wb_data_activities:noop"), map_over="$input.xs",
            max_concurrency=lanes),
    ))
    wb.register_workflow(defn)
    n = 60 if lanes == 1 else 1000
    wf = wb.wait(wb.start_workflow(defn.name, {"xs": list(range(n))}), timeout=120)
    assert wf.state is W.COMPLETED
    assert len(wf.activity("each").output) == n
    # From the stored histories: an item counts from RUNNING to its end.
    events = []
    for act in wf.items:
        run = [h.at for h in act.history if h.state == "RUNNING"]
        end = act.history[-1].at
        events += [(run[0], 1), (end, -1)]
    running = peak = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):  # ends first on ties
        running += step
        peak = max(peak, running)
    assert 1 <= peak <= lanes
    assert_contract_holds(wf, defn)
