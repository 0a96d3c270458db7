"""Maps (a feature): an activity that becomes one item per element of a list at run time.

Whoever advances the map reads the list and moves its row ``REQUESTED → READY →
RUNNING`` in one write; the items run in ``min(max_concurrency, N)`` lanes, one at a
time each, chained by their follow-ups, with one fan-in edge per lane; the lane's last
item that sees no edge left ends the map. An item is created before the run (and the
map's row) is read, so a cancel or failure that landed first is seen. How it runs and
what it costs: docs/architecture.md, "Maps".
"""

from __future__ import annotations

import logging
from typing import Any

from whimbrel.contract import states
from whimbrel.contract.dataflow import (
    ITEM_MARK,
    is_map_node,
    item_name,
    items_prefix,
    lanes,
    split_item,
)
from whimbrel.contract.definitions import ActivityDefinition, WorkflowDefinition
from whimbrel.contract.errors import StateConflict
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.outcomes import (
    generation,
    item_failed,
    map_items,
    map_output,
    open_activities,
    retries_left,
)
from whimbrel.contract.records import REMOVE, ActivityRecord, WorkflowRecord, latest_of
from whimbrel.contract.states import ActivityState, Transition, WorkflowState, activity_path
from whimbrel.engine import flow, rules
from whimbrel.engine.feature import Core, Feature, RunRead, RunRows
from whimbrel.engine.inputs import KnownLists, own_input
from whimbrel.engine.map_lanes import any_edge, drop_edges, end_lane, put_edges
from whimbrel.engine.map_repair import repair_maps
from whimbrel.engine.payloads import has_refs, resolved

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState

#: Lists this engine keeps, by (run, map, redrive): read once per process, not per item.
KNOWN_LISTS = 64

#: The error type of a map whose list could not be read.
BAD_LIST = "InvalidMapInput"


