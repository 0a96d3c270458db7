"""What an attempt runs with: its input, and what it sees of its upstreams.

* An attempt that carries its own input (a map item's element, a failure handler's
  error) runs with it; any other with the workflow's input merged with the activity's
  static input.
* An upstream counts by its resolution (contract/outcomes.py): its output, a handler's
  output in its place, or nothing (with the error) past ``on_failure: continue``. A map
  upstream's output is the list of its items' outputs, read from the items when it was
  too large to keep on the map's own row.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from whimbrel.contract import conditions
from whimbrel.contract.dataflow import (
    CONTINUE,
    MAX_MAP_ITEMS,
    STEP_ITEMS,
    items_prefix,
    parse_map_over,
    select,
    split_item,
)
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.outcomes import map_items, map_output, resolution, upstream_view
from whimbrel.contract.payloads import NO_BUCKET, PayloadLimits, decode_payload
from whimbrel.contract.records import ActivityRecord, WorkflowRecord, latest_of
from whimbrel.contract.states import ActivityState
from whimbrel.engine.feature import Core
from whimbrel.engine.payloads import has_refs, resolved, resolved_all

A = ActivityState


def own_input(value: Any, field: str = "input", limits: PayloadLimits = NO_BUCKET) -> str:
    """JSON text of an attempt's own input (``null`` included: an element may be null).

    Raises:
        InvalidInput: not JSON-serialisable, or larger than a run's input may be.
    """
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field} is not JSON-serialisable: {exc}", field=field) from exc
    limits.check_size(text, field, run_input=True)
    return text


def attempt_input(defn: WorkflowDefinition, workflow_input: str | None,
                  own: str | None, name: str) -> Any:
    """The input an attempt of ``name`` runs with.

    Its own input when it has one (merged under the activity's static input when both
    are mappings); otherwise the workflow's input merged with the static input.
    """
    spec = defn.activity(name)
    base = decode_payload(own if own is not None else workflow_input, field="input")
    if spec.input is None:
        return base
    if isinstance(base, dict):
        return {**base, **spec.input}
    return base if own is not None else dict(spec.input)


def handled_chain(defn: WorkflowDefinition, names: Iterable[str]) -> set[str]:
    """``names`` and the failure handlers that may stand in for them (their outputs are
    what a resolution reads)."""
    out: set[str] = set()
    for dep in names:
        cur: str | None = dep
        while cur is not None and cur not in out and cur in defn.names:
            out.add(cur)
            handler = defn.activity(cur).on_failure
            cur = None if handler in (None, CONTINUE) else handler
    return out


#: What :func:`resolved_value` returns for an activity that is not resolved yet.
UNRESOLVED: Any = object()


class KnownLists:
    """Maps' lists this process read, by (run, map, redrive): a list is read once per
    process, not per item. Thread-safe; keeps the ``size`` latest."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._lists: OrderedDict[tuple[str, str, int], list[Any]] = OrderedDict()

    def get(self, wx: str, name: str, gen: int) -> list[Any] | None:
        with self._lock:
            return self._lists.get((wx, name, gen))

    def put(self, wx: str, name: str, gen: int, found: list[Any]) -> None:
        with self._lock:
            self._lists[(wx, name, gen)] = found
            while len(self._lists) > self._size:
                self._lists.popitem(last=False)


