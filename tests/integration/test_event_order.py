"""Simple API events of one activity arriving out of order (on AWS, two event items can
sit in different stream shards): a COMPLETED report ahead of its RUNNING report."""

from __future__ import annotations

import uuid
from typing import Any

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.engine.intake import IMPLIED_RUNNING, Intake, Outcome


def event_record(aeid: str, transition: str, output: str | None = None) -> dict[str, Any]:
    image: dict[str, Any] = {
        "activity_event_id": {"S": str(uuid.uuid4())},
        "activity_exec_id": {"S": aeid},
        "transition": {"S": transition},
        "when_epoch": {"N": "1700000000"},
    }
    if output is not None:
        image["output"] = {"S": output}
    return {"eventName": "INSERT", "eventID": str(uuid.uuid4()),
            "dynamodb": {"NewImage": image}}


def test_completed_ahead_of_running_is_applied_and_the_late_running_ignored(
        wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("ooo", (
        ActivityDefinition("a", launcher=LauncherSpec.external()),
        ActivityDefinition("b", ("a",), launcher=LauncherSpec.external()),
    )))
    wx = wb.start_workflow("ooo")
    a = activity_exec_id(wx, "a", 1)
    assert wb.get_activity(a).state is ActivityState.READY
    intake = Intake(wb.engine)

    done = event_record(a, "COMPLETED", '{"n": 1}')
    first = intake.activity_event(done)
    assert first.outcome is Outcome.APPLIED, first
    act = wb.get_activity(a)
    assert act.state is ActivityState.COMPLETED
    assert act.output == {"n": 1}
    assert [h.state for h in act.history] == ["REQUESTED", "READY", "RUNNING", "COMPLETED"]
    assert (act.history[2].by or "").endswith(IMPLIED_RUNNING)
    assert wb.get_activity(activity_exec_id(wx, "b", 1)).state is ActivityState.READY

    late = intake.activity_event(event_record(a, "RUNNING"))
    assert late.outcome is Outcome.DUPLICATE, late
    again = intake.activity_event(done)  # the COMPLETED record redelivered
    assert again.outcome is Outcome.DUPLICATE, again
    assert wb.list_rejections() == []
    assert wb.get_activity(a).state is ActivityState.COMPLETED

    b = activity_exec_id(wx, "b", 1)
    assert intake.activity_event(event_record(b, "RUNNING")).outcome is Outcome.APPLIED
    assert intake.activity_event(event_record(b, "COMPLETED")).outcome is Outcome.APPLIED
    assert wb.get_workflow(wx).state is WorkflowState.COMPLETED


def test_a_running_report_for_an_activity_that_never_ran_is_still_a_conflict(
        wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("ooo2", (
        ActivityDefinition("a", launcher=LauncherSpec.external()),)))
    wx = wb.start_workflow("ooo2")
    a = activity_exec_id(wx, "a", 1)
    intake = Intake(wb.engine)
    assert intake.activity_event(event_record(a, "RUNNING")).outcome is Outcome.APPLIED
    assert intake.activity_event(event_record(a, "COMPLETED")).outcome is Outcome.APPLIED
    # A second worker claiming to run it is not a late duplicate: it is recorded.
    stray = intake.activity_event(event_record(a, "RUNNING"))
    assert stray.outcome is Outcome.REJECTED
    assert len(wb.list_rejections()) == 1
