"""Maps on DynamoDB Local: a list at run time becomes one item per element."""

from __future__ import annotations

import pytest
import wb_data_activities as data
from map_cost import measure

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    RetryNotAllowed,
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
        assert cost.map_row_writes == 3 and cost.workflow_writes == 3  # created, roots_ready, ended
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


def test_a_failed_map_is_handled_and_a_redrive_keeps_its_completed_items(
        wb: Whimbrel) -> None:
    defn = WorkflowDefinition("handled_map", (
        Act("each", launcher=py("wb_data_activities:flaky_item"), map_over="$input.xs",
            max_concurrency=2, on_failure="alert"),
        Act("alert", launcher=py("wb_data_activities:handler")),
        Act("after", ("each",), launcher=py("wb_data_activities:summary")),
    ))
    wb.register_workflow(defn)
    data.FAILING.add("bad-9")
    wx = wb.start_workflow("handled_map", {"xs": ["p", "bad-9", "q", "r"]})
    wf = wb.wait(wx, timeout=30)
    assert wf.state is W.COMPLETED, wf
    assert wf.activity("each").state is A.FAILED
    handled = {"handled": "each", "error_type": None, "refunded": True}
    assert wf.activity("after").output["upstream"] == {"each": handled}
    assert_contract_holds(wf, defn)

    strict = WorkflowDefinition("strict_map", (
        Act("each", launcher=py("wb_data_activities:flaky_item"), map_over="$input.xs",
            max_concurrency=2),))
    wb.register_workflow(strict)
    wx = wb.start_workflow("strict_map", {"xs": ["p", "bad-9", "q", "r", "s"]})
    failed = wb.wait(wx, timeout=30)
    assert failed.state is W.FAILED
    done_before = {i for i, a in failed.map_items("each").items() if a.state is A.COMPLETED}
    runs_before = [r for r in data.RUNS if r[0] == wx]
    data.FAILING.discard("bad-9")
    wb.redrive_workflow(wx)
    wf = wb.wait(wx, timeout=30)
    assert wf.state is W.COMPLETED, wf
    assert [o["element"] for o in wf.activity("each").output] == ["p", "bad-9", "q", "r", "s"]
    again = [r for r in data.RUNS if r[0] == wx][len(runs_before):]
    assert not {int(name.split("#")[1]) for _, name, _ in again} & done_before
    assert_contract_holds(wf, strict)


def test_a_map_of_child_runs(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("one_file", (
        Act("work", launcher=py("wb_data_activities:child_sink")),)))
    defn = WorkflowDefinition("many_files", (
        Act("each", launcher=LauncherSpec.workflow("one_file"), map_over="$input.files",
            max_concurrency=2),))
    wb.register_workflow(defn)
    wf = wb.wait(wb.start_workflow("many_files", {"files": ["a", "b", "c"]}), timeout=30)
    assert wf.state is W.COMPLETED, wf
    assert [o["work"]["child_input"] for o in wf.activity("each").output] == ["a", "b", "c"]
    assert len(wf.child_workflow_exec_ids) == 3
    assert {a.child_workflow_exec_id for a in wf.items} == set(wf.child_workflow_exec_ids)


def test_a_large_map_output_stays_on_the_items(wb: Whimbrel) -> None:
    # (Too long a list: tests/integration/test_payload_large_map.py, past MAX_MAP_ITEMS.)
    defn = WorkflowDefinition("big", (
        Act("each", launcher=py("wb_data_activities:item"), map_over="$input.xs",
            max_concurrency=10),
        Act("after", ("each",), launcher=py("wb_data_activities:indices")),
    ))
    wb.register_workflow(defn)
    blob = "x" * 3000  # 30 outputs of ~3 KB: more than a row keeps
    wf = wb.wait(wb.start_workflow("big", {"xs": [blob] * 30}), timeout=60)
    assert wf.state is W.COMPLETED, wf
    assert wb.store.get_activity(wf.activity("each").activity_exec_id).output is None  # type: ignore[union-attr]
    assert wf.activity("after").output == list(range(30))  # assembled from the items


def test_retry_an_item_by_hand_keeps_its_element(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("by_hand", (
        Act("each", map_over="$input.xs", tolerated_failures=1),))  # external items
    wb.register_workflow(defn)
    wx = wb.start_workflow("by_hand", {"xs": ["zero", "one"]})
    first, second = f"{wx}:each#0:1", f"{wx}:each#1:1"
    wb.transition_activity(first, "RUNNING")
    wb.transition_activity(first, "FAILED", error="flaky disk")  # tolerated: lane 0 ends
    again = wb.retry_activity(first)
    assert again.attempt == 2 and again.state is A.READY
    assert wb.store.get_activity(again.activity_exec_id).input == '"zero"'  # type: ignore[union-attr]
    wb.transition_activity(second, "RUNNING")
    wb.transition_activity(second, "COMPLETED", output=1)
    assert wb.get_workflow(wx).activity("each").state is A.RUNNING  # waits for the retry
    wb.transition_activity(again.activity_exec_id, "RUNNING")
    wb.transition_activity(again.activity_exec_id, "COMPLETED", output=0)
    wf = wb.get_workflow(wx)
    assert wf.state is W.COMPLETED and wf.activity("each").output == [0, 1]
    assert_contract_holds(wf, defn)
    held = WorkflowDefinition("held_map", (
        Act("each", map_over="$input.xs", on_failure="h"), Act("h")))  # h waits READY
    wb.register_workflow(held)
    wx = wb.start_workflow("held_map", {"xs": "not a list"})
    assert wb.get_workflow(wx).state is W.RUNNING  # the map FAILED; its handler waits
    with pytest.raises(RetryNotAllowed, match="is a map"):
        wb.retry_activity(f"{wx}:each:1")


def test_a_suspended_run_holds_its_map_between_items(wb: Whimbrel) -> None:
    """Suspend while an item runs: its end is recorded and the lane's next item is
    created but held in READY (not claimable); the resume lets it be claimed."""
    defn = WorkflowDefinition("held_map", (
        Act("each", map_over="$input.xs", max_concurrency=1),  # external items
    ))
    wb.register_workflow(defn)
    wx = wb.start_workflow("held_map", {"xs": ["a", "b"]})
    first = wb.claim(workflow_name="held_map")
    assert first is not None and first.activity_name == "each#0"
    wb.suspend_workflow(wx)
    wb.transition_activity(first.activity_exec_id, "COMPLETED", output={"got": "a"})
    held = wb.get_workflow(wx)
    assert held.state is W.SUSPENDED
    assert {a.activity_name: a.state for a in held.items} == {"each#0": A.COMPLETED,
                                                               "each#1": A.READY}
    assert wb.claim(workflow_name="held_map") is None  # nothing is handed out
    wb.resume_workflow(wx)
    # Claimable again under its map's name, as any item is.
    assert wb.claim(workflow_name="held_map", activity_name="each#1") is None
    second = wb.claim(workflow_name="held_map", activity_name="each")
    assert second is not None and second.activity_name == "each#1"
    wb.transition_activity(second.activity_exec_id, "COMPLETED", output={"got": "b"})
    wf = wb.wait(wx, timeout=30)
    assert wf.state is W.COMPLETED, wf
    assert wf.activity("each").output == [{"got": "a"}, {"got": "b"}]
    assert_contract_holds(wf, defn)
