"""Notifications of a code workflow's run (issue 26 with the events of issue 18): a step
that fails for good is announced like a DAG activity, and the run's end carries the
code's return value as its output."""

from __future__ import annotations

import wb_code_workflows as code
from notify_support import notify_records

from whimbrel import Whimbrel, WorkflowState
from whimbrel.contract.notifications import DetailType
from whimbrel.observe import MemoryPublisher, NotifyOutcome


def test_a_code_runs_failed_step_and_its_end_are_published(wb: Whimbrel) -> None:
    wb.register_workflow(code.caught)
    wx = wb.start_workflow("caught")
    run = wb.wait(wx, timeout=30)
    assert run.state is WorkflowState.COMPLETED, run
    publisher = MemoryPublisher()
    notifier = wb.notifier(publisher)
    outcomes = [notifier.process(record).outcome for record in notify_records(wb)
                if wx in repr(record)]
    assert NotifyOutcome.REJECTED not in outcomes, outcomes
    by_id = {n.event_id: n for n in publisher.published}
    failed = by_id[f"{wx}:boom#1:2/failed"]
    assert failed.detail_type is DetailType.ACTIVITY_FAILED
    assert (failed.detail["attempt"], failed.detail["max_attempts"]) == (2, 2)
    assert failed.detail["error"].startswith("RuntimeError: card declined")
    ended = by_id[f"{wx}/ended/0"]
    assert ended.detail["state"] == "COMPLETED"
    assert ended.detail["output"] == run.output
