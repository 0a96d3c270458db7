"""Issue 31 on the command line: ``cancel`` of an ended run and ``submit`` with a
request id given another input are refused with the API's structured error and one exit
code each (5: the state does not allow it; 4: invalid input)."""

from __future__ import annotations

import json

from cli_helpers import Run

from whimbrel import ActivityDefinition, Transition, Whimbrel, WorkflowDefinition

ONE = WorkflowDefinition("one_cli", (ActivityDefinition("a"),))


def _ended(wb: Whimbrel, state: str) -> str:
    wx = wb.start_workflow("one_cli")
    a = wb.claim(workflow_name="one_cli")
    assert a is not None
    wb.transition_activity(a.activity_exec_id,
                           Transition.COMPLETED if state == "COMPLETED" else Transition.FAILED)
    assert wb.get_workflow(wx).state.value == state
    return wx


def test_cancel_of_an_ended_run_says_so_with_exit_5(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(ONE)
    for state in ("COMPLETED", "FAILED"):
        wx = _ended(wb, state)
        result = run("cancel", wx, code=5)
        assert result.stderr == f"error: workflow {wx} already ended {state}: nothing to " \
            "cancel\n"
        body = json.loads(run("cancel", wx, "--json", code=5).stderr)
        assert body == {"error": "WorkflowAlreadyEnded", "workflow_exec_id": wx,
                        "workflow_state": state, "exit_code": 5,
                        "message": f"workflow {wx} already ended {state}: nothing to cancel"}
    live = wb.start_workflow("one_cli")
    assert run.json("cancel", live)["state"] == "CANCELLED"
    assert run.json("cancel", live)["state"] == "CANCELLED"  # again: quietly


def test_submit_with_a_request_id_and_another_input_is_refused(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(ONE)
    first = run.json("submit", "one_cli", "--request-id", "r-31", "--input", '{"n": 1}')
    again = run.json("submit", "one_cli", "--request-id", "r-31", "--input", '{"n": 1}')
    assert again["workflow_exec_id"] == first["workflow_exec_id"]
    result = run("submit", "one_cli", "--request-id", "r-31", "--input", '{"n": 2}', code=4)
    assert "request id 'r-31' already stands for run" in result.stderr
    assert "with another input" in result.stderr
    body = json.loads(run("submit", "one_cli", "--request-id", "r-31", "--input",
                          '{"n": 2}', "--json", code=4).stderr)
    assert body["error"] == "RequestIdReused" and body["request_id"] == "r-31"
