"""Data-driven definitions and outcomes, pure: map sources, handlers, resolution."""

from __future__ import annotations

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, RetryPolicy, WorkflowDefinition
from whimbrel.contract.dataflow import (
    MAX_MAP_ITEMS,
    STEP_ITEMS,
    MapSource,
    child_request_id,
    handlers,
    is_map_node,
    item_name,
    parse_map_over,
    select,
    split_item,
)
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.outcomes import (
    MapProgress,
    map_items,
    map_output,
    map_progress,
    open_activities,
    resolution,
    retries_left,
)
from whimbrel.contract.records import ActivityRecord

A = ActivityState


def rec(name: str, attempt: int, state: ActivityState, **kw: object) -> ActivityRecord:
    return ActivityRecord("wx", f"wx:{name}:{attempt}", name, "wf", attempt, state,
                          **kw)  # type: ignore[arg-type]


def test_item_names_and_ids() -> None:
    assert item_name("thumb", 12) == "thumb#12"
    assert split_item("thumb#12") == ("thumb", 12) and split_item("thumb") == ("thumb", None)
    assert split_item("a#b") == ("a#b", None)
    # A code map's step (s#2) and its items (s#2#5): only the row of the map is its node.
    assert split_item("s#2#5") == ("s#2", 5) and item_name("s#2", 5) == "s#2#5"
    code_map = Act("s", map_over=STEP_ITEMS)
    assert is_map_node(code_map, "s#2") and not is_map_node(code_map, "s#2#5")
    dag_map = Act("m", map_over="$input")
    assert is_map_node(dag_map, "m") and not is_map_node(dag_map, "m#5")
    assert not is_map_node(Act("s"), "s#2")
    key = parse_activity_exec_id("wx-1:thumb#12:3")
    assert (key.workflow_exec_id, key.activity_name, key.attempt) == ("wx-1", "thumb#12", 3)
    assert child_request_id("wx:a:1") == "child:wx:a:1"


def test_map_sources() -> None:
    assert parse_map_over("list") == MapSource("list")
    assert parse_map_over("list.page.keys") == MapSource("list", ("page", "keys"))
    assert parse_map_over("$input.xs") == MapSource(None, ("xs",))
    assert parse_map_over("$input") == MapSource(None)
    for bad in ("", "a..b", ".a", "a."):
        with pytest.raises(ValueError):
            parse_map_over(bad)
    assert select({"page": {"keys": [1, 2]}}, MapSource("l", ("page", "keys"))) == [1, 2]
    with pytest.raises(ValueError, match=r"l\.page has no key 'keys'"):
        select({"page": {}}, MapSource("l", ("page", "keys")))
    with pytest.raises(ValueError, match="is a dict, not a list"):
        select({"a": 1}, MapSource(None))
    assert len(select(list(range(MAX_MAP_ITEMS)), MapSource(None))) == 100_000
    with pytest.raises(ValueError, match="more than the limit of 100000"):
        select(list(range(MAX_MAP_ITEMS + 1)), MapSource(None))


def test_new_fields_round_trip_and_old_definitions_keep_their_canonical_json() -> None:
    plain = WorkflowDefinition("p", (Act("a"), Act("b", ("a",))))
    assert "map_over" not in plain.to_json() and "non_retryable" not in plain.to_json()
    rich = WorkflowDefinition("r", (
        Act("list"),
        Act("each", ("list",), map_over="list.keys", max_concurrency=5, tolerated_failures=2,
            on_failure="alert", retry=RetryPolicy(non_retryable=["ValueError"])),
        Act("alert", launcher=LauncherSpec.workflow("pager", version=2)),
        Act("after", ("each",), on_failure="continue")))
    rich.validate()
    again = WorkflowDefinition.from_json(rich.to_json())
    assert again.to_json() == rich.to_json()
    assert again.activity("each").retry.non_retryable == ("ValueError",)
    assert again.activity("alert").launcher.config == {"workflow": "pager", "version": 2}
    assert again.activity("each#7") is again.activity("each")  # an item runs as its map
    assert rich.roots == ("list",) and rich.sinks == ("after",)  # alert: a handler
    assert handlers(rich) == {"alert": "each"}
    assert LauncherSpec.parse("workflow:pager") == LauncherSpec.workflow("pager")


def test_retries_left_counts_this_generation_and_honours_non_retryable() -> None:
    spec = Act("a", retry=RetryPolicy(max_attempts=2, non_retryable=("Fatal",)))
    assert retries_left(rec("a", 1, A.FAILED), spec)
    assert not retries_left(rec("a", 2, A.FAILED), spec)
    assert not retries_left(rec("a", 1, A.FAILED, error_type="Fatal"), spec)
    assert retries_left(rec("a", 3, A.TIMED_OUT, retry_base=2), spec)  # after a redrive
    assert not retries_left(rec("a", 1, A.CANCELLED), spec)
    node = Act("m", map_over="$input", retry=RetryPolicy(max_attempts=3))
    assert not retries_left(rec("m", 1, A.FAILED), node)  # its items retry, not it
    assert retries_left(rec("m#4", 1, A.FAILED), node)


def test_resolution_of_handled_and_continued_failures() -> None:
    defn = WorkflowDefinition("h", (
        Act("x", on_failure="h"), Act("h"), Act("y", ("x",), on_failure="continue"),
        Act("z", ("y",))))
    failed_x = rec("x", 1, A.FAILED, error="boom")
    latest = {"x": failed_x}
    assert resolution(defn, latest, "x") is None  # the handler was not called yet
    latest["h"] = rec("h", 1, A.RUNNING, called_by=failed_x.activity_exec_id)
    assert resolution(defn, latest, "x") is None
    latest["h"] = rec("h", 1, A.COMPLETED, called_by=failed_x.activity_exec_id,
                      output='{"refund": 1}')
    res = resolution(defn, latest, "x")
    assert res is not None and res.output == '{"refund": 1}' and res.handled_by == "h"
    latest["h"] = rec("h", 1, A.COMPLETED, called_by="wx:x:0", output="1")
    assert resolution(defn, latest, "x") is None  # called for another failure
    latest.update(h=rec("h", 1, A.COMPLETED, called_by=failed_x.activity_exec_id),
                  y=rec("y", 1, A.FAILED, error="meh"))
    res = resolution(defn, latest, "y")
    assert res is not None and res.passed and res.error == "meh" and res.output is None
    assert open_activities(defn, latest) == ["z"]
    latest["z"] = rec("z", 1, A.COMPLETED)
    assert open_activities(defn, latest) == []
    latest["x#0"] = rec("x#0", 1, A.RUNNING)  # anything live keeps a run open
    assert open_activities(defn, latest) == ["x#0"]


def test_map_progress_and_output() -> None:
    spec = Act("m", map_over="$input", retry=RetryPolicy(max_attempts=2))
    acts = [rec("m#0", 1, A.COMPLETED, output='"a"'), rec("m#1", 1, A.FAILED),
            rec("m#1", 2, A.FAILED), rec("m#2", 1, A.FAILED), rec("m#3", 1, A.RUNNING),
            rec("other#0", 1, A.COMPLETED)]
    items = map_items(acts, "m")
    assert sorted(items) == [0, 1, 2, 3] and items[1].attempt == 2
    progress = map_progress(items, 6, spec)
    assert progress == MapProgress(total=6, done=1, running=2, failed=1)  # m#2 retries
    assert progress.pending == 2 and str(progress) == "1/6 done, 2 running, 1 failed"
    assert map_output(items, 6) == ["a", None, None, None, None, None]
