"""``graph``: golden Mermaid/DOT text from a fixed run, and the command end to end."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import FANOUT_YAML, Run

from whimbrel import ActivityState, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.cli.graph import to_dot, to_mermaid
from whimbrel.engine.views import ActivityExec, StateChange, WorkflowExec

GOLDEN = Path(__file__).parent / "golden"
T0 = 1_717_200_000.0
WX = "3f1c2d4e-0000-5000-8000-000000000001"


def _act(name: str, state: ActivityState, attempt: int = 1, start: float = 1.0,
         end: float | None = 3.5, error: str | None = None) -> ActivityExec:
    return ActivityExec(
        activity_exec_id=f"{WX}:{name}:{attempt}", activity_name=name, workflow_exec_id=WX,
        workflow_name="fanout", state=state, attempt=attempt, output=None, error=error,
        created_epoch=T0, updated_epoch=T0 + (end or start), started_epoch=T0 + start,
        ended_epoch=None if end is None else T0 + end, heartbeat_epoch=None,
        heartbeat_timeout_seconds=None, not_before_epoch=None,
        history=(StateChange(state.value, T0 + start, "test"),))


def fixed_run() -> tuple[WorkflowDefinition, WorkflowExec]:
    defn = WorkflowDefinition.from_yaml(FANOUT_YAML)
    A = ActivityState
    acts = (
        _act("extract", A.COMPLETED, start=0.2, end=1.4),
        _act("t1", A.COMPLETED, start=1.5, end=63.0),
        _act("t2", A.FAILED, start=1.5, end=2.0, error="boom"),
        _act("t2", A.RUNNING, attempt=2, start=4.0, end=None),
        _act("t3", A.CANCELLED_RUNNING, start=1.5, end=None),
        _act("load", A.REQUESTED, start=0.0, end=None),
    )
    wf = WorkflowExec(workflow_exec_id=WX, workflow_name="fanout", version=3,
                      state=WorkflowState.CANCEL_REQUESTED, workflow_request_id="r",
                      input=None, error=None, created_epoch=T0, updated_epoch=T0 + 5,
                      ended_epoch=None, history=(), activities=acts)
    return defn, wf


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("WHIMBREL_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; rerun with " \
        "WHIMBREL_UPDATE_GOLDEN=1 and review the diff"


def test_mermaid_golden() -> None:
    defn, wf = fixed_run()
    _golden("run.mmd", to_mermaid(defn, wf, now=T0 + 10))
    _golden("definition.mmd", to_mermaid(defn))


def test_dot_golden() -> None:
    defn, wf = fixed_run()
    _golden("run.dot", to_dot(defn, wf, now=T0 + 10))
    _golden("definition.dot", to_dot(defn))


@pytest.fixture
def done_run(run: Run, write_definition: Callable[..., Path], wb: Whimbrel) -> str:
    run("definitions", "register", str(write_definition(FANOUT_YAML)))
    wx = wb.start_workflow("fanout")
    wb.wait(wx, timeout=20)
    return wx


def test_graph_command(run: Run, done_run: str, tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    mermaid = run("graph", done_run).stdout
    assert mermaid.startswith("---\ntitle: fanout · COMPLETED\n---\nflowchart LR\n")
    assert "n1 --> n2" in mermaid and "class n1,n2,n3,n4,n5 COMPLETED" in mermaid
    dot = run("graph", done_run, "--format", "dot").stdout
    assert dot.startswith('digraph "fanout" {') and "n4 -> n5;" in dot
    data = run.json("graph", done_run, "--format", "dot")
    assert data == {"workflow_exec_id": done_run, "workflow_name": "fanout", "format": "dot",
                    "output": None, "graph": dot}
    out = tmp_path / "g.mmd"
    run("graph", done_run, "-o", str(out))
    assert out.read_text() == mermaid
    definition = run("graph", "fanout", "--definition").stdout
    assert "title: fanout\n" in definition and "classDef" not in definition
    run("graph", "nope", code=3)
    if shutil.which("dot"):
        svg = run("graph", done_run, "--format", "svg").stdout
        assert "<svg" in svg
    monkeypatch.setattr(shutil, "which", lambda name: None)
    missing = run("graph", done_run, "--format", "svg", code=7)
    assert missing.stderr.startswith("error: Graphviz `dot` is not installed")
