"""`whimbrel status` of a code run (issue 26): its steps as they ran, its properties, a
non-determinism error in full."""

from __future__ import annotations

import wb_code_workflows as code
from cli_helpers import Run

from whimbrel import Whimbrel


def test_status_shows_a_code_runs_steps_and_properties(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(code.props)
    wx = wb.start_workflow("props", {"order": "o-9"})
    human = run("status", wx).stdout
    assert "gate#1" in human and "READY" in human
    assert 'properties: {"order": "o-9", "stage": "waiting for the gate"}' in human
    wb.transition_activity(f"{wx}:gate#1:1", "RUNNING")
    wb.transition_activity(f"{wx}:gate#1:1", "COMPLETED", output="open")
    assert wb.wait(wx, timeout=20).state.value == "COMPLETED"
    data = run.json("status", wx)
    assert data["properties"] == {"order": "o-9", "stage": "done", "gate": "open"}
    assert data["output"] == "open"
    assert [a["activity_name"] for a in data["activities"]] == ["gate#1"]
