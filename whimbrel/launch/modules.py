"""The modules a worker serves (docs/contract.md, "Who runs code"): their names checked,
the modules imported, and the code workflows (``@workflow``) defined in them found.

One place for what ``Whimbrel.run_worker(modules=[...])`` / ``whimbrel worker --module``
and the deployed Lambdas given the user's code (``WHIMBREL_MODULES``, set by the CDK
construct's ``workflow_modules``) do with a list of modules; the construct checks the
names with :func:`module_names` at synth, before anything is deployed.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from whimbrel.contract.code import CodeWorkflow
from whimbrel.contract.errors import InvalidInput

#: A module's dotted name: identifiers joined by dots (``shop.workflows``).
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def module_names(raw: str | Iterable[str], *, field: str = "modules") -> tuple[str, ...]:
    """The module names in ``raw`` (a list, or text separated by commas or spaces, as
    ``WHIMBREL_MODULES`` holds them), each a dotted identifier, in order, once each.

    Raises:
        InvalidInput: a name that is not a dotted identifier (naming it and ``field``).
    """
    names = raw.replace(",", " ").split() if isinstance(raw, str) else [str(n) for n in raw]
    bad = [n for n in names if not _DOTTED.fullmatch(n)]
    if bad:
        raise InvalidInput(f"{field}: {', '.join(map(repr, bad))} is not a module name (a "
                           "dotted Python identifier, e.g. 'shop.workflows')", field=field)
    return tuple(dict.fromkeys(names))


def import_modules(names: Iterable[str], *, what: str,
                   field: str = "modules") -> list[ModuleType]:
    """Import each of ``names``; ``what`` (who asks) starts the error's message.

    Raises:
        InvalidInput: a module that cannot be imported (its name and why).
    """
    modules = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except ImportError as exc:
            raise InvalidInput(f"{what}: cannot import module {name!r}: {exc}",
                               field=field) from exc
    return modules


def code_workflows(modules: Iterable[ModuleType]) -> list[CodeWorkflow[Any]]:
    """The code workflows defined in ``modules`` (a module-level ``@workflow`` whose
    function lives in that module, not one it imported from another), by name."""
    found: dict[str, CodeWorkflow[Any]] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, CodeWorkflow) \
                    and value.definition().code.partition(":")[0] == module.__name__:
                found.setdefault(value.name, value)
    return [found[name] for name in sorted(found)]