class Maps(Feature):
    """Expanding maps, chaining their items, ending them."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.store = core.store
        self._lists = KnownLists(KNOWN_LISTS)

    # -- hooks ---------------------------------------------------------------------------------

    def drives(self, spec: ActivityDefinition, name: str) -> str | None:
        return "is a map (its items decide its end)" if is_map_node(spec, name) else None

    def advance(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str, attempt: int,
                source: ActivityState, rows: RunRows) -> bool:
        if not is_map_node(defn.activity(name), name):
            return False
        self.expand_map(wf, defn, name, attempt, source)
        return True

    def reads_run_after(self, item: ActivityRecord, defn: WorkflowDefinition,
                        verb: Transition) -> bool:
        # An item that completes starts the next of its lane before the run is read:
        # that item's guard read is this one's too (one read of the run per item).
        return verb is Transition.COMPLETED and self._chained(item, defn) is not None

    def follow_up(self, item: ActivityRecord, run: RunRead) -> bool:
        if split_item(item.activity_name)[1] is None:
            return False
        if item.state is A.COMPLETED and self.chain_ahead(item):
            run.cancel()
            return True
        wf = self.core.flow.run_going_on(item, run)
        if wf is not None:
            self.after_item(wf, self.core.definitions.definition_of(wf), item)
        return True

    def new_attempt(self, defn: WorkflowDefinition, record: ActivityRecord) -> ActivityRecord:
        if is_map_node(defn.activity(record.activity_name), record.activity_name):
            return record.with_changes(heartbeat_timeout_seconds=None)  # its items beat
        return record

    def before_retry(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     item: ActivityRecord) -> bool:
        if not is_map_node(defn.activity(item.activity_name), item.activity_name):
            return False
        # A map never retries as a whole: its items retried already.
        why = f"map {item.activity_name} {item.state}"
        why = f"{why}: {item.error}" if item.error else why
        self.core.flow.failed_for_good(wf, defn, item, why)
        return True

    def stop(self, act: ActivityRecord, defn: WorkflowDefinition, *,
             ask_running: bool) -> bool | None:
        if act.state is not A.RUNNING or not is_map_node(defn.activity(act.activity_name),
                                                          act.activity_name):
            return None
        # The engine runs a map; asked to stop, it stops at once (its items are stopped
        # as activities of their own): RUNNING -> CANCELLED_RUNNING -> CANCELLED.
        self.end_map_node(act, activity_path(A.RUNNING, Transition.CANCEL, Transition.FAILED),
                          defn, error="stopped with its workflow")
        return False

    # -- expansion ------------------------------------------------------------------------------

    def map_elements(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str) -> list[Any]:
        """The map's list (read once per process and redrive).

        Raises:
            ValueError: the source is missing, not a list, or too long.
        """
        cached = self._lists.get(wf.workflow_exec_id, name, wf.redrives)
        if cached is not None:
            return cached
        found = self.core.inputs.map_list(wf, defn, name)
        self._lists.put(wf.workflow_exec_id, name, wf.redrives, found)
        return found

    def expand_map(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                   attempt: int, source: ActivityState) -> None:
        """Start a map whose upstreams resolved (its attempt is REQUESTED or READY)."""
        if not flow.proceeds(wf) or source not in states.ACTIVITY_NOT_LAUNCHED:
            return
        spec = defn.activity(name)
        aeid = activity_exec_id(wf.workflow_exec_id, name, attempt)
        path = activity_path(source, *((Transition.READY,) if source is A.REQUESTED else ()),
                             Transition.RUNNING)
        node = ActivityRecord(wf.workflow_exec_id, aeid, name, wf.workflow_name, attempt,
                              source, workflow_version=wf.version)
        try:
            items = self.map_elements(wf, defn, name)
        except ValueError as exc:
            end = activity_path(path[-1], Transition.FAILED)
            self.end_map_node(node, (*path, *end), defn, error=str(exc), error_type=BAD_LIST,
                              expected=source)
            return
        if not items:
            end = activity_path(path[-1], Transition.COMPLETED)
            self.end_map_node(node, (*path, *end), defn, output="[]", expected=source)
            return
        now = self.core.clock()
        try:
            # Whoever advances a map runs it: no other actor moves it between READY and
            # RUNNING, and one write picks one runner (docs/contract.md).
            self.core.known.move(aeid, source, path, {"started_epoch": now, "map_size": len(items),
                                                "timer_epoch": REMOVE})
        except StateConflict:
            return  # expanded by someone else
        self.start_lanes(wf, defn, name, len(items), range(lanes(spec, len(items))))

    def start_lanes(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                    size: int, which: range | list[int]) -> None:
        """Put the edges of lanes ``which``, then start each at its first open item.

        Edges go first: no item of these lanes exists yet (or, after a redrive, none of
        this generation), so none can end and consume an edge before all are written.
        """
        spec = defn.activity(name)
        width = lanes(spec, size)
        done: set[int] = set()
        if wf.redrives:  # a redrive keeps what completed: skip those items
            done = {i for i, a in map_items(self.store.list_activities(
                wf.workflow_exec_id, items_prefix(name), map_size=size), name).items()
                if a.state is A.COMPLETED}
        starts = {k: next((j for j in range(k, size, width) if j not in done), None)
                  for k in which}
        busy = [k for k, j in starts.items() if j is not None]
        if busy:
            put_edges(self.store, wf.workflow_exec_id, name, width, busy)
        self.core.threads.each(lambda k: self.chain_lane(wf, defn, name, starts[k], k), busy)
        if len(busy) < len(starts) and not any_edge(self.store, wf.workflow_exec_id, name,
                                                     width):
            self.finish_map(wf, defn, name)

    # -- items ----------------------------------------------------------------------------------

    def _chained(self, item: ActivityRecord,
                 defn: WorkflowDefinition) -> tuple[list[Any], int] | None:
        """For an item whose lane goes on: the map's list (known to this process) and
        the next item's index; None when its follow-ups must read the run first (the
        lane's end, a map with an ``on_failure``, a list not read here yet)."""
        name, index = split_item(item.activity_name)
        if index is None or (name not in defn.names and ITEM_MARK not in name):
            return None  # (``s#2``: a code map's step, known to a code run's definition)
        spec = defn.activity(name)
        items = self._lists.get(item.workflow_exec_id, name, generation(item))
        if items is None or spec.on_failure is not None:
            return None
        nxt = index + lanes(spec, len(items))
        return (items, nxt) if nxt < len(items) else None

    def chain_ahead(self, item: ActivityRecord) -> bool:
        """A completed item's follow-up without a read of the run first: create the next
        item of its lane, then read the run — the guard read of the new item (created
        first, read second) is this item's check of the run too. True when done; False:
        the follow-up reads the run and goes the usual way (``after_item``)."""
        if item.workflow_version is None:
            return False
        defn = self.core.definitions.definition_of(item)
        chained = self._chained(item, defn)
        if chained is None:
            return False
        items, nxt = chained
        # The run as the item knows it: its name, version, trace and generation (an
        # attempt that just ended belongs to the run's current redrive; start_item's
        # read checks that before anything moves).
        stand_in = WorkflowRecord(item.workflow_exec_id, item.workflow_name,
                                  item.workflow_version, W.RUNNING,
                                  traceparent=item.traceparent,
                                  redrive_count=item.redrive_count)
        name = split_item(item.activity_name)[0]
        return self.start_item(stand_in, defn, name, nxt, items[nxt])

    def after_item(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                   item: ActivityRecord) -> None:
        """Follow-ups of an item's end: its retry, or the next item of its lane."""
        name, index = split_item(item.activity_name)
        assert index is not None
        spec = defn.activity(name)
        if retries_left(item, spec):
            self.core.flow.retry_or_fail(wf, defn, item)  # a new attempt of this item
            return
        if spec.on_failure is not None and not self.map_running(wf, name):
            # A straggler of a map that failed while its workflow goes on: the last one
            # to stop may be all the run waited for.
            if not open_activities(defn, latest_of(self.store.list_activities(
                    wf.workflow_exec_id))):
                self.core.flow.complete_if_done(wf, defn)
            return
        if item_failed(item, spec) and self.too_many_failures(wf, spec, name):
            why = (item.error or "").strip().splitlines()[:1]
            self.fail_map(wf, defn, name, f"item {index} {item.state}"
                          + (f": {why[0][:300]}" if why else ""))
            return
        items = self.map_elements(wf, defn, name)
        width = lanes(spec, len(items))
        self.chain_lane(wf, defn, name, index + width, index % width)

    def chain_lane(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                   index: int | None, lane: int) -> None:
        """Start the first open item of ``lane`` from ``index`` on, or end the lane."""
        items = self.map_elements(wf, defn, name)
        width = lanes(defn.activity(name), len(items))
        j = index
        while j is not None and j < len(items):
            if self.start_item(wf, defn, name, j, items[j]):
                return
            j += width
        if end_lane(self.store, wf.workflow_exec_id, name, width, lane):
            self.finish_map(wf, defn, name)

    def start_item(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                   index: int, element: Any) -> bool:
        """Create item ``index`` (its next attempt after a redrive) and move it on.
        False when it COMPLETED already (before a redrive): the lane goes on."""
        wx, iname = wf.workflow_exec_id, item_name(name, index)
        record = self.core.flow.new_attempt(wf, defn, iname, 1, self.core.clock()).with_changes(
            input=own_input(element, f"element {index} of {name}", self.core.reads.limits))
        fresh = self.store.create_activity(record)
        if not fresh:  # a replay, or an item that ran before a redrive
            latest = latest_of(self.store.list_activities(wx, f"{iname}:"))[iname]
            if latest.state is A.COMPLETED:
                return False
            record = latest
            if generation(latest) < wf.redrives:  # it failed before the redrive: a new go
                record = self.core.flow.new_attempt(
                    wf, defn, iname, latest.attempt + 1, self.core.clock(),
                ).with_changes(input=latest.input, retry_base=latest.attempt)
                fresh = self.store.create_activity(record)
        # Created first, read second (a cancel, a failure or the map's end that landed
        # in between is seen here, and the item is not launched); a read begun after
        # the create, shared with the run's other items in this process.
        current = self.core.reads.workflow_after(wx)
        spec = defn.activity(name)
        # A follow-up from before a redrive (a late replay) created for its generation:
        # the redrive starts this item itself, of its own generation.
        stale = current.redrives != wf.redrives
        if stale or not flow.proceeds(current) or (
                spec.on_failure is not None and not self.map_running(current, name)):
            if fresh:
                self.core.ending.stop_activity(record, defn, ask_running=False)
            if not stale:
                self.core.ending.settle(wx)
            return True
        self.core.flow.advance(current, defn, iname, record.attempt)
        return True

    # -- the map's own end ------------------------------------------------------------------------

    def map_node(self, wx: str, name: str) -> ActivityRecord | None:
        """The map's latest attempt (one Query of its attempts)."""
        return latest_of(self.store.list_activities(wx, f"{name}:")).get(name)

    def map_running(self, wf: WorkflowRecord, name: str) -> bool:
        node = self.map_node(wf.workflow_exec_id, name)
        return node is not None and node.state is A.RUNNING

    def too_many_failures(self, wf: WorkflowRecord, spec: ActivityDefinition,
                          name: str) -> bool:
        if not spec.tolerated_failures:
            return True
        known = self._lists.get(wf.workflow_exec_id, name, wf.redrives)
        items = map_items(self.store.list_activities(
            wf.workflow_exec_id, items_prefix(name),
            map_size=None if known is None else len(known)), name)
        return sum(1 for a in items.values() if item_failed(a, spec)) \
            > spec.tolerated_failures

    def finish_map(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str) -> None:
        """Every lane ended: end the map COMPLETED (or FAILED: too many failures)."""
        wx = wf.workflow_exec_id
        node = self.map_node(wx, name)
        if node is None or node.state is not A.RUNNING or not node.map_size:
            return
        spec = defn.activity(name)
        items = map_items(self.store.list_activities(wx, items_prefix(name),
                                                     map_size=node.map_size), name)
        if any(a.state is None or not a.state.is_terminal for a in items.values()):
            return  # an item retried by hand after its lane ended: its end comes back here
        failed = [i for i, a in sorted(items.items()) if item_failed(a, spec)]
        if len(failed) > spec.tolerated_failures:
            self.fail_map(wf, defn, name, f"{len(failed)} item(s) failed (first: item "
                          f"{failed[0]}), more than tolerated_failures "
                          f"({spec.tolerated_failures})")
            return
        output: str | None = None
        try:
            whole = {i: resolved(self.core, a) for i, a in items.items()} \
                if any(has_refs(a) for a in items.values()) else items
            output = self.core.reads.limits.encode(map_output(whole, int(node.map_size)), "output")
        except ValueError:
            log.info("map %s of %s: output kept on its items (too large)", name, wx)
        self.end_map_node(node, (A.COMPLETED,), defn, output=output)

    def fail_map(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                 why: str) -> None:
        """End a running map FAILED (one winner), then stop its unfinished items."""
        node = self.map_node(wf.workflow_exec_id, name)
        if node is None or node.state is not A.RUNNING:
            return
        self.end_map_node(node, (A.FAILED,), defn, error=why, stop_items=True)

    def end_map_node(self, node: ActivityRecord, path: tuple[ActivityState, ...],
                 defn: WorkflowDefinition, *, output: str | None = None,
                 error: str | None = None, error_type: str | None = None,
                 expected: ActivityState | None = None, stop_items: bool = False) -> None:
        """Move the map's own row along ``path`` to its end (one write), then its
        follow-ups (the winner only)."""
        wx, name = node.workflow_exec_id, node.activity_name
        start = expected or node.state or A.RUNNING
        changes = rules.changes_for(defn.activity(name), A.RUNNING, path[-1],
                                    now=self.core.clock(), workflow_name=node.workflow_name,
                                    retention=self.core.definitions.retention(defn), output=output,
                                    error=error, error_type=error_type)
        if start is not A.RUNNING:
            changes["started_epoch"] = self.core.clock()
            changes["map_size"] = 0 if output == "[]" else REMOVE
        try:
            moved = self.core.known.move(node.activity_exec_id, start, path, changes)
        except StateConflict:
            return
        if path[-1] is not A.COMPLETED:  # lanes nobody will end
            drop_edges(self.store, wx, name, lanes(defn.activity(name),
                                                   int(node.map_size or 0)))
        if stop_items:
            for item in self.store.list_activities(wx, items_prefix(name),
                                                   map_size=node.map_size):
                self.core.ending.stop_activity(item, defn, ask_running=True)
        if path[-1] is not A.CANCELLED:
            self.core.flow.after(moved)

    # -- repair ---------------------------------------------------------------------------------

    def reconcile(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        """The reconciler's part for each RUNNING map (map_repair.py)."""
        return wf.state is not W.SUSPENDED and repair_maps(self, wf, defn, acts)
