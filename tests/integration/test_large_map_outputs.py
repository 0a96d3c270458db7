"""Issue 20: no output silently becomes null. A map whose list is too large for its own
row keeps it on its items; every reader puts the list back together (the child's output
is tested in test_i20_children.py): get_activity of the map, and the run's ended event.
"""

from __future__ import annotations

from notify_support import notify_records

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id
from whimbrel.observe import MemoryPublisher

FIFTY_KB = "x" * 50_000


def _big_map_run(wb: Whimbrel) -> str:
    wb.register_workflow(WorkflowDefinition("i20_bigmap", (
        Act("m", launcher=LauncherSpec.external(), map_over="$input.xs"),)))
    wx = wb.start_workflow("i20_bigmap", {"xs": [0, 1]})
    for i in (0, 1):
        item = activity_exec_id(wx, f"m#{i}", 1)
        wb.transition_activity(item, "RUNNING")
        wb.transition_activity(item, "COMPLETED", output=FIFTY_KB)
    assert wb.wait(wx, timeout=30).state.value == "COMPLETED"
    # The premise: the list is too large for the map's own row.
    assert wb.store.get_activity(activity_exec_id(wx, "m", 1)).output is None  # type: ignore[union-attr]
    return wx


def test_get_activity_of_a_large_map_gives_its_whole_list(wb: Whimbrel) -> None:
    wx = _big_map_run(wb)
    node = wb.get_activity(activity_exec_id(wx, "m", 1))
    assert node.state is ActivityState.COMPLETED
    assert node.output == [FIFTY_KB, FIFTY_KB]
    assert wb.get_workflow(wx).output == {"m": [FIFTY_KB, FIFTY_KB]}


def test_the_ended_event_of_a_large_map_run_never_says_null(wb: Whimbrel) -> None:
    wx = _big_map_run(wb)
    publisher = MemoryPublisher()
    notifier = wb.notifier(publisher)
    for record in notify_records(wb):
        notifier.process(record)
    [ended] = [n for n in publisher.published if n.event_id == f"{wx}/ended/0"]
    assert ended.detail["state"] == "COMPLETED"
    # Too large for an event: it says so (the consumer reads the run), never {"m": null}.
    assert ended.detail.get("output_truncated") is True, ended.detail
    assert "output" not in ended.detail, ended.detail
