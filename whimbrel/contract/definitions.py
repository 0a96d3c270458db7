"""Workflow and activity definitions: frozen values, loaders, and whole-definition validation.

``LauncherSpec`` and ``RetryPolicy`` live in :mod:`whimbrel.contract.launching` and are
re-exported here.

A definition is pure data. ``validate()`` reports *every* problem it finds in one
:class:`~whimbrel.contract.errors.InvalidDefinition`, so a user fixes a file once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml

from whimbrel.contract import dataflow, flow
from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.errors import InvalidDefinition
from whimbrel.contract.launching import LAUNCHER_KINDS, LauncherSpec, RetryPolicy
from whimbrel.contract.limits import (
    MAX_ACTIVITIES,
    MAX_DEFINITION_BYTES,
    MAX_DEFINITION_DEPTH,
    MAX_DESCRIPTION_CHARS,
    WORKFLOW_NAME_PATTERN,
)
from whimbrel.contract.payloads import json_depth, json_values

__all__ = [
    "LAUNCHER_KINDS",
    "ActivityDefinition",
    "LauncherSpec",
    "RetryPolicy",
    "WorkflowDefinition",
    "definitions_equal",
    "iter_edges",
]

_WORKFLOW_NAME = re.compile(WORKFLOW_NAME_PATTERN)

#: Issue 22's flow-control fields. Each parses and is validated; one that is not in
#: :data:`FLOW_FIELDS_ENABLED` is refused when a definition uses it ("not supported yet"):
#: nothing is accepted and then silently ignored by an engine that does not enforce it.
FLOW_FIELDS: frozenset[str] = frozenset(
    {"max_running", "pool", "priority", "when", "trigger", "input_from"})
#: The flow-control fields the engine enforces (engine/conditions.py: ``when``,
#: ``trigger``, ``input_from``; engine/pools.py: ``max_running``, ``pool``, ``priority``).
#: Each field's wiring adds it here.
FLOW_FIELDS_ENABLED: frozenset[str] = frozenset(
    {"when", "trigger", "input_from", "max_running", "pool", "priority"})
_TOO_DEEP = f"the definition is nested deeper than {MAX_DEFINITION_DEPTH} levels"

@dataclass(frozen=True)
class WorkflowDefinition:
    """A named DAG of activities. Register it to get an immutable, versioned copy.

    Attributes:
        name: letters, digits, ``_``, ``-`` and ``.``.
        activities: the nodes; ``depends_on`` draws the edges.
        description: shown by the CLI and the console.
        timeout_seconds: when set, a run still going this long after it started ends
            TIMED_OUT; what still runs is asked to stop (docs/contract.md).
        retention_days: how long the rows of an ended run are kept before DynamoDB's
            TTL deletes them; ``"default"`` takes the engine's setting (30 days unless
            configured), None keeps them forever.
        max_running: at most this many runs of the definition RUNNING at once; a start
            beyond it waits QUEUED (docs/contract.md). None: no limit.
    """

    name: str
    activities: tuple[ActivityDefinition, ...]
    description: str = ""
    timeout_seconds: float | None = None
    retention_days: float | Literal["default"] | None = "default"
    max_running: int | None = None

    #: The subclasses stored with a key of their own (a code workflow's ``code``), by
    #: that key: ``from_dict`` builds the one whose key the data holds. Each enters as it
    #: is defined (``class CodeDefinition(WorkflowDefinition, stored_as="code")``), so
    #: this module names none of them; ``whimbrel/contract/__init__.py`` imports them.
    _STORED_AS: ClassVar[dict[str, type[WorkflowDefinition]]] = {}

    def __init_subclass__(cls, *, stored_as: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if stored_as is not None:
            WorkflowDefinition._STORED_AS[stored_as] = cls

    def __post_init__(self) -> None:
        object.__setattr__(self, "activities", tuple(self.activities))

    # -- lookups -------------------------------------------------------------------

    def activity(self, name: str) -> ActivityDefinition:
        """The activity ``name``; a map's item (``<map>#<index>``) runs as its map."""
        return self._by_name[dataflow.split_item(name)[0]]

    @cached_property
    def _by_name(self) -> dict[str, ActivityDefinition]:
        # The engine looks activities up on every move: O(1), not a scan (wide fan-outs).
        out: dict[str, ActivityDefinition] = {}
        for act in self.activities:
            out.setdefault(act.name, act)  # the first wins, as the scan did
        return out

    @cached_property
    def _dependents(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for act in self.activities:
            for up in dict.fromkeys(act.depends_on):
                out.setdefault(up, []).append(act.name)
        return {k: tuple(v) for k, v in out.items()}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.activities)

    def dependents(self, name: str) -> tuple[str, ...]:
        """Activities that list ``name`` in ``depends_on``, in definition order."""
        return self._dependents.get(name, ())

    @cached_property
    def roots(self) -> tuple[str, ...]:
        """Activities that start with the run (a failure handler starts when called)."""
        handlers = dataflow.handlers(self)
        return tuple(a.name for a in self.activities
                     if not a.depends_on and a.name not in handlers)

    @cached_property
    def sinks(self) -> tuple[str, ...]:
        """Activities nothing depends on (failure handlers stand in for another)."""
        used = {d for a in self.activities for d in a.depends_on}
        handlers = dataflow.handlers(self)
        return tuple(a.name for a in self.activities
                     if a.name not in used and a.name not in handlers)

    def upstream_closure(self, name: str) -> frozenset[str]:
        seen: set[str] = set()
        stack = list(self.activity(name).depends_on)
        while stack:
            cur = stack.pop()
            if cur not in seen:
                seen.add(cur)
                stack.extend(self.activity(cur).depends_on)
        return frozenset(seen)

    def downstream_closure(self, name: str) -> frozenset[str]:
        """Every activity that (transitively) depends on ``name``."""
        children: dict[str, list[str]] = {a.name: [] for a in self.activities}
        for a in self.activities:
            for d in a.depends_on:
                children.setdefault(d, []).append(a.name)
        seen: set[str] = set()
        stack = list(children.get(name, ()))
        while stack:
            cur = stack.pop()
            if cur not in seen:
                seen.add(cur)
                stack.extend(children.get(cur, ()))
        return frozenset(seen)

    # -- validation ----------------------------------------------------------------

    def problems(self) -> list[str]:
        """Every problem with this definition; empty when it is valid."""
        out: list[str] = []
        if not isinstance(self.name, str) or not _WORKFLOW_NAME.match(self.name):
            out.append(
                f"workflow name {self.name!r} must match {WORKFLOW_NAME_PATTERN} "
                "(letters, digits, '_', '-', '.'; up to 128 characters)"
            )
        if len(self.description) > MAX_DESCRIPTION_CHARS:
            out.append(f"description is longer than {MAX_DESCRIPTION_CHARS} characters")
        if not self.activities:
            out.append("a workflow needs at least one activity")
        if len(self.activities) > MAX_ACTIVITIES:
            out.append(
                f"{len(self.activities)} activities is more than the limit of {MAX_ACTIVITIES}"
            )
        seen: set[str] = set()
        names = {a.name for a in self.activities if isinstance(a.name, str)}
        for act in self.activities:
            if isinstance(act.name, str) and act.name in seen:
                out.append(f"activity {act.name!r}: duplicate activity name")
            seen.add(act.name)
            out.extend(act.problems(names))
        t = self.timeout_seconds
        if t is not None and (isinstance(t, bool) or not isinstance(t, int | float)
                              or not t > 0):
            out.append("timeout_seconds must be a number > 0")
        r = self.retention_days
        if r not in (None, "default") and (isinstance(r, bool) or not isinstance(r, int | float)
                                           or not 1 <= r < float("inf")):
            out.append("retention_days must be a number >= 1, null (keep forever) or "
                       "absent (the default)")
        cycle = self._find_cycle()
        if cycle:
            out.append("cycle: " + " -> ".join(cycle))
        out.extend(dataflow.definition_problems(self))
        out.extend(flow.definition_problems(self))
        refused = [where for field, where in flow.fields_used(self)
                   if field not in FLOW_FIELDS_ENABLED]
        if refused:
            out.append(f"not supported yet (flow control comes with its engine wiring): "
                       f"{'; '.join(refused)}"[:1000])
        if not out:
            size = len(self.to_json().encode())
            if size > MAX_DEFINITION_BYTES:
                out.append(
                    f"definition is {size} bytes, more than the limit of {MAX_DEFINITION_BYTES}"
                )
        return out

    def validate(self) -> WorkflowDefinition:
        """Return self when valid.

        Raises:
            InvalidDefinition: listing every problem found.
        """
        problems = self.problems()
        if problems:
            raise InvalidDefinition(str(self.name), problems)
        return self

    def _find_cycle(self) -> list[str] | None:
        deps = {
            a.name: [d for d in a.depends_on if isinstance(d, str)]
            for a in self.activities
            if isinstance(a.name, str)
        }
        white, grey, black = 0, 1, 2
        color = dict.fromkeys(deps, white)
        for start in deps:
            if color[start] != white:
                continue
            # Iterative DFS keeping the path, so a cycle can be named.
            path: list[str] = [start]
            iters = [iter(deps[start])]
            color[start] = grey
            while iters:
                nxt = next(iters[-1], None)
                if nxt is None:
                    color[path.pop()] = black
                    iters.pop()
                    continue
                if nxt not in color:
                    continue
                if color[nxt] == grey:
                    cycle = [*path[path.index(nxt) :], nxt]
                    cycle.reverse()  # read as "a -> b" meaning b runs after a
                    return cycle
                if color[nxt] == white:
                    color[nxt] = grey
                    path.append(nxt)
                    iters.append(iter(deps[nxt]))
        return None

    def topological_order(self) -> tuple[str, ...]:
        order: list[str] = []
        done: set[str] = set()
        pending = list(self.activities)
        while pending:
            progressed = [a for a in pending if all(d in done for d in a.depends_on)]
            if not progressed:
                raise InvalidDefinition(self.name, ["cycle in dependencies"])
            for a in progressed:
                order.append(a.name)
                done.add(a.name)
            pending = [a for a in pending if a.name not in done]
        return tuple(order)

    # -- (de)serialisation ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.description:
            out["description"] = self.description
        if self.timeout_seconds is not None:
            out["timeout_seconds"] = self.timeout_seconds
        if self.retention_days != "default":
            out["retention_days"] = self.retention_days
        if self.max_running is not None:
            out["max_running"] = self.max_running
        out["activities"] = [a.to_dict() for a in self.activities]
        return out

    def to_json(self) -> str:
        """Canonical JSON: equal definitions give equal text."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkflowDefinition:
        """Build and validate a definition from plain data.

        Raises:
            InvalidDefinition: the data is malformed or the DAG is invalid.
        """
        if not isinstance(data, Mapping):
            raise InvalidDefinition("?", ["a definition must be a mapping"])
        if cls is WorkflowDefinition:  # a subclass's own form: a code workflow's ``code``
            for key, stored in WorkflowDefinition._STORED_AS.items():
                if key in data:
                    return stored.from_dict(data)
        if json_depth(data, MAX_DEFINITION_DEPTH) > MAX_DEFINITION_DEPTH:
            raise InvalidDefinition(str(data.get("name", "?"))[:200], [_TOO_DEEP])
        # Each value takes at least two bytes of JSON: refuse an alias bomb before
        # serialising it to measure its size.
        values = json_values(data)
        if values > MAX_DEFINITION_BYTES // 2:
            raise InvalidDefinition(str(data.get("name", "?"))[:200], [
                f"definition holds {values} values (YAML aliases expanded), more than the "
                f"limit of {MAX_DEFINITION_BYTES // 2}"])
        name = data.get("name")
        problems: list[str] = []
        unknown = sorted(set(data) - {"name", "description", "activities", "timeout_seconds",
                                      "retention_days", "max_running"})
        if unknown:
            problems.append(f"unknown field(s) {', '.join(unknown)}")
        raw_acts = data.get("activities")
        acts: list[ActivityDefinition] = []
        if not isinstance(raw_acts, list):
            problems.append("activities must be a list")
        else:
            for i, raw in enumerate(raw_acts):
                if not isinstance(raw, Mapping):
                    problems.append(f"activities[{i}] must be a mapping")
                    continue
                try:
                    acts.append(ActivityDefinition.from_dict(raw))
                except InvalidDefinition as exc:
                    problems.extend(exc.problems)
                except TypeError as exc:
                    problems.append(f"activities[{i}]: {exc}")
        defn = cls(
            name=name,  # type: ignore[arg-type]  # reported by problems()
            activities=tuple(acts),
            description=str(data.get("description") or ""),
            timeout_seconds=data.get("timeout_seconds"),
            retention_days=data.get("retention_days", "default"),
            max_running=data.get("max_running"),
        )
        problems.extend(defn.problems() if acts or not problems else [])
        if problems:
            raise InvalidDefinition(str(name), problems)
        return defn

    @classmethod
    def from_json(cls, text: str) -> WorkflowDefinition:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidDefinition("?", [f"not valid JSON: {exc}"]) from exc
        except RecursionError:
            raise InvalidDefinition("?", [_TOO_DEEP]) from None
        return cls.from_dict(data)

    @classmethod
    def from_yaml(cls, text: str) -> WorkflowDefinition:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidDefinition("?", [f"not valid YAML: {exc}"]) from exc
        except RecursionError:
            raise InvalidDefinition("?", [_TOO_DEEP]) from None
        return cls.from_dict(data)

    @classmethod
    def from_file(cls, path: str | Path) -> WorkflowDefinition:
        """Load a ``.yaml``/``.yml`` or ``.json`` file."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidDefinition("?", [f"{p.name} is not UTF-8 text ({exc.reason} at "
                                          f"byte {exc.start})"]) from None
        if p.suffix == ".json":
            return cls.from_json(text)
        return cls.from_yaml(text)


def definitions_equal(a: WorkflowDefinition, b: WorkflowDefinition) -> bool:
    return a.to_json() == b.to_json()


def iter_edges(defn: WorkflowDefinition) -> Iterable[tuple[str, str]]:
    """(upstream, downstream) pairs."""
    for act in defn.activities:
        for dep in act.depends_on:
            yield dep, act.name
