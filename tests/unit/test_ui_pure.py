"""The console's pure parts: the DAG layout and SVG, the action registry, the formats."""

from __future__ import annotations

import re
from typing import Any

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityExec,
    ActivityState,
    InvalidInput,
    WorkflowDefinition,
    WorkflowExec,
    WorkflowState,
)
from whimbrel.ui import actions, present
from whimbrel.ui.dag import MAX_PER_COLUMN, NodeInfo, columns, layout, render_svg

DIAMOND = WorkflowDefinition("diamond", (
    Act("a"), Act("b", ("a",)), Act("c", ("a",)), Act("d", ("b", "c"))))


def test_columns_follow_the_longest_path() -> None:
    assert columns(DIAMOND) == [["a"], ["b", "c"], ["d"]]
    skip = WorkflowDefinition("skip", (Act("a"), Act("b", ("a",)), Act("c", ("a", "b"))))
    assert columns(skip) == [["a"], ["b"], ["c"]]


def test_children_sit_next_to_their_parents() -> None:
    # Two independent chains declared interleaved: ordering by parents keeps each chain
    # on its own row, so no edge crosses another.
    defn = WorkflowDefinition("two", (
        Act("x1"), Act("y1"), Act("y2", ("y1",)), Act("x2", ("x1",)),
        Act("y3", ("y2",)), Act("x3", ("x2",))))
    cols = columns(defn)
    rows = [{n[0]: i for i, n in enumerate(c)} for c in cols]
    assert rows[0] == rows[1] == rows[2]


def test_every_edge_points_right_and_wide_columns_are_summarised() -> None:
    fan = WorkflowDefinition("fan", (
        Act("split"), *(Act(f"part{i}", ("split",)) for i in range(60)),
        Act("merge", tuple(f"part{i}" for i in range(60)))))
    info = {f"part{i}": NodeInfo("COMPLETED" if i % 3 else "RUNNING") for i in range(60)}
    lay = layout(fan, info)
    middle = [n for n in lay.nodes if n.x == lay.nodes[1].x]
    assert len(middle) == MAX_PER_COLUMN
    summary = middle[-1]
    assert summary.label == f"+ {60 - MAX_PER_COLUMN + 1} more" and summary.members
    hidden = summary.members
    running = sum(1 for n in hidden if info[n].state == "RUNNING")
    assert f"{running} running" in summary.detail
    assert f"{len(hidden) - running} completed" in summary.detail
    for a, b, _ in lay.edges:
        assert a.x < b.x
    # One edge per pair of drawn nodes, not one per hidden activity.
    assert len(lay.edges) == 2 * MAX_PER_COLUMN


def test_svg_escapes_text_and_marks_states() -> None:
    info = {"a": NodeInfo("RUNNING", 'waits <b>"x"</b> & co', "#act-a")}
    svg = render_svg(DIAMOND, info, title='diamond <script>')
    assert "<script>" not in svg and "<b>" not in svg
    assert "&lt;b&gt;" in svg and "&amp; co" in svg
    assert re.search(r'<a href="#act-a"><g class="node s-RUNNING" data-activity="a" '
                     r'data-state="RUNNING"', svg)
    assert 'class="node s-NONE" data-activity="d"' in svg


def _attempt(name: str, state: ActivityState, attempt: int = 1, **extra: Any) -> ActivityExec:
    return ActivityExec(
        activity_exec_id=f"wx:{name}:{attempt}", activity_name=name, workflow_exec_id="wx",
        workflow_name="diamond", state=state, attempt=attempt, output=None, error=None,
        created_epoch=100.0 + attempt, updated_epoch=100.0, started_epoch=None,
        ended_epoch=None, heartbeat_epoch=None, heartbeat_timeout_seconds=None,
        not_before_epoch=extra.get("not_before"), history=())


def _run(state: WorkflowState, *acts: ActivityExec) -> WorkflowExec:
    return WorkflowExec(workflow_exec_id="wx", workflow_name="diamond", version=1,
                        state=state, workflow_request_id="r", input=None, error=None,
                        created_epoch=100.0, updated_epoch=100.0, ended_epoch=None,
                        history=(), activities=acts)


class Today:
    """The facade's action methods of this release."""

    def cancel_workflow(self, wx: str) -> None: ...

    def retry_activity(self, aeid: str) -> None: ...


