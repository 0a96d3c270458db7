"""Data-driven definitions (pure): maps over a list, failure handlers, child workflows.

* A **map** (``ActivityDefinition.map_over``) becomes, at run time, one *item* per
  element of a list. An item is an activity execution named ``<map>#<index>`` (its id
  ``<workflow_exec_id>:<map>#<index>:<attempt>``; activity names cannot hold ``#``), and
  it runs as its map: same launcher, deadlines and retry policy. A code workflow's
  ``ctx.map`` is a map too: its own row is the step ``<name>#<k>`` (``map_over`` is
  ``STEP_ITEMS``: the list is the step's input), its items ``<name>#<k>#<index>``.
* A **failure handler** (``on_failure="<activity>"``) is an activity of the same
  definition that runs only when called on; ``on_failure="continue"`` lets dependents
  run past a failure.
* A **child workflow** is started with the request id ``child:<activity_exec_id>``.

This module holds the names, the syntax of ``map_over`` and the checks of a definition;
``contract/outcomes.py`` judges attempts (retries left, failures handled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from whimbrel.contract import checks
from whimbrel.contract.shapes import ActivityShape, WorkflowShape

#: Separates a map's name from an item's index in the item's activity name.
ITEM_MARK = "#"
#: ``on_failure`` value: dependents run past the failure (they see no output).
CONTINUE = "continue"
#: ``map_over`` prefix naming the workflow's input.
INPUT_SOURCE = "$input"
#: ``map_over`` of a code workflow's ``ctx.map`` step: the list is the step's own input.
STEP_ITEMS = "$items"
#: The most items one map may have (its items spread over ``map_item``'s partitions;
#: the list and the outputs go to the payload bucket when large).
MAX_MAP_ITEMS = 100_000


# -- names ----------------------------------------------------------------------------------

def item_name(map_name: str, index: int) -> str:
    """The activity name of item ``index`` of ``map_name``: ``<map>#<index>``."""
    return f"{map_name}{ITEM_MARK}{index}"


def split_item(name: str) -> tuple[str, int | None]:
    """``("m", 3)`` for the item ``m#3`` (``("s#2", 3)`` for ``s#2#3``, an item of a
    code map); ``(name, None)`` for any other activity."""
    base, mark, index = name.rpartition(ITEM_MARK)
    if not mark or not index.isascii() or not index.isdigit():
        return name, None
    return base, int(index)


def is_item(name: str) -> bool:
    return split_item(name)[1] is not None


def is_map_node(spec: ActivityShape, name: str) -> bool:
    """True for a map's own row (not one of its items): a DAG map's row is its name
    (``m``), a code map's its step (``s#2``); their items add ``#<index>``."""
    if spec.map_over is None:
        return False
    return name.count(ITEM_MARK) == (1 if spec.map_over == STEP_ITEMS else 0)


def lanes(spec: ActivityShape, size: int) -> int:
    """How many lanes a map of ``size`` items runs in (``max_concurrency``)."""
    return min(spec.max_concurrency or size, size)


def items_prefix(map_name: str) -> str:
    """What the activity names of a map's items start with (``<map>#``)."""
    return f"{map_name}{ITEM_MARK}"


def lane_edges(map_name: str) -> str:
    """The downstream name under which a map's lane edges are kept (``<map>#``): one
    edge per lane, deleted when the lane's last item ends (the fan-in trick)."""
    return f"{map_name}{ITEM_MARK}"


def child_request_id(activity_exec_id: str) -> str:
    """The request id of the child run an activity attempt starts: one child per
    attempt, however often the start is replayed."""
    return f"child:{activity_exec_id}"


# -- map_over ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class MapSource:
    """Where a map's list comes from: an upstream's output (``upstream`` set) or the
    workflow's input (``upstream`` None), then down ``path`` (keys of mappings)."""

    upstream: str | None
    path: tuple[str, ...] = ()

    def describe(self) -> str:
        head = self.upstream if self.upstream is not None else INPUT_SOURCE
        return ".".join((head, *self.path))


def parse_map_over(text: str) -> MapSource:
    """``"<upstream>"``, ``"<upstream>.<key>[.<key>…]"``, ``"$input"`` or
    ``"$input.<key>[…]"``.

    Raises:
        ValueError: any other text.
    """
    if not isinstance(text, str) or not text:
        raise ValueError(f"map_over must be a non-empty string, not {text!r}"[:200])
    head, *path = text.split(".")
    if not head or any(not key for key in path):
        raise ValueError(f"map_over {text!r} has an empty name or key")
    return MapSource(None if head == INPUT_SOURCE else head, tuple(path))


def select(value: Any, source: MapSource) -> list[Any]:
    """The list ``source`` names inside ``value`` (an upstream's output or the input).

    Raises:
        ValueError: a key is missing or the value there is not a list.
    """
    cur = value
    for depth, key in enumerate(source.path):
        if not isinstance(cur, Mapping) or key not in cur:
            where = ".".join((source.describe().split(".")[0], *source.path[:depth]))
            raise ValueError(f"map_over {source.describe()}: {where} has no key {key!r}")
        cur = cur[key]
    if not isinstance(cur, list):
        raise ValueError(f"map_over {source.describe()} is {checks.kind(cur)}, not a list")
    if len(cur) > MAX_MAP_ITEMS:
        raise ValueError(f"map_over {source.describe()} has {len(cur)} elements, more than "
                         f"the limit of {MAX_MAP_ITEMS} items per map")
    return cur


