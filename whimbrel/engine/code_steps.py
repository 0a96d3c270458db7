"""What each step of a code run was asked to be, for the engine's ``defn.activity(name)``.

A code workflow's definition declares no activities: its function decides, per call,
each step's launcher, retry and time-outs, and the step's rows carry it (``step``). The
engine binds a code run's definition to this lookup (``EngineBase.definition_of``), so
every part that asks ``defn.activity("charge#2")`` — moves, retries, the sweep, pools,
views — gets the step's own spec: from memory, from the row it holds, or from the step's
first attempt (one GetItem, once per process and step). An item of a ``ctx.map`` step
(``s#2#5``) runs as its map step, as a DAG map's item runs as its map.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.code.definition import CodeDefinition, decode_step
from whimbrel.contract.dataflow import ITEM_MARK, split_item
from whimbrel.contract.errors import InvalidDefinition
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.engine.ports import StorePort

#: How many steps' specs an engine keeps (each a few hundred bytes).
KNOWN_STEPS = 8192


def base_name(step: str) -> str:
    """``charge`` of the step ``charge#2``."""
    return step.rpartition("#")[0] or step


class StepSpecs:
    """The specs of code steps this process has seen, by (run, step)."""

    def __init__(self, store: StorePort) -> None:
        self._store = store
        self._known: OrderedDict[tuple[str, str], tuple[int, ActivityDefinition]] = \
            OrderedDict()
        self._lock = threading.Lock()

    def learn(self, wx: str, step: str, seq: int, spec: ActivityDefinition) -> None:
        with self._lock:
            self._known[(wx, step)] = (seq, spec)
            self._known.move_to_end((wx, step))
            while len(self._known) > KNOWN_STEPS:
                self._known.popitem(last=False)

    def learn_row(self, row: ActivityRecord) -> tuple[int, ActivityDefinition] | None:
        """The seq and spec a step's row carries (None: not a step's row)."""
        if row.step is None:
            return None
        seq, spec = decode_step(row.step, base_name(row.activity_name))
        self.learn(row.workflow_exec_id, row.activity_name, seq, spec)
        return seq, spec

    def known(self, wx: str, step: str) -> tuple[int, ActivityDefinition] | None:
        with self._lock:
            return self._known.get((wx, step))

    def spec(self, wx: str, step: str) -> ActivityDefinition:
        """The spec of ``step`` in run ``wx``.

        Raises:
            InvalidDefinition: the run has no such step.
        """
        base, index = split_item(step)
        if index is not None and ITEM_MARK in base:
            step = base  # an item of a code map (``s#2#5``) runs as its map step
        known = self.known(wx, step)
        if known is None:
            row = self._store.get_activity(activity_exec_id(wx, step, 1))
            known = self.learn_row(row) if row is not None else None
            if known is None:
                raise InvalidDefinition(step, [f"run {wx} has no step {step}"])
        return known[1]

    def bind(self, defn: CodeDefinition,
             record: ActivityRecord | WorkflowRecord) -> CodeDefinition:
        """``defn`` answering for the steps of ``record``'s run."""
        if isinstance(record, ActivityRecord):
            self.learn_row(record)
        wx = record.workflow_exec_id
        return defn.bound(lambda step: self.spec(wx, step))