class Later(Today):
    """The facade once later issues add their methods."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def redrive_workflow(self, wx: str) -> None:
        self.calls.append(("redrive", wx))

    def approve(self, aeid: str, *, by: str, comment: str = "") -> None:
        self.calls.append(("approve", aeid, by, comment))

    def signal(self, wx: str, name: str, payload: Any = None, *,
               signal_id: str | None = None) -> None:
        self.calls.append(("signal", wx, name, payload, signal_id))


def names(found: list[actions.Action]) -> list[str]:
    return [a.name for a in found]


def test_actions_offered_follow_state_and_facade() -> None:
    failed = _attempt("b", ActivityState.FAILED)
    running = _run(WorkflowState.RUNNING, _attempt("a", ActivityState.COMPLETED), failed)
    assert names(actions.available(Today(), running, None, "run")) == ["cancel"]
    assert names(actions.available(Today(), running, failed, "activity")) == ["retry"]
    # A retry waiting for its back-off: the failed attempt still offers "retry now".
    waiting = _run(WorkflowState.RUNNING, failed,
                   _attempt("b", ActivityState.REQUESTED, 2, not_before=999.0))
    assert names(actions.available(Today(), waiting, failed, "activity")) == ["retry"]
    ended = _run(WorkflowState.FAILED, failed)
    assert names(actions.available(Today(), ended, failed, "activity")) == []
    assert names(actions.available(Today(), ended, None, "run")) == []
    # Once the facade has redrive, a FAILED run offers it, with no other change here.
    assert names(actions.available(Later(), ended, None, "run")) == ["redrive"]
    assert names(actions.available(Later(), running, None, "run")) == ["cancel", "signal"]


def test_action_calls_pass_the_form_to_the_facade() -> None:
    wb = Later()
    actions.BY_NAME["approve"].call(wb, "wx:b:1", {"by": "ana", "comment": "ok"})
    actions.BY_NAME["signal"].call(wb, "wx", {"name": "payment", "payload": '{"paid": 3}',
                                              "signal_id": ""})
    assert wb.calls == [("approve", "wx:b:1", "ana", "ok"),
                        ("signal", "wx", "payment", {"paid": 3}, None)]
    with pytest.raises(InvalidInput, match="payload is not valid JSON"):
        actions.BY_NAME["signal"].call(wb, "wx", {"name": "x", "payload": "{oops"})
    with pytest.raises(InvalidInput, match="by is required"):
        actions.BY_NAME["approve"].call(wb, "wx:b:1", {"by": " "})


def test_formats() -> None:
    assert [present.span(s) for s in (0.25, 12.34, 245, 7380, 200_000)] == [
        "250 ms", "12.3 s", "4 min 05 s", "2 h 03 min", "2 d 07 h"]
    assert present.ago(90.0, 100.0) == "10.0 s ago" and present.ago(None, 1.0) == ""
    assert present.count_label(1000, 1000) == "1000+" and present.count_label(7, 1000) == "7"
    assert present.first_line("boom\nat line 2") == "boom"
    assert present.pretty({"b": 1, "a": [1]}).startswith('{\n  "a"')


def test_the_runs_list_backs_off_while_nothing_changes() -> None:
    from whimbrel.ui.app import MAX_REFRESH_SECONDS, refresh_delay
    assert [refresh_delay(4.0, q) for q in range(6)] == [4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert refresh_delay(4.0, 10**6) == MAX_REFRESH_SECONDS
    assert refresh_delay(120.0, 3) == 120.0  # a base above the cap is kept


def test_the_count_cache_reads_once_per_ttl_and_filter() -> None:
    from whimbrel.ui.counts import CountCache
    now = [0.0]
    cache = CountCache(ttl=60.0, clock=lambda: now[0])
    reads: list[str] = []

    def read(key: str) -> Any:
        def go() -> dict[WorkflowState, int]:
            reads.append(key)
            return {WorkflowState.RUNNING: len(reads)}
        return go

    assert cache.get("a", read("a"))[0] == {WorkflowState.RUNNING: 1}
    now[0] = 59.0
    assert cache.get("a", read("a"))[0] == {WorkflowState.RUNNING: 1}
    cache.get("b", read("b"))
    now[0] = 60.0
    assert cache.get("a", read("a"))[0] == {WorkflowState.RUNNING: 3}
    assert reads == ["a", "b", "a"]


def test_a_count_that_hangs_holds_other_pages_only_so_long() -> None:
    import threading

    from whimbrel.contract.errors import StoreError
    from whimbrel.ui.counts import CountCache
    cache = CountCache(ttl=60.0, wait_seconds=0.2)
    release, started = threading.Event(), threading.Event()

    def hanging() -> dict[WorkflowState, int]:
        started.set()
        release.wait(10)
        return {}

    first = threading.Thread(target=cache.get, args=("k", hanging))
    first.start()
    assert started.wait(10)
    with pytest.raises(StoreError, match=r"still being read after 0\.2 s"):
        cache.get("k", hanging)
    release.set()
    first.join(10)
    assert cache.get("k", hanging)[0] == {}  # the first read's, kept