class Inputs:
    """What an attempt is given: its input, its upstreams' values, a map's list. A part
    of the engine: ``engine.inputs.op(…)``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def launch_input(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     own: str | None, name: str) -> Any:
        """:func:`attempt_input`, with the keys of the activity's ``input_from`` (issue 22)
        evaluated over ``{"input": <run input>, "<upstream>": <output>}`` and merged over it
        (an input that is not a mapping is replaced by those keys).

        Raises:
            InvalidInput: an expression failed on the document (a type error).
        """
        spec = defn.activity(name)
        # The run's input is read only when the attempt uses it (a map item runs with its
        # own element): a large one is kept apart from the run's item.
        run_input = self.core.reads.run_input(wf) if own is None or spec.input_from else None
        base = attempt_input(defn, run_input, self.core.reads.payload(own, "input"), name)
        if not spec.input_from:
            return base
        outputs, _ = self.upstream_values(wf.workflow_exec_id, defn, name) \
            if spec.depends_on else ({}, {})
        doc = conditions.document(decode_payload(run_input, field="input"), outputs)
        extra = conditions.build_input(spec.input_from, doc)
        return {**base, **extra} if isinstance(base, dict) else extra

    def assembled(self, wx: str, node: ActivityRecord) -> Any:
        """A COMPLETED map's output: the list on its row, or read from its items."""
        if node.output is not None or not node.map_size:
            return decode_payload(self.core.reads.payload(node.output, "output"), field="output") \
                if node.output else []
        items = map_items(self.core.store.list_activities(wx, items_prefix(node.activity_name),
                                                       map_size=node.map_size),
                          node.activity_name)
        return map_output(self.whole_items(items), int(node.map_size))

    def whole_items(self, items: dict[int, ActivityRecord]) -> dict[int, ActivityRecord]:
        """A map's items with their outputs read whole (those kept in S3)."""
        if not any(has_refs(a) for a in items.values()):
            return items
        keys = list(items)
        return dict(zip(keys, resolved_all(self.core, [items[k] for k in keys]), strict=True))

    def upstream_values(self, wx: str, defn: WorkflowDefinition, name: str,
                        acts: Iterable[ActivityRecord] | None = None,
                        ) -> tuple[dict[str, Any], dict[str, str]]:
        """What an attempt of ``name`` sees of its upstreams: outputs by name, and the
        errors of those it runs past (``on_failure: continue``)."""
        records = list(self.core.store.list_activities(wx) if acts is None else acts)
        latest = latest_of(records)
        needed = handled_chain(defn, defn.activity(split_item(name)[0]).depends_on)
        latest.update({k: resolved(self.core, v) for k, v in latest.items()
                       if k in needed and has_refs(v)})
        outputs, errors = upstream_view(defn, latest, split_item(name)[0])
        for dep in outputs:
            node = latest.get(dep)
            if node is not None and node.state is A.COMPLETED and node.map_size \
                    and node.output is None:
                items = map_items(records, dep)
                outputs[dep] = map_output(self.whole_items(items), int(node.map_size))
        return outputs, errors

    def upstream_value(self, wx: str, defn: WorkflowDefinition, up: str) -> Any:
        """The value ``up`` hands its dependents (what a map maps over), read with a Query
        of ``up``'s attempts (and its handlers'), not of the whole run.

        Raises:
            ValueError: ``up`` is not resolved (the map cannot expand yet).
        """
        latest: dict[str, ActivityRecord] = {}
        cur: str | None = up
        while cur is not None and cur not in latest:
            found = latest_of(self.core.store.list_activities(wx, f"{cur}:")).get(cur)
            if found is None:
                break
            latest[cur] = found
            handler = defn.activity(cur).on_failure
            cur = None if handler == CONTINUE else handler
        value = self.resolved_value(wx, defn, latest, up)
        if value is UNRESOLVED:
            raise ValueError(f"upstream {up} has not completed")
        return value

    def resolved_value(self, wx: str, defn: WorkflowDefinition,
                       latest: Mapping[str, ActivityRecord], name: str) -> Any:
        """The value ``name`` hands on as resolved (its output, its handler's in its place,
        None past a ``continue``), or :data:`UNRESOLVED`. A map's list is read from its
        items when it was too large for the map's own row: never None in its place."""
        res = resolution(defn, latest, name)
        if res is None:
            return UNRESOLVED
        node = latest[name]
        if res.handled_by is None and node.state is A.COMPLETED and node.map_size:
            return self.assembled(wx, node)
        return decode_payload(self.core.reads.payload(res.output, "output"), field="output") \
            if res.output else None

    def output_of(self, node: ActivityRecord) -> Any:
        """A COMPLETED attempt's output as its readers see it (a map's list read from its
        items when it was too large for the map's own row)."""
        if node.state is A.COMPLETED and node.map_size and node.output is None:
            return self.assembled(node.workflow_exec_id, node)
        return decode_payload(self.core.reads.payload(node.output, "output"), field="output")

    def map_list(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str) -> list[Any]:
        """The list map ``name`` maps over: from the workflow's input or an upstream's output.

        Raises:
            ValueError: the source is missing, not a list, or too long.
        """
        over = str(defn.activity(name).map_over)
        if over == STEP_ITEMS:  # a code map: the list is its step's input
            return self.step_items(wf.workflow_exec_id, name)
        source = parse_map_over(over)
        if source.upstream is None:
            value = decode_payload(self.core.reads.run_input(wf), field="input")
        else:
            value = self.upstream_value(wf.workflow_exec_id, defn, source.upstream)
        return select(value, source)

    def step_items(self, wx: str, name: str) -> list[Any]:
        """The list of the code map step ``name``: its first attempt's input (a redrive's
        attempt carries the same), whole (kept in S3 when large).

        Raises:
            ValueError: the step is missing or its input is not a list of at most
                ``MAX_MAP_ITEMS`` elements.
        """
        row = self.core.store.get_activity(activity_exec_id(wx, name, 1))
        if row is None:
            raise ValueError(f"map step {name} of run {wx} has no first attempt")
        value = decode_payload(self.core.reads.payload(row.input, "input"), field="input")
        if not isinstance(value, list) or len(value) > MAX_MAP_ITEMS:
            raise ValueError(f"map step {name}: its input is not a list of at most "
                             f"{MAX_MAP_ITEMS} items")
        return value
