"""Late output (part of the core; docs/contract.md, "Late output").

The original contract: an activity the system gave up on (TIMED_OUT) may still be
running; it may write to its row, never its state. So its late COMPLETED or FAILED is
kept on the row, as ``late_output`` (JSON text) or ``late_error``, with the time it was
written (``late_epoch``: for a Simple API row, DynamoDB's own time of the row), and the
reporter is told :class:`ActivityTimedOut` (its result was kept, its state stays).
The same holds for LOST (the reconciler's tombstone of a vanished row).
"""

from __future__ import annotations

from typing import Any

from whimbrel.contract.errors import ActivityTimedOut
from whimbrel.contract.payloads import clip_error
from whimbrel.contract.records import ActivityRecord
from whimbrel.contract.states import ACTIVITY_GAVE_UP, Transition
from whimbrel.engine.feature import Core, Feature

#: The reports an activity makes of its own end: kept late, never applied.
LATE_VERBS = frozenset({Transition.COMPLETED, Transition.FAILED})


def gave_up(item: ActivityRecord | None, verb: Transition) -> bool:
    """Whether ``verb`` on ``item`` is a late report of an attempt given up on."""
    return item is not None and item.state in ACTIVITY_GAVE_UP and verb in LATE_VERBS


def keep(engine: Core, item: ActivityRecord, verb: Transition, *, output: str | None,
         error: Any, written_epoch: float | None = None) -> ActivityTimedOut:
    """Write the late report on the row (its state untouched) and return the error to
    raise to the reporter.

    Raises:
        StateConflict: the row is in no given-up state (it vanished since).
    """
    changes: dict[str, Any] = {"late_epoch": written_epoch if written_epoch is not None
                               else engine.clock()}
    if verb is Transition.COMPLETED:
        changes["late_output"] = output if output is not None else "null"
    else:
        changes["late_error"] = clip_error(error) or "failed (no error given)"
    # Only while it is TIMED_OUT or LOST: a late report writes to the row, never its
    # state, and never on a row that is anywhere else.
    kept = engine.store.set_activity(item.activity_exec_id, changes, states=ACTIVITY_GAVE_UP)
    engine.hooks.observe(Feature.attempt_ended, kept)  # a slot it kept goes (pools.py)
    state = item.state.value if item.state else "TIMED_OUT"
    return ActivityTimedOut(item.activity_exec_id, state, kept=True)
