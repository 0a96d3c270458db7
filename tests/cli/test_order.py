"""Every CLI view lists activities in the DAG's order, attempts of one activity together.

The definition below is written in an order that is neither topological nor
alphabetical, so each of the three orders gives a different answer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import boto3
import pytest
from cli_helpers import Run

from whimbrel import ActivityDefinition, Transition, Whimbrel, WorkflowDefinition

ORDERED_YAML = """\
name: ordered
activities:
  - name: report
    depends_on: [merge]
    launcher: python:wb_test_activities:echo
  - name: merge
    depends_on: [b_fetch, a_fetch]
    launcher: python:wb_test_activities:echo
  - name: b_fetch
    depends_on: [root]
    launcher: python:wb_test_activities:flaky
    retry: {max_attempts: 2, initial_interval_seconds: 0}
  - name: a_fetch
    depends_on: [root]
    launcher: python:wb_test_activities:echo
  - name: root
    launcher: python:wb_test_activities:echo
"""
DAG = ["root", "b_fetch", "a_fetch", "merge", "report"]
ATTEMPTS = [("root", 1), ("b_fetch", 1), ("b_fetch", 2), ("a_fetch", 1), ("merge", 1),
            ("report", 1)]


@pytest.fixture
def finished(run: Run, wb: Whimbrel, write_definition: Callable[..., Path]) -> str:
    """A COMPLETED run of ``ordered`` whose b_fetch needed a second attempt."""
    run("definitions", "register", str(write_definition(ORDERED_YAML)))
    wf = run.json("submit", "ordered", "--wait", "--run-here", "--timeout", "60")
    assert wf["state"] == "COMPLETED"
    return str(wf["workflow_exec_id"])


def _first_column(text: str, names: list[str]) -> list[str]:
    """The activity names in the order a table or a tree prints them."""
    out = []
    for line in text.splitlines():
        words = line.replace("│", " ").replace("├──", " ").replace("└──", " ").split()
        if words and words[0] in names:
            out.append(words[0])
    return out


def test_status_and_definition_views_follow_the_dag(run: Run, finished: str) -> None:
    data = run.json("status", finished)
    assert [(a["activity_name"], a["attempt"]) for a in data["activities"]] == ATTEMPTS
    assert _first_column(run("status", finished).stdout, DAG) == DAG
    assert _first_column(run("status", finished, "--all-attempts").stdout, DAG) == [
        name for name, _ in ATTEMPTS]
    assert _first_column(run("status", finished, "--view", "tree").stdout, DAG) == DAG
    assert _first_column(run("definitions", "show", "ordered").stdout, DAG) == DAG
    # The JSON is the definition as registered: registering it again changes nothing.
    shown = run.json("definitions", "show", "ordered")
    assert [a["name"] for a in shown["definition"]["activities"]] == [
        "report", "merge", "b_fetch", "a_fetch", "root"]


def test_without_the_definition_the_run_order_is_kept(run: Run, wb: Whimbrel,
                                                      finished: str) -> None:
    # The definition row is gone (deleted by hand): the views fall back on the order
    # the activities started in, still never alphabetical, attempts still together.
    raw = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    raw.delete_item(TableName=f"{wb.table_prefix}workflow_definition",
                    Key={"workflow_name": {"S": "ordered"}, "version": {"N": "1"}})
    acts = [(a["activity_name"], a["attempt"])
            for a in run.json("status", finished)["activities"]]
    assert acts[0] == ("root", 1) and acts[-2:] == [("merge", 1), ("report", 1)]
    middle = acts[1:4]
    assert sorted(middle) == [("a_fetch", 1), ("b_fetch", 1), ("b_fetch", 2)]
    assert middle.index(("b_fetch", 2)) == middle.index(("b_fetch", 1)) + 1
    assert _first_column(run("status", finished, "--view", "tree").stdout, DAG) in (
        DAG, ["root", "a_fetch", "b_fetch", "merge", "report"])


def test_cancel_lists_what_still_runs_in_dag_order(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("two", (
        ActivityDefinition("zed"), ActivityDefinition("alpha"))))
    wx = wb.start_workflow("two")
    for name in ("alpha", "zed"):
        wb.transition_activity(wb.get_workflow(wx).activity(name).activity_exec_id,
                               Transition.RUNNING)
    assert run.json("cancel", wx)["still_running"] == ["zed", "alpha"]
