"""``ActivityDefinition``: one node of a workflow's DAG, with its own validation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from whimbrel.contract import dataflow, flow
from whimbrel.contract.conditions import Trigger
from whimbrel.contract.errors import InvalidDefinition
from whimbrel.contract.launching import LAUNCHER_KINDS, LauncherSpec, RetryPolicy
from whimbrel.contract.limits import NAME_PATTERN
from whimbrel.contract.pools import pool_key_problem
from whimbrel.contract.priority import DEFAULT_PRIORITY

_NAME = re.compile(NAME_PATTERN)

#: Optional durations (None: no limit), written to the canonical form only when set.
OPTIONAL_SECONDS = ("heartbeat_timeout_seconds", "start_to_close_seconds",
                    "schedule_to_start_seconds")
DEFAULT_START_TIMEOUT_SECONDS = 300.0
#: The data-driven fields (whimbrel/contract/dataflow.py), written only when set.
_DATA_FIELDS = ("map_over", "max_concurrency", "tolerated_failures", "on_failure")
#: The flow-control fields (whimbrel/contract/flow.py) and their defaults: written only
#: when they differ, so definitions without them keep their canonical JSON.
FLOW_DEFAULTS: dict[str, Any] = {"pool": None, "pool_key": None,
                                 "priority": DEFAULT_PRIORITY, "when": None,
                                 "trigger": Trigger.ALL_COMPLETED.value, "input_from": {}}


@dataclass(frozen=True)
class ActivityDefinition:
    """One node of the DAG.

    Attributes:
        name: unique within the workflow; letters, digits, ``_`` and ``-``.
        depends_on: names of activities that must COMPLETE first.
        launcher: how the activity starts (see :class:`LauncherSpec`).
        heartbeat_timeout_seconds: when set, a RUNNING attempt that does not heartbeat
            within this many seconds is TIMED_OUT by the heartbeat listener.
        start_to_close_seconds: when set, the most one attempt may run (from RUNNING to
            its end), heartbeats or not; past it the attempt is TIMED_OUT.
        schedule_to_start_seconds: when set, an attempt that nobody starts within this
            many seconds of being scheduled — a READY ``external`` one nobody claims, a
            QUEUED one whose launch never runs — is TIMED_OUT.
        start_timeout_seconds: the launch guard: a QUEUED/PREPARING attempt that has not
            reached RUNNING by then is TIMED_OUT (its launch was lost).
        retry: what happens after FAILED or TIMED_OUT.
        input: static input merged over the workflow's input for this activity.
        map_over: makes this activity a map: at run time it becomes one item per element
            of the list named here — ``"<upstream>"`` (that upstream's output),
            ``"<upstream>.<key>"`` or ``"$input.<key>"`` (docs/definitions.md).
        max_concurrency: a map runs at most this many items at once (None: all).
        tolerated_failures: a map completes with at most this many failed items.
        on_failure: when this activity fails for good, run the activity named here with
            the error as input, and let dependents run with its output in this one's
            place; ``"continue"``: dependents run, seeing no output.
        pool: the named pool whose slots and rate this activity's attempts take
            (:mod:`whimbrel.contract.pools`); None: no pool.
        pool_key: with a pool, a JMESPath over ``{"input": ..., "<upstream>": <output>}``
            whose value (a string, number or boolean) names the key: the pool's limits
            then apply to each key value separately (a pool of 2 slots keyed by
            ``input.tenant`` lets every tenant run 2). An attempt whose key reads
            ``null``, a list or an object fails (``PoolKeyFailed``). None: one pool.
        priority: 0 (first) to 9; pool admission and ``claim`` serve lower numbers
            first, then the oldest, with aging (:mod:`whimbrel.contract.priority`).
        when: a JMESPath condition over ``{"input": ..., "<upstream>": <output>}``;
            false → the activity ends SKIPPED without launching (a map: the whole map).
        trigger: ``"all_completed"`` (a SKIPPED upstream skips this one too) or
            ``"none_failed"`` (runs when every upstream COMPLETED or was SKIPPED and at
            least one COMPLETED).
        input_from: input key → JMESPath expression over the same document, evaluated
            at launch and merged over the input.
    """

    name: str
    depends_on: tuple[str, ...] = ()
    launcher: LauncherSpec = field(default_factory=LauncherSpec)
    heartbeat_timeout_seconds: float | None = None
    start_timeout_seconds: float = DEFAULT_START_TIMEOUT_SECONDS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    input: Mapping[str, Any] | None = None
    description: str = ""
    start_to_close_seconds: float | None = None
    schedule_to_start_seconds: float | None = None
    map_over: str | None = None
    max_concurrency: int | None = None
    tolerated_failures: int = 0
    on_failure: str | None = None
    pool: str | None = None
    pool_key: str | None = None
    priority: int = DEFAULT_PRIORITY
    when: str | None = None
    trigger: str = Trigger.ALL_COMPLETED.value
    input_from: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Accept lists and strings from callers; store the canonical frozen forms.
        deps = self.depends_on
        if isinstance(deps, str):
            deps = (deps,)
        object.__setattr__(self, "depends_on", tuple(deps))
        object.__setattr__(self, "launcher", LauncherSpec.parse(self.launcher))
        if isinstance(self.retry, Mapping):
            object.__setattr__(self, "retry", RetryPolicy(**self.retry))
        if isinstance(self.input_from, Mapping) and not isinstance(self.input_from, dict):
            object.__setattr__(self, "input_from", dict(self.input_from))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.depends_on:
            out["depends_on"] = list(self.depends_on)
        out["launcher"] = self.launcher.to_dict()
        for key in OPTIONAL_SECONDS:
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out["start_timeout_seconds"] = self.start_timeout_seconds
        out["retry"] = self.retry.to_dict()
        if self.input is not None:
            out["input"] = dict(self.input)
        if self.description:
            out["description"] = self.description
        # Written only when set, so definitions without them keep their canonical JSON.
        for key in _DATA_FIELDS:
            if getattr(self, key) not in (None, 0):
                out[key] = getattr(self, key)
        for key, default in FLOW_DEFAULTS.items():
            value = getattr(self, key)
            if value != default:
                out[key] = dict(value) if isinstance(value, Mapping) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ActivityDefinition:
        """Build one activity from plain data (validated with its workflow).

        Raises:
            InvalidDefinition: unknown fields or malformed ``retry`` / ``depends_on``.
        """
        known = {"name", "depends_on", "launcher", "start_timeout_seconds", "retry",
                 "input", "description", *OPTIONAL_SECONDS, *_DATA_FIELDS, *FLOW_DEFAULTS}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidDefinition(
                str(data.get("name", "?")),
                [f"activity {data.get('name', '?')!r}: unknown field(s) {', '.join(unknown)}"],
            )
        retry = data.get("retry") or {}
        if not isinstance(retry, Mapping):
            raise InvalidDefinition(str(data.get("name")), ["retry must be a mapping"])
        deps = data.get("depends_on") or ()
        if isinstance(deps, str):
            deps = (deps,)
        # Checked here, not in problems(): tuple() of a number or a mapping would fail
        # with a bare TypeError that does not name the field (test_bad_input_corpus).
        if not isinstance(deps, list | tuple) or not all(isinstance(d, str) for d in deps):
            raise InvalidDefinition(str(data.get("name")), [
                f"activity {data.get('name', '?')!r}: depends_on must be a list of "
                f"activity names, not {deps!r}"[:300]])
        return cls(
            name=data.get("name"),  # type: ignore[arg-type]  # validated later, reported whole
            depends_on=tuple(deps),
            launcher=LauncherSpec.parse(data.get("launcher")),
            start_timeout_seconds=data.get("start_timeout_seconds",
                                           DEFAULT_START_TIMEOUT_SECONDS),
            retry=RetryPolicy(**retry),
            input=data.get("input"),
            description=str(data.get("description") or ""),
            **{key: data.get(key) for key in OPTIONAL_SECONDS},
            map_over=data.get("map_over"),
            max_concurrency=data.get("max_concurrency"),
            tolerated_failures=data.get("tolerated_failures", 0),
            on_failure=data.get("on_failure"),
            pool=data.get("pool"),
            pool_key=data.get("pool_key"),
            priority=data.get("priority", DEFAULT_PRIORITY),
            when=data.get("when"),
            trigger=data.get("trigger", Trigger.ALL_COMPLETED.value),
            input_from=data.get("input_from") or {},
        )

    def problems(self, names: set[str]) -> list[str]:
        """This activity's problems, given the names of its workflow's activities."""
        out: list[str] = []
        where = f"activity {self.name!r}"
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            out.append(f"{where}: name must match {NAME_PATTERN} "
                       "(letters, digits, '_' and '-', starting with a letter; up to 64)")
        deps_seen: set[str] = set()
        for dep in self.depends_on:
            if dep == self.name:
                out.append(f"{where}: depends on itself")
            elif dep not in names:
                out.append(f"{where}: depends on unknown activity {dep!r}")
            if dep in deps_seen:
                out.append(f"{where}: lists dependency {dep!r} twice")
            deps_seen.add(dep)
        out.extend(self.launcher.problems(where))
        kind = LAUNCHER_KINDS.get(self.launcher.kind)  # unknown: launcher.problems says so
        if kind is not None:
            out.extend(kind.definition_problems(self))
        out.extend(self.retry.problems(where))
        for key in OPTIONAL_SECONDS:
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, int | float) or not value > 0):
                out.append(f"{where}: {key} must be a number > 0")
        st = self.start_timeout_seconds
        if isinstance(st, bool) or not isinstance(st, int | float) or not st > 0:
            out.append(f"{where}: start_timeout_seconds must be a number > 0")
        if self.input is not None and not isinstance(self.input, Mapping):
            out.append(f"{where}: input must be a mapping")
        out.extend(dataflow.activity_problems(self, where))
        out.extend(flow.activity_problems(self, where))
        key_problem = pool_key_problem(self.pool, self.pool_key, self.depends_on)
        if key_problem:
            out.append(f"{where}: {key_problem}")
        return out
