"""Results judged by when they were written (part of the core; docs/contract.md,
"Deadlines").

A running attempt's COMPLETED or FAILED counts only if it was written before the
attempt's deadline as it stands (``deadline_epoch``: start-to-close, or the heartbeat
deadline a heartbeat pushed): an in-process result is judged by the write itself, a
Simple API row by its stream record's creation time (``ApproximateCreationDateTime``),
however late the record arrives. The result's write carries that as its condition
(``written_by``); a result written after the deadline loses it while the attempt is
still RUNNING, and is then the heartbeat listener's case, decided at once: the attempt
is TIMED_OUT (conditional on the deadline still preceding the result, ``late_at``), with
the time it really ran, and the result is kept as its late output (engine/late.py).

The sweep's in-flight grace (``in_flight_grace_seconds``) is only how long the listener
waits past a deadline before it times out an attempt nobody reported on (a row written
in time may still be on the stream); it never extends what counts as in time.
"""

from __future__ import annotations

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import ActivityTimedOut, StateConflict
from whimbrel.contract.records import ActivityRecord
from whimbrel.contract.states import ACTIVITY_ACTIVE, ACTIVITY_GAVE_UP, ActivityState, Transition
from whimbrel.engine import rules
from whimbrel.engine.feature import Core

A = ActivityState

#: The reports of an attempt's own end that are judged by when they were written.
JUDGED = frozenset({Transition.COMPLETED, Transition.FAILED})


def judged(source: ActivityState | None, verb: Transition) -> bool:
    """Whether ``verb`` from ``source`` is a result judged against the deadline."""
    return source in ACTIVITY_ACTIVE and verb in JUDGED


def came_late(item: ActivityRecord | None, written: float) -> bool:
    """Whether ``item`` (as it is now, still running) had passed its deadline when a
    result was written at ``written``."""
    return item is not None and item.state in ACTIVITY_ACTIVE \
        and item.deadline_epoch is not None and item.deadline_epoch <= written


def late_heartbeat(engine: Core, current: ActivityRecord | None, at: float) -> None:
    """A heartbeat written at ``at`` lost its write: when it came after the deadline of
    the attempt still running, the attempt is timed out now, as a late result would.

    Raises:
        ActivityTimedOut: it came late (the attempt is TIMED_OUT, by this call or another).
    """
    if current is None or not came_late(current, at):
        return
    now, moved = time_out_late(engine, engine.definitions.definition_of(current), current, at)
    if moved:
        engine.flow.after(now)
    if now.state in ACTIVITY_GAVE_UP:
        raise ActivityTimedOut(current.activity_exec_id, now.state.value)


def time_out_late(engine: Core, defn: WorkflowDefinition, item: ActivityRecord,
                  written: float) -> tuple[ActivityRecord, bool]:
    """TIMED_OUT, the listener's move, for an attempt whose result was written after its
    deadline (at ``written``). Returns the attempt as it is now, and whether this call
    moved it (the caller then runs the follow-ups); one that moved on meanwhile (a
    heartbeat written in time landed, another actor ended it) is returned as it is."""
    spec = defn.activity(item.activity_name)
    state = item.state or A.RUNNING
    why = rules.fired(item, spec, written) or (
        f"its result was written {written - float(item.deadline_epoch or written):.1f} s "
        "past its deadline")
    changes = rules.changes_for(spec, state, A.TIMED_OUT, now=engine.clock(),
                                workflow_name=item.workflow_name,
                                retention=engine.definitions.retention(defn), error=why)
    try:
        return engine.known.move(item.activity_exec_id, state, (A.TIMED_OUT,), changes,
                           actor=rules.LISTENER, late_at=written), True
    except StateConflict as lost:
        if lost.current is None:
            raise
        return lost.current, False
