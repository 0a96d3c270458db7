"""Conditions through the CLI (issue 22): skipped work in ``status`` and ``graph``, and a
bad ``when`` refused at registration with its position."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cli_helpers import Run

from whimbrel import Whimbrel

BRANCH_YAML = """\
name: branch
activities:
  - name: check
    launcher: python:wb_test_activities:echo
  - name: big
    depends_on: [check]
    when: "input.size > `10`"
    launcher: python:wb_test_activities:echo
  - name: small
    depends_on: [check]
    when: "input.size <= `10`"
    launcher: python:wb_test_activities:echo
  - name: done
    depends_on: [big, small]
    trigger: none_failed
    launcher: python:wb_test_activities:echo
"""


def test_status_and_graph_show_skipped_work(run: Run, wb: Whimbrel,
                                            write_definition: Callable[..., Path]) -> None:
    run("definitions", "register", str(write_definition(BRANCH_YAML)))
    wx = wb.start_workflow("branch", {"size": 3})
    assert wb.wait(wx, timeout=20).state.value == "COMPLETED"
    data = run.json("status", wx)
    states = {a["activity_name"]: a["state"] for a in data["activities"]}
    assert states == {"check": "COMPLETED", "big": "SKIPPED", "small": "COMPLETED",
                      "done": "COMPLETED"}
    human = run("status", wx).stdout
    assert "SKIPPED" in human and "big" in human
    mermaid = run("graph", wx).stdout
    assert "classDef SKIPPED" in mermaid and "SKIPPED" in mermaid.split("classDef")[0]


def test_a_bad_when_is_refused_at_registration(run: Run, wb: Whimbrel,
                                               write_definition: Callable[..., Path]) -> None:
    bad = BRANCH_YAML.replace('"input.size > `10`"', '"input.size >> 1"')
    result = run("definitions", "register", str(write_definition(bad)), code=None)
    assert result.exit_code != 0
    assert "when is not valid JMESPath at position 12" in result.stderr, result.stderr
    assert wb.list_definitions("branch") == []
