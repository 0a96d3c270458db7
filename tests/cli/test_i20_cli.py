"""Issue 20 through the command line: a forged list cursor whose epoch is out of range is
bad input (exit 4, naming the cursor), not an ``OverflowError`` (exit 1). Written to fail
on the main of the day the issue was filed."""

from __future__ import annotations

import base64
import json

import pytest
from cli_helpers import Run

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, Whimbrel, WorkflowDefinition

INVALID = 4


def _forge(cursor: str, **fields: object) -> str:
    body = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    body.update(fields)
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize("epoch", [1e300, -1e300])
def test_list_with_a_forged_cursor_epoch_is_invalid_input(run: Run, wb: Whimbrel,
                                                          epoch: float) -> None:
    wb.register_workflow(WorkflowDefinition("two", (Act("A", launcher=LauncherSpec.external()),)))
    wb.start_workflow("two")
    wb.start_workflow("two")
    page = run.json("list", "--limit", "1")
    cursor = page["cursor"]
    assert isinstance(cursor, str) and cursor
    result = run("list", "--limit", "1", "--cursor", _forge(cursor, e=epoch), code=None)
    assert result.exit_code == INVALID, (result.exit_code, result.stderr, result.exception)
    assert "cursor" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""
