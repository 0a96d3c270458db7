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


#: Each golden file and how its text is made. ``./scripts/update-golden`` rewrites them
#: (and only it: a test run compares, whatever the environment says).
GOLDEN_CASES: dict[str, Callable[[], str]] = {
    "run.mmd": lambda: to_mermaid(*fixed_run(), now=T0 + 10),
    "definition.mmd": lambda: to_mermaid(fixed_run()[0]),
    "run.dot": lambda: to_dot(*fixed_run(), now=T0 + 10),
    "definition.dot": lambda: to_dot(fixed_run()[0]),
}


def check_golden(path: Path, text: str) -> None:
    """Compare ``text`` with the golden file ``path``; never writes it."""
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} changed; if that is intended, run ./scripts/update-golden and "
        "review the diff")


def update_golden(folder: Path = GOLDEN) -> list[str]:
    """Rewrite every golden file in ``folder``; returns the names whose text changed."""
    changed = []
    for name, make in GOLDEN_CASES.items():
        path, text = folder / name, make()
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden(name: str) -> None:
    check_golden(GOLDEN / name, GOLDEN_CASES[name]())


def test_a_golden_test_never_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: with WHIMBREL_UPDATE_GOLDEN set the golden tests wrote the file they
    then compared with, and passed whatever the output."""
    monkeypatch.setenv("WHIMBREL_UPDATE_GOLDEN", "1")
    stale = tmp_path / "run.mmd"
    stale.write_text("old text\n", encoding="utf-8")
    with pytest.raises(AssertionError, match=r"run \./scripts/update-golden"):
        check_golden(stale, GOLDEN_CASES["run.mmd"]())
    assert stale.read_text(encoding="utf-8") == "old text\n"


def test_update_golden_writes_every_case(tmp_path: Path) -> None:
    assert update_golden(tmp_path) == list(GOLDEN_CASES)
    for name, make in GOLDEN_CASES.items():
        check_golden(tmp_path / name, make())
    assert update_golden(tmp_path) == []  # nothing changed the second time
    script = Path(__file__).resolve().parents[2] / "scripts" / "update-golden"
    assert os.access(script, os.X_OK) and "update_golden" in script.read_text()

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
