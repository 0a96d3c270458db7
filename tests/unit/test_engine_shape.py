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
    """Each engine module's imports of other engine modules, TYPE_CHECKING ones too: a
    type-only import closes a circle as surely as any (``Core`` names the parts by their
    protocols in core_parts.py, so no part's module is imported back)."""
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


# -- issue 28: one door to each part, one dispatcher ---------------------------------

#: The core's parts: reached as ``engine.<part>.op(…)``, never as module functions.
PARTS = {"definitions": "Definitions", "reads": "Reads", "known": "Known",
         "threads": "Threads", "starting": "Starting", "moves": "Moves", "flow": "Flow",
         "launches": "Launches", "ending": "Ending", "heartbeats": "Heartbeats",
         "claims": "Claims", "handover": "Handover", "inputs": "Inputs"}


def _classes(root: Path) -> dict[str, ast.ClassDef]:
    found: dict[str, ast.ClassDef] = {}
    for path in root.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                found[node.name] = node
    return found


def test_no_class_hierarchy_deeper_than_two_in_the_engine() -> None:
    # Depth counts the engine's own classes on a class's chain of bases (a feature and
    # the Feature protocol: 2); errors derive from the contract's tree (is-a).
    classes = _classes(PACKAGE / "engine")

    def depth(name: str) -> int:
        node = classes.get(name)
        if node is None:
            return 0
        bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
        return 1 + max((depth(b) for b in bases), default=0)

    deepest = {name: depth(name) for name in classes}
    assert max(deepest.values()) <= 2, {n: d for n, d in deepest.items() if d > 2}


def test_the_engine_holds_its_parts_and_defines_few_methods() -> None:
    from whimbrel.engine import Engine

    assert Engine.__bases__ == (object,)  # holds its plumbing, inherits nothing
    node = _classes(PACKAGE / "engine")["Engine"]
    methods = [n.name for n in node.body if isinstance(n, ast.FunctionDef)]
    assert methods == ["__init__", "feature", "close"]  # issue 28: at most 20
    init = next(n for n in node.body if isinstance(n, ast.FunctionDef))
    held = {t.attr: v.func.id for n in ast.walk(init) if isinstance(n, ast.Assign)
            for t in n.targets if isinstance(t, ast.Attribute)
            for v in [n.value] if isinstance(v, ast.Call) and isinstance(v.func, ast.Name)}
    assert {p: held.get(p) for p in PARTS} == PARTS


def test_a_part_is_reached_one_way() -> None:
    # No module function of a part takes the engine: its operations are its methods.
    for module in PARTS:
        tree = ast.parse((PACKAGE / "engine" / f"{module}.py").read_text())
        doors = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                 and n.args.args and n.args.args[0].arg in {"engine", "core"}]
        assert not doors, (module, doors)


def test_hooks_are_asked_only_through_the_dispatcher() -> None:
    for path in (PACKAGE / "engine").rglob("*.py"):
        if path.name in {"hooks.py", "engine.py"}:
            continue
        text = path.read_text()
        assert ".features" not in text, path  # no hand-written loop over the features


def test_every_hook_is_asked_in_one_named_way() -> None:
    from whimbrel.engine.hooks import KINDS

    hooks = {n for n, v in vars(Feature).items() if callable(v) and not n.startswith("_")}
    assert set(KINDS) == hooks


def test_code_outside_the_engine_imports_only_its_public_face() -> None:
    import whimbrel.engine as face

    outside = [p for p in PACKAGE.rglob("*.py")
               if p.relative_to(PACKAGE).parts[0] != "engine"]
    outside += list((PACKAGE.parent / "lambdas").rglob("*.py"))
    wrong: list[str] = []
    for path in outside:
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            if isinstance(node, ast.ImportFrom) and module.startswith("whimbrel.engine"):
                names = {a.name for a in node.names}
                if node.module != "whimbrel.engine" or not names <= set(face.__all__):
                    wrong.append(f"{path.name}: from {node.module} import {sorted(names)}")
            elif isinstance(node, ast.Import):
                wrong += [f"{path.name}: import {a.name}" for a in node.names
                          if a.name.startswith("whimbrel.engine.")]
    assert not wrong, wrong
    for name in face.__all__:
        assert hasattr(face, name), name


def test_the_docs_hook_table_is_the_dispatchers() -> None:
    import re

    from whimbrel.engine.hooks import KINDS, takes

    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    names = [make.__name__ for make in FEATURES if isinstance(make, type)]
    rows: dict[str, tuple[str, set[str]]] = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        hook = re.fullmatch(r"`(\w+)\(.*\)`", cells[0]) if len(cells) == 4 else None
        if hook and hook.group(1) in KINDS:
            rows[hook.group(1)] = (cells[1], {n for n in names
                                              if re.search(rf"\b{n}\b", cells[3])})
    assert set(rows) == set(KINDS)
    for hook, (how, who) in rows.items():
        taken = {make.__name__ for make in FEATURES
                 if isinstance(make, type) and takes(make, hook)}
        assert (how, who) == (KINDS[hook], taken), hook


def test_a_hook_is_asked_only_the_way_kinds_says() -> None:
    import pytest

    from whimbrel.engine.hooks import Hooks

    hooks = Hooks([])
    with pytest.raises(TypeError, match="moved is asked as 'observe each'"):
        hooks.take_over(Feature.moved, None)  # type: ignore[arg-type]
    assert hooks.first_answer(Feature.waiting_attempt, None, "a") is None  # type: ignore[arg-type]