# -- checks -----------------------------------------------------------------------------------

def activity_problems(spec: ActivityShape, where: str) -> list[str]:
    """Problems of one activity's data-driven fields, on their own."""
    out: list[str] = []
    if spec.map_over is not None:
        try:
            parse_map_over(spec.map_over)
        except ValueError as exc:
            out.append(f"{where}: {exc}")
    mc = spec.max_concurrency
    if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int)
                           or not 1 <= mc <= MAX_MAP_ITEMS):
        out.append(f"{where}: max_concurrency must be an integer from 1 to {MAX_MAP_ITEMS}")
    tf = spec.tolerated_failures
    if isinstance(tf, bool) or not isinstance(tf, int) or not 0 <= tf <= MAX_MAP_ITEMS:
        out.append(f"{where}: tolerated_failures must be an integer from 0 to {MAX_MAP_ITEMS}")
    if spec.map_over is None and (mc is not None or tf):
        out.append(f"{where}: max_concurrency and tolerated_failures apply to a map only "
                   "(set map_over)")
    if spec.on_failure is not None and not isinstance(spec.on_failure, str):
        out.append(f"{where}: on_failure must be an activity name or 'continue'")
    if spec.launcher.kind == "workflow" and spec.heartbeat_timeout_seconds is not None:
        out.append(f"{where}: a child workflow does not heartbeat; drop "
                   "heartbeat_timeout_seconds (start_to_close_seconds bounds it)")
    return out


def handlers(defn: WorkflowShape) -> dict[str, str]:
    """Failure handlers of ``defn``: handler name -> the activity it handles.

    Kept on the (immutable) definition, as ``functools.cached_property`` keeps a value:
    the engine asks on every completion."""
    cached: dict[str, str] | None = vars(defn).get("_handlers")
    if cached is None:
        cached = {a.on_failure: a.name for a in defn.activities
                  if isinstance(a.on_failure, str) and a.on_failure != CONTINUE}
        vars(defn)["_handlers"] = cached
    return cached


def definition_problems(defn: WorkflowShape) -> list[str]:
    """Problems that involve several activities: map sources, handlers."""
    out: list[str] = []
    names = {a.name for a in defn.activities}
    depended = {d for a in defn.activities for d in a.depends_on}
    for act in defn.activities:
        where = f"activity {act.name!r}"
        if isinstance(act.map_over, str):
            try:
                source = parse_map_over(act.map_over)
            except ValueError:
                source = None  # reported by activity_problems
            if source is not None and source.upstream is not None \
                    and source.upstream not in act.depends_on:
                out.append(f"{where}: map_over names {source.upstream!r}, which is not in "
                           "its depends_on (a map reads the output of an upstream)")
    seen: dict[str, str] = {}
    for act in defn.activities:
        handler = act.on_failure
        if not isinstance(handler, str) or handler == CONTINUE:
            continue
        where = f"activity {act.name!r}"
        if handler == act.name:
            out.append(f"{where}: on_failure names itself")
        elif handler not in names:
            out.append(f"{where}: on_failure names unknown activity {handler!r} (or use "
                       f"'{CONTINUE}')")
        elif handler in seen:
            out.append(f"{where}: on_failure {handler!r} already handles {seen[handler]!r} "
                       "(one handler per activity)")
        else:
            seen[handler] = act.name
            spec = defn.activity(handler)
            if spec.depends_on:
                out.append(f"activity {handler!r}: a failure handler runs when called on, "
                           "so it cannot have depends_on")
            if handler in depended:
                out.append(f"activity {handler!r}: a failure handler cannot be in another "
                           f"activity's depends_on (its dependents see it in "
                           f"{act.name!r}'s place)")
            if spec.map_over is not None:
                out.append(f"activity {handler!r}: a failure handler cannot be a map")
    out.extend(_handler_cycles(defn, seen))
    if defn.activities and all(a.name in seen for a in defn.activities):
        out.append("every activity is a failure handler: nothing would start")
    return out


def _handler_cycles(defn: WorkflowShape, handled: Mapping[str, str]) -> list[str]:
    """Handlers that (through other handlers) handle themselves."""
    for start in handled:
        path, cur = [start], handled.get(start)
        while cur is not None and cur not in path:
            path.append(cur)
            cur = handled.get(cur)
        if cur == start:
            return ["on_failure cycle: " + " -> ".join(reversed([*path, start]))]
    return []


def uses_data_flow(activities: Sequence[ActivityShape]) -> bool:
    """True when any activity is a map, has a failure handler or starts a child."""
    return any(a.map_over is not None or a.on_failure is not None
               or a.launcher.kind == "workflow" for a in activities)
