"""An attempt's one write (part of the core, for ``flow.py``): how a move the engine
decided is written, and how a caller's verb is.

* :func:`write_path` writes the path ``Flow.plan`` chose for an attempt (READY, QUEUED,
  RUNNING) in one conditional write: a pool may hold it READY first (the ``admit``
  hook), what the admission took is given back if the write loses, and only the winner
  launches.
* :func:`write_verb` writes one contract verb from the state the attempt shows, retried
  from where the activity is now while the contract still allows the verb there, and a
  running attempt's result written after its deadline times it out instead
  (engine/written.py).

``flow.py`` decides what follows (dependents, retries, the run's end); this module only
writes, so each stays one responsibility.
"""

from __future__ import annotations

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import StateConflict
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.payloads import clip_error
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_NOT_LAUNCHED,
    ACTIVITY_STARTING,
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
)
from whimbrel.engine import rules, written
from whimbrel.engine.admission import admission, ready_changes, starts
from whimbrel.engine.feature import Admission, Core, Feature

__all__ = ["write_path", "write_verb"]

A = ActivityState


def write_path(core: Core, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
               attempt: int, source: ActivityState, path: tuple[ActivityState, ...]) -> bool:
    """``Flow.advance``'s write and launch: True once it was handed to its launcher."""
    spec = defn.activity(name)
    aeid = activity_exec_id(wf.workflow_exec_id, name, attempt)
    now = core.clock()
    changes = rules.changes_for(spec, source, path[-1], now=now,
                                workflow_name=wf.workflow_name,
                                retention=core.definitions.retention(defn))
    if path[-1] is A.READY:
        changes = ready_changes(core, spec, wf, now, changes)
    ask: Admission | None = None
    if source in ACTIVITY_NOT_LAUNCHED and starts(path, changes):
        # A pool may hold it READY, out of the claimable index (engine/pools.py).
        item = ActivityRecord(wf.workflow_exec_id, aeid, name, wf.workflow_name, attempt,
                              source, workflow_version=wf.version)
        ask = admission(core, wf, defn, item, changes)
        if ask is not None and not ask.go:
            path = (A.READY,) if source is A.REQUESTED else ()
            changes = ready_changes(core, spec, wf, now, rules.changes_for(
                spec, source, A.READY, now=now, workflow_name=wf.workflow_name,
                retention=core.definitions.retention(defn))) if path else {}
        if ask is not None:
            changes = {**changes, **ask.changes}
        if ask is not None and not path:  # held where it is: nothing to write
            ask.landed(item)
            return False
    try:
        moved = core.known.move(aeid, source, path, changes)
    except StateConflict as lost:
        if ask is not None:
            ask.lost(lost.current)  # what the admission took is given back
        return False
    if ask is not None:
        ask.landed(moved)
    if path[-1] in ACTIVITY_STARTING:
        core.launches.launch(wf, defn, moved)
        return True
    core.hooks.observe(Feature.readied, wf, defn, moved)
    return False


def write_verb(core: Core, defn: WorkflowDefinition, spec: ActivityDefinition,
               item: ActivityRecord, transition: Transition, *, output: str | None,
               error: str | None, error_type: str | None, actor: str | None,
               claimed: bool, written_epoch: float | None) -> ActivityRecord:
    """``Flow.apply``'s write: ``transition`` from the state ``item`` shows, retried from
    where the activity is now while the contract allows the verb there (each retry
    follows a state change, and the contract has no cycles). A result written after
    the attempt's deadline times it out (and its follow-ups run) before the verb is
    tried again from TIMED_OUT, where it raises.

    Raises:
        StateConflict: the verb does not apply where the activity is now.
    """
    current: ActivityRecord = item
    while True:
        source = current.state
        target = ACTIVITY_TRANSITIONS.get((source, transition)) if source else None
        if source is None or target is None:
            raise StateConflict(expected=[s.value for (s, t) in ACTIVITY_TRANSITIONS
                                          if t is transition],
                                actual=source.value if source else None,
                                activity_exec_id=item.activity_exec_id,
                                transition=transition.value, current=current)
        now = core.clock()
        changes = rules.changes_for(
            spec, source, target, now=now, workflow_name=item.workflow_name,
            retention=core.definitions.retention(defn), output=output,
            error=clip_error(error), error_type=error_type)
        at = (written_epoch if written_epoch is not None else now) \
            if written.judged(source, transition) else None
        try:
            return core.known.move(item.activity_exec_id, source, (target,), changes,
                                   actor=actor, claimed=claimed, written_by=at)
        except StateConflict as lost:
            late = lost.current
            if at is not None and late is not None \
                    and late.state == source and written.came_late(late, at):
                current, timed_out = written.time_out_late(core, defn, late, at)
                if timed_out:
                    core.flow.after(current)
                continue
            if lost.current is None or lost.current.state == source:
                raise
            current = lost.current
            core.known.remember(current)
