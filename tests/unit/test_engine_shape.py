"""The engine's shape (issue 21): features behind one protocol, in one order, importing
no other feature; no import cycle; every row verb in one registry; state sets derived
from the contract's tables."""

from __future__ import annotations

import ast
from pathlib import Path

import whimbrel
from whimbrel.contract.commands import WORKFLOW_COMMANDS, Command
from whimbrel.contract.states import (
    ACTIVITY_FAILED,
    ACTIVITY_GAVE_UP,
    ACTIVITY_LAUNCHED,
    ACTIVITY_NOT_LAUNCHED,
    ACTIVITY_RELEASED,
    ACTIVITY_STOPPING,
    ACTIVITY_UNSUCCESSFUL,
    WORKFLOW_PAUSABLE,
    WORKFLOW_REDRIVABLE,
    WORKFLOW_WAITING,
    ActivityState,
    WorkflowState,
)
from whimbrel.engine.engine import FEATURES
from whimbrel.engine.feature import Feature
from whimbrel.engine.intake.rows import ROWS, RUN_VERBS

A, W = ActivityState, WorkflowState
PACKAGE = Path(whimbrel.__file__).parent
#: The modules that make up the features (signals.py is the waits feature's signal kind).
FEATURE_MODULES = {"code_runs", "conditions", "maps", "children", "handlers", "redrive",
                   "suspend", "waits", "lost", "pools", "schedules", "tracing"}


def _imports() -> dict[str, set[str]]:
    """Each engine module's imports of other engine modules (TYPE_CHECKING ones too)."""
    graph: dict[str, set[str]] = {}
    for path in (PACKAGE / "engine").rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        name = name.removesuffix(".__init__")
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module \
                    and node.module.startswith("whimbrel.engine"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    deps.add(full if (PACKAGE.parent / (full.replace(".", "/") + ".py"))
                             .exists() else node.module)
        graph[name] = deps - {name}
    return graph


def test_no_import_cycle_in_the_engine() -> None:
    graph = _imports()
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for dep in graph.get(node, ()):
            assert seen.get(dep) != 1, " -> ".join([*path, node, dep])
            if dep not in seen:
                visit(dep, [*path, node])
        seen[node] = 2

    for module in graph:
        if module not in seen:
            visit(module, [])


def test_no_feature_imports_another() -> None:
    graph = _imports()
    features = {f"whimbrel.engine.{m}" for m in FEATURE_MODULES}
    for module in features:
        assert not graph[module] & (features - {module}), module


def test_every_feature_is_one_object_behind_the_protocol() -> None:
    assert len(FEATURES) == len(FEATURE_MODULES)
    for make in FEATURES:
        assert isinstance(make, type) and Feature in make.__mro__
        assert make.__module__.rsplit(".", 1)[-1] in FEATURE_MODULES


def test_every_row_verb_beside_the_moves_has_one_entry() -> None:
    # Every command has its entry; a contract verb has one only for a row shape beside
    # its plain move (CANCEL naming a whole run).
    assert set(ROWS) == set(Command) | RUN_VERBS
    assert set(Command) >= WORKFLOW_COMMANDS


def test_state_sets_are_the_contracts() -> None:
    assert {A.FAILED, A.TIMED_OUT, A.LOST} == ACTIVITY_FAILED
    assert {A.FAILED, A.TIMED_OUT, A.LOST, A.CANCELLED} == ACTIVITY_UNSUCCESSFUL
    assert {A.CANCELLED, A.CANCELLED_RUNNING, A.TIMED_OUT, A.LOST} == ACTIVITY_STOPPING
    assert {A.TIMED_OUT, A.LOST} == ACTIVITY_GAVE_UP
    assert {A.READY, A.QUEUED} == ACTIVITY_RELEASED
    assert {A.QUEUED, A.PREPARING} == ACTIVITY_LAUNCHED
    assert {A.REQUESTED, A.READY} == ACTIVITY_NOT_LAUNCHED
    assert {W.FAILED, W.CANCELLED, W.TIMED_OUT} == WORKFLOW_REDRIVABLE
    assert {W.RUNNING, W.SUSPENDED} == WORKFLOW_PAUSABLE
    assert {W.QUEUED} == WORKFLOW_WAITING
