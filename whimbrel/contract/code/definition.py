"""A code workflow as the tables know it: ``@workflow`` turns a function into one, and its
registered definition names the function (``module:qualname``) instead of a DAG.

A code run's activities are its *steps*, ``<name>#<k>`` for the k-th call of a name. What
each step was asked to be (launcher, retry, time-outs, pool, priority) is decided by the
code as it runs, so it is written on the step's own attempt rows (``step``, compact
JSON) and read back from there; :meth:`CodeDefinition.bound` gives the engine a
definition of one run whose ``activity(name)`` answers for its steps.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import InvalidDefinition
from whimbrel.contract.limits import WORKFLOW_NAME_PATTERN
from whimbrel.contract.priority import DEFAULT_PRIORITY

_NAME = re.compile(WORKFLOW_NAME_PATTERN)
_CODE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.<>]*$")
_KEYS = frozenset({"name", "code", "description", "timeout_seconds", "retention_days",
                   "max_running", "priority"})

StepLookup = Callable[[str], ActivityDefinition]


@dataclass(frozen=True)
class CodeDefinition(WorkflowDefinition, stored_as="code"):
    """The registered form of a code workflow (see :func:`whimbrel.workflow`).

    It stands where a DAG's definition does (the engine, the tables, the CLI): no
    activities are declared, ``code`` names the function that decides what runs.

    Attributes:
        code: ``module:qualname`` of the decorated function.
        priority: the default priority of its runs (0 first to 9; 5 the default).
    """

    activities: tuple[ActivityDefinition, ...] = ()
    code: str = ""
    priority: int = DEFAULT_PRIORITY
    _lookup: StepLookup | None = field(default=None, compare=False, repr=False)

    def activity(self, name: str) -> ActivityDefinition:
        """The step ``name`` (``<name>#<k>``) as its run asked for it.

        Raises:
            InvalidDefinition: this definition is not bound to a run.
        """
        if self._lookup is None:
            raise InvalidDefinition(self.name, [
                f"{name}: a code workflow's steps are known only within a run"])
        return self._lookup(name)

    def bound(self, lookup: StepLookup) -> CodeDefinition:
        """This definition, answering ``activity(name)`` for one run's steps."""
        return replace(self, _lookup=lookup)

    # -- validation and (de)serialisation ------------------------------------------------

    def problems(self) -> list[str]:
        out: list[str] = []
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            out.append(f"workflow name {self.name!r} must match {WORKFLOW_NAME_PATTERN}")
        if not isinstance(self.code, str) or not _CODE.match(self.code):
            out.append(f"code {self.code!r} must be 'module:function' (a module-level "
                       "function decorated with @workflow)")
        t = self.timeout_seconds
        if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or t <= 0):
            out.append("timeout_seconds must be a number > 0")
        r = self.retention_days
        if r not in (None, "default") and (isinstance(r, bool) or not isinstance(r, int | float)
                                           or not 1 <= r < float("inf")):
            out.append("retention_days must be a number >= 1, None or 'default'")
        m = self.max_running
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            out.append("max_running must be an integer >= 1")
        p = self.priority
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= 9:
            out.append("priority must be an integer from 0 (first) to 9")
        return out

    def validate(self) -> CodeDefinition:
        """Return self when valid.

        Raises:
            InvalidDefinition: listing every problem found.
        """
        problems = self.problems()
        if problems:
            raise InvalidDefinition(str(self.name), problems)
        return self

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "code": self.code}
        if self.description:
            out["description"] = self.description
        if self.timeout_seconds is not None:
            out["timeout_seconds"] = self.timeout_seconds
        if self.retention_days != "default":
            out["retention_days"] = self.retention_days
        if self.max_running is not None:
            out["max_running"] = self.max_running
        if self.priority != DEFAULT_PRIORITY:
            out["priority"] = self.priority
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CodeDefinition:
        """Raises: InvalidDefinition: unknown fields or invalid values."""
        unknown = sorted(set(data) - _KEYS)
        name = str(data.get("name"))
        if unknown:
            raise InvalidDefinition(name, [f"unknown field(s) {', '.join(unknown)}"])
        return cls(name=data.get("name"),  # type: ignore[arg-type]  # problems() says
                   code=data.get("code"),  # type: ignore[arg-type]
                   description=str(data.get("description") or ""),
                   timeout_seconds=data.get("timeout_seconds"),
                   retention_days=data.get("retention_days", "default"),
                   max_running=data.get("max_running"),
                   priority=data.get("priority", DEFAULT_PRIORITY)).validate()


# -- a step's spec on its rows ---------------------------------------------------------


@lru_cache(maxsize=1)
def _plain() -> dict[str, Any]:
    return ActivityDefinition("s").to_dict()


def encode_step(seq: int, spec: ActivityDefinition, patches: tuple[str, ...] = (),
                cleanup: bool = False) -> str:
    """A step's position in its run, the ``ctx.patched`` ids passed just before it, and
    what it was asked to be, as compact JSON (only what differs from a plain activity:
    the row stays small); ``cleanup``: asked for by the code's clean-up after a cancel
    (it runs while the run is CANCEL_REQUESTED)."""
    full = spec.to_dict()
    plain = _plain()
    out: dict[str, Any] = {"seq": seq}
    if patches:
        out["patches"] = list(patches)
    if cleanup:
        out["cleanup"] = 1
    for key, value in full.items():
        if key == "name" or plain.get(key) == value:
            continue
        if key == "retry":
            value = {k: v for k, v in value.items() if plain["retry"].get(k) != v}
        out[key] = value
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=4096)
def decode_step(text: str, name: str) -> tuple[int, ActivityDefinition]:
    """``(seq, spec)`` of a step row's ``step`` attribute; ``name`` is the step's base
    name (``charge`` of ``charge#2``).

    Raises:
        InvalidDefinition: the attribute does not hold a step.
    """
    try:
        data = json.loads(text)
        seq = int(data.pop("seq"))
        data.pop("patches", None)  # step_patches reads them
        data.pop("cleanup", None)  # is_cleanup_step reads it
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidDefinition(name, [f"step attribute {text[:200]!r} is not a step: {exc}"]
                                ) from None
    plain = _plain()
    retry = {**plain["retry"], **data.pop("retry", {})}
    return seq, ActivityDefinition.from_dict({**plain, **data, "name": name, "retry": retry})


def step_patches(text: str) -> tuple[str, ...]:
    """The ``ctx.patched`` ids a step row's ``step`` attribute records."""
    try:
        return tuple(str(p) for p in json.loads(text).get("patches", ()))
    except (ValueError, AttributeError, TypeError):
        return ()


def is_cleanup_step(text: str | None) -> bool:
    """Whether a row's ``step`` attribute is a clean-up step's (scheduled after a cancel
    by the code's ``finally``/``except Cancelled``): it may run while the run is
    CANCEL_REQUESTED, and the cancel does not stop it."""
    if not text or '"cleanup"' not in text:  # most rows: no parse
        return False
    try:
        return bool(json.loads(text).get("cleanup"))
    except (ValueError, AttributeError, TypeError):
        return False


def step_name(base: str, occurrence: int) -> str:
    """The k-th call of ``base`` in a run: ``<base>#<k>``."""
    return f"{base}#{occurrence}"


def split_step(name: str) -> tuple[str, int]:
    base, _, k = name.rpartition("#")
    return base, int(k)
