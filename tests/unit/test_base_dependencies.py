"""``pip install whimbrel`` gives a working library and CLI: every third-party module the
package imports (outside the ``ui`` extra's console) comes with the base dependencies.

A module imported only while type checking, or under ``try: ... except ImportError``
(an optional part that says what to install), is exempt. The wheel test
(tests/cli/test_wheel.py) proves the same end to end in a fresh virtualenv; this one
names the offending import in a second.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
#: The web console: installed with the ``ui`` extra, and `whimbrel ui` says so when absent.
OPTIONAL_PARTS = ("whimbrel/ui/",)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _base_closure() -> set[str]:
    """Distributions that ``pip install whimbrel`` brings, by normalised name: the base
    dependencies (with the extras they name) and what they require, transitively."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    seen: set[tuple[str, frozenset[str]]] = set()
    found: set[str] = set()
    while todo:
        req = todo.pop()
        key = (_norm(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        found.add(key[0])
        try:
            requires = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue  # not installed here: its own imports are not ours to check
        for text in requires:
            sub = Requirement(text)
            envs = [{"extra": e} for e in req.extras] or [{"extra": ""}]
            if sub.marker is None or any(sub.marker.evaluate(env) for env in envs):
                todo.append(sub)
    return found


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside ``if TYPE_CHECKING:`` or a ``try`` that handles ImportError."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
        if isinstance(node, ast.Try) and any(
                h.type is not None and re.search(r"\b(ImportError|ModuleNotFoundError)\b",
                                                 ast.unparse(h.type))
                for h in node.handlers):
            return True
    return False


def _third_party_imports() -> dict[str, list[str]]:
    """Top-level module -> the files that import it unguarded."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "whimbrel").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(OPTIONAL_PARTS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            if _guarded(node, parents):
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "whimbrel":
                    found.setdefault(top, []).append(rel)
    return found


def test_every_import_comes_with_the_base_dependencies() -> None:
    base = _base_closure()
    owners = md.packages_distributions()
    missing = {
        top: files for top, files in _third_party_imports().items()
        if not any(_norm(d) in base for d in owners.get(top, []))
    }
    assert not missing, (
        "imported but not brought by pyproject.toml's [project] dependencies "
        f"(declare them there, or guard an optional part): {missing}")


def test_the_cli_imports_no_click_of_its_own() -> None:
    # Typer (>= 0.26) ships its own copy of Click and no longer depends on click: an
    # `import click` works only where some extra happens to bring it, and click's
    # exception classes are not the ones Typer's parser raises.
    offenders = _third_party_imports().get("click", [])
    assert not offenders, offenders
