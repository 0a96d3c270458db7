"""The reconciler's repair of a running map (the maps feature's ``reconcile``): what a
crash between two writes of its expansion, its chain or its end left undone is re-derived
from its items and its lane edges (docs/architecture.md, "Maps")."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from whimbrel.contract.dataflow import items_prefix, lanes
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.outcomes import generation, map_items, retries_left
from whimbrel.contract.records import ActivityRecord, WorkflowRecord, latest_of
from whimbrel.contract.states import ActivityState
from whimbrel.engine.feature import Core
from whimbrel.engine.map_lanes import pending_lanes
from whimbrel.engine.ports import StorePort

A = ActivityState


@runtime_checkable
class MapSteps(Protocol):
    """The steps of the maps feature a repair redoes (``core.feature(MapSteps)`` for a
    feature that may not import it: a code run's map steps)."""

    core: Core
    store: StorePort

    def after_item(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                   item: ActivityRecord) -> None: ...
    def start_lanes(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                    size: int, which: range | list[int]) -> None: ...
    def finish_map(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str) -> None: ...


def repair_maps(maps: MapSteps, wf: WorkflowRecord, defn: WorkflowDefinition,
                acts: list[ActivityRecord]) -> bool:
    """Repair each RUNNING map of ``wf`` (``acts``: every attempt of the run): start
    lanes an expansion left unstarted, move on items stuck before they ran, redo a lost
    chain step or lane end, and end a map whose lanes all ended. True if it did
    anything."""
    latest = latest_of(acts)
    repaired = False
    for spec in defn.activities:
        node = latest.get(spec.name)
        if spec.map_over is None or node is None or node.state is not A.RUNNING \
                or not node.map_size:
            continue
        repaired |= repair_map(maps, wf, defn, node, map_items(acts, spec.name))
    return repaired


def repair_step_maps(maps: MapSteps, wf: WorkflowRecord, defn: WorkflowDefinition,
                     steps: list[ActivityRecord]) -> bool:
    """Repair each RUNNING ``ctx.map`` step of a code run (``steps``: the attempts in
    the run's partition, without map items): its items are read (one Query per
    partition) only for such a step. True if it did anything."""
    repaired = False
    for node in latest_of(steps).values():
        if node.step is None or node.state is not A.RUNNING or not node.map_size:
            continue
        items = maps.store.list_activities(wf.workflow_exec_id,
                                           items_prefix(node.activity_name),
                                           map_size=node.map_size)
        repaired |= repair_map(maps, wf, defn, node, map_items(items, node.activity_name))
    return repaired


def repair_map(maps: MapSteps, wf: WorkflowRecord, defn: WorkflowDefinition,
               node: ActivityRecord, items: dict[int, ActivityRecord]) -> bool:
    """Repair one RUNNING map from its items (``items``: the latest attempt of each, by
    index): start lanes its expansion left unstarted, move on items stuck before they
    ran, redo a lost chain step or lane end, end it when every lane ended. True if it
    did anything."""
    name, size = node.activity_name, int(node.map_size or 0)
    spec = defn.activity(name)
    width = lanes(spec, size)
    gen = generation(node)
    pending = set(pending_lanes(maps.store, wf.workflow_exec_id, name, width))
    unstarted: list[int] = []
    repaired = False
    for lane in range(width):
        mine = [j for j in range(lane, size, width)
                if j in items and generation(items[j]) >= gen]
        if not mine:
            if any(j not in items or items[j].state is not A.COMPLETED
                   for j in range(lane, size, width)):
                unstarted.append(lane)
            continue
        act = items[mine[-1]]
        state = act.state or A.REQUESTED
        if not state.is_terminal:
            due = not (act.not_before_epoch or 0) > maps.core.clock()
            if (state is A.REQUESTED and due) or (state is A.READY and spec.launcher.is_push
                                                   and not spec.launcher.needs_worker):
                maps.core.flow.advance(wf, defn, act.activity_name, act.attempt, state)
                repaired = True
            continue
        rest = range(mine[-1] + width, size, width)
        broken = retries_left(act, spec) or any(
            j not in items or items[j].state is not A.COMPLETED for j in rest)
        if broken or str(lane) in pending:  # a lost chain step, retry or lane end
            maps.after_item(wf, defn, act)
            repaired = True
    if unstarted:
        maps.start_lanes(wf, defn, name, size, unstarted)
        repaired = True
    elif not pending and not repaired:
        maps.finish_map(wf, defn, name)  # every lane ended; the map's end was lost
        repaired = True
    return repaired
