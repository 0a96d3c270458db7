"""Checks of a definition's flow-control fields (issue 22; pure).

The fields: ``WorkflowDefinition.max_running``, ``ActivityDefinition.pool``,
``priority``, ``when``, ``trigger`` and ``input_from``. Their meaning is in
docs/definitions.md ("Flow control"); evaluation in :mod:`whimbrel.contract.conditions`,
pools in :mod:`whimbrel.contract.pools`, ordering in :mod:`whimbrel.contract.priority`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from whimbrel.contract import conditions, waits
from whimbrel.contract.dataflow import handlers
from whimbrel.contract.limits import NAME_PATTERN
from whimbrel.contract.priority import DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY
from whimbrel.contract.shapes import ActivityShape, WorkflowShape

_NAME = re.compile(NAME_PATTERN)
#: The most runs of one definition that ``max_running`` may allow at once.
MAX_RUNNING_LIMIT = 100_000
#: The most keys one ``input_from`` may have.
MAX_INPUT_FROM_KEYS = 100
#: Input keys are short text (they become keys of a JSON object).
MAX_INPUT_KEY_CHARS = 256


def activity_problems(spec: ActivityShape, where: str) -> list[str]:
    """Problems of one activity's flow-control fields, on their own."""
    out: list[str] = []
    pool = spec.pool
    if pool is not None and (not isinstance(pool, str) or not _NAME.match(pool)):
        out.append(f"{where}: pool must be a name matching {NAME_PATTERN} (letters, digits, "
                   f"'_' and '-', starting with a letter), not {pool!r}"[:300])
    if pool is not None and spec.launcher.kind in waits.WAIT_KINDS:
        out.append(f"{where}: a {spec.launcher.kind} wait launches nothing, so it takes no "
                   "pool slot; drop pool")
    pr = spec.priority
    if isinstance(pr, bool) or not isinstance(pr, int) or not MIN_PRIORITY <= pr <= MAX_PRIORITY:
        out.append(f"{where}: priority must be an integer from {MIN_PRIORITY} (first) to "
                   f"{MAX_PRIORITY}, not {pr!r}"[:300])
    if spec.when is not None:
        problem = conditions.expression_problem(spec.when)
        if problem:
            out.append(f"{where}: when {problem}")
    if spec.trigger not in [t.value for t in conditions.Trigger]:  # a list: it may be unhashable
        out.append(f"{where}: trigger must be one of "
                   f"{', '.join(t.value for t in conditions.Trigger)}, not {spec.trigger!r}"
                   [:300])
    out.extend(_input_from_problems(spec, where))
    if spec.map_over is not None and spec.input_from:
        out.append(f"{where}: input_from is not supported on a map (an item's input is its "
                   "element); build the list upstream, or read the document in the item")
    return out


def _input_from_problems(spec: ActivityShape, where: str) -> list[str]:
    mapping = spec.input_from
    if not isinstance(mapping, Mapping):
        return [f"{where}: input_from must be a mapping of input keys to JMESPath "
                "expressions"]
    out: list[str] = []
    if len(mapping) > MAX_INPUT_FROM_KEYS:
        out.append(f"{where}: input_from has {len(mapping)} keys, more than the limit of "
                   f"{MAX_INPUT_FROM_KEYS}")
    for key, expr in mapping.items():
        if not isinstance(key, str) or not key or len(key) > MAX_INPUT_KEY_CHARS:
            out.append(f"{where}: input_from key {key!r} must be non-empty text of at most "
                       f"{MAX_INPUT_KEY_CHARS} characters"[:300])
            continue
        problem = conditions.expression_problem(expr)
        if problem:
            out.append(f"{where}: input_from[{key!r}] {problem}"[:1000])
    return out


def definition_problems(defn: WorkflowShape) -> list[str]:
    """Problems that involve the graph: names an expression reads, triggers, handlers."""
    out: list[str] = []
    mr = defn.max_running
    if mr is not None and (isinstance(mr, bool) or not isinstance(mr, int)
                           or not 1 <= mr <= MAX_RUNNING_LIMIT):
        out.append(f"max_running must be an integer from 1 to {MAX_RUNNING_LIMIT}, or null "
                   f"(no limit), not {mr!r}"[:300])
    handler_names = handlers(defn)
    for act in defn.activities:
        where = f"activity {act.name!r}"
        exprs = _expressions(act)
        if exprs and conditions.INPUT_KEY in act.depends_on:
            out.append(f"{where}: an upstream named {conditions.INPUT_KEY!r} would hide the "
                       "run's input from when/input_from; rename that activity")
        known = {conditions.INPUT_KEY, *act.depends_on}
        for label, expr in exprs:
            # Syntax is reported by activity_problems; here only the names it reads.
            if conditions.expression_problem(expr) is not None:
                continue
            problem = conditions.expression_problem(expr, known)
            if problem:
                out.append(f"{where}: {label} {problem}"[:1000])
        if act.trigger == conditions.Trigger.NONE_FAILED and not act.depends_on:
            out.append(f"{where}: trigger 'none_failed' needs at least one upstream in "
                       "depends_on (it says what to do when an upstream was SKIPPED)")
        if act.name in handler_names and act.when is not None:
            out.append(f"{where}: a failure handler runs when called on; it cannot have "
                       "'when' (put the condition in the handler's code)")
    return out


def _expressions(act: ActivityShape) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(act.when, str):
        out.append(("when", act.when))
    if isinstance(act.input_from, Mapping):
        out.extend((f"input_from[{k!r}]", v) for k, v in act.input_from.items()
                   if isinstance(k, str) and isinstance(v, str))
    return out


def fields_used(defn: WorkflowShape) -> list[tuple[str, str]]:
    """The flow-control fields ``defn`` sets to something other than their default, as
    ``(field, where)`` pairs (``("pool", "activity 'charge': pool")``)."""
    used: list[tuple[str, str]] = []
    if defn.max_running is not None:
        used.append(("max_running", "max_running"))
    for act in defn.activities:
        where = f"activity {act.name!r}: "
        if act.pool is not None:
            used.append(("pool", where + "pool"))
        if act.priority != DEFAULT_PRIORITY:
            used.append(("priority", where + "priority"))
        if act.when is not None:
            used.append(("when", where + "when"))
        if act.trigger != conditions.Trigger.ALL_COMPLETED:
            used.append(("trigger", where + "trigger"))
        if act.input_from:
            used.append(("input_from", where + "input_from"))
    return used
