"""Pure rules of the engine: what a move writes besides the state, and which deadline
falls when. No I/O; the clock is an argument (STYLE: pure core, effects at the edge).

Deadlines (docs/contract.md, "Deadlines"). One sparse ``timer_epoch`` per attempt holds
the earliest armed deadline:

* REQUESTED (a retry): its not-before time; due, the sweep launches it.
* READY (``external``) with ``schedule_to_start_seconds``: nobody claimed it in time.
* QUEUED / PREPARING: ``schedule_to_start_seconds`` if set, and always the launch guard
  ``start_timeout_seconds`` (a launch that never reached RUNNING).
* RUNNING / CANCELLED_RUNNING: the heartbeat deadline (``heartbeat_timeout_seconds``
  after the last heartbeat) and the close deadline (``start_to_close_seconds`` after
  RUNNING), whichever comes first.
"""

from __future__ import annotations

from typing import Any

from whimbrel.contract import waits
from whimbrel.contract.definitions import ActivityDefinition, WorkflowDefinition
from whimbrel.contract.notifications import FAILURE_STATES
from whimbrel.contract.outcomes import retries_left
from whimbrel.contract.records import REMOVE, ActivityRecord
from whimbrel.contract.states import (
    ACTIVITY_LAUNCHED,
    ACTIVITY_NOT_LAUNCHED,
    ActivityState,
    WorkflowState,
)
from whimbrel.settings import DAY_SECONDS

A = ActivityState

#: The actor of a time-out (the heartbeat listener's move; engine/sweep.py, written.py).
LISTENER = "heartbeat-listener"

#: The definition does not say: the engine's default retention applies.
DEFAULT = "default"

#: Rows that end before their run are given this much more than the retention, so that
#: for any run shorter than it they still outlive ``end + retention`` and the end needs
#: no write to them (docs/operations.md, "Retention").
RETENTION_SLACK_SECONDS = DAY_SECONDS


def retention_seconds(defn: WorkflowDefinition, default_days: float | None) -> float | None:
    """How long an ended run of ``defn`` is kept; None keeps it forever."""
    days = defn.retention_days
    if days == DEFAULT:
        days = default_days
    return None if days is None else float(days) * DAY_SECONDS


#: A run's attribute index items outlive its start by its retention plus this: a run
#: that runs longer than this is no longer listed by attribute past its retention.
ATTRIBUTE_SLACK_SECONDS = 365 * 86_400.0


def expiry(now: float, retention: float | None) -> float | None:
    return None if retention is None else float(int(now + retention))


def start_deadline(spec: ActivityDefinition, now: float, *, queued: bool) -> float | None:
    """When a READY (``queued`` False) or QUEUED/PREPARING attempt that has not started
    times out."""
    limits = [spec.schedule_to_start_seconds] if spec.schedule_to_start_seconds else []
    if queued:
        limits.append(spec.start_timeout_seconds)
    return now + min(limits) if limits else None


def running_deadline(spec: ActivityDefinition, *, heartbeat_epoch: float,
                     close_epoch: float | None) -> float | None:
    """The earliest deadline of a running attempt: heartbeat or close."""
    deadlines = [d for d in (
        heartbeat_epoch + spec.heartbeat_timeout_seconds
        if spec.heartbeat_timeout_seconds else None, close_epoch) if d is not None]
    return min(deadlines) if deadlines else None


def changes_for(spec: ActivityDefinition, source: ActivityState, target: ActivityState, *,
                now: float, workflow_name: str, retention: float | None,
                output: str | None = None, error: str | None = None,
                error_type: str | None = None) -> dict[str, Any]:
    """Attributes written with a move from ``source`` to ``target`` (the state itself
    and the history entry are the store's part of every move).

    ``timer_epoch`` and ``claimable`` are intents: the store derives the sparse-index
    keys from them.
    """
    out: dict[str, Any] = {}
    # A python attempt may sit in the index too, left for a worker (engine/admission.py).
    leaves_claim = (spec.launcher.is_pull and source in ACTIVITY_NOT_LAUNCHED) or (
        spec.launcher.needs_worker and source is A.READY)
    if target is A.READY:
        out["ready_epoch"] = now  # its wait (for a claim, for its pool) counts from here
        deadline = start_deadline(spec, now, queued=False)
        out["timer_epoch"] = deadline if deadline is not None else REMOVE
        if spec.launcher.is_pull:
            out["claimable"] = (workflow_name, spec.name)
    elif target in ACTIVITY_LAUNCHED:
        if leaves_claim:
            out["claimable"] = REMOVE
        if target is A.QUEUED or source is not A.QUEUED:
            deadline = start_deadline(spec, now, queued=True)
            out["timer_epoch"] = deadline if deadline is not None else REMOVE
    elif target is A.RUNNING:
        if leaves_claim:
            out["claimable"] = REMOVE
        out["started_epoch"] = now
        out["heartbeat_epoch"] = now
        close = now + spec.start_to_close_seconds if spec.start_to_close_seconds else None
        if close is not None:
            out["close_epoch"] = close
        deadline = running_deadline(spec, heartbeat_epoch=now, close_epoch=close)
        out["timer_epoch"] = deadline if deadline is not None else REMOVE
        out["deadline_epoch"] = deadline if deadline is not None else REMOVE
    elif target.is_terminal:
        if leaves_claim:
            out["claimable"] = REMOVE
        out["ended_epoch"] = now
        out["timer_epoch"] = REMOVE
        expires = expiry(now + RETENTION_SLACK_SECONDS, retention)
        if expires is not None:
            out["expires_epoch"] = expires
        if output is not None:
            out["output"] = output
        if error is not None:
            out["error"] = error
        if error_type is not None:
            out["error_type"] = error_type
    return out


def fired(item: ActivityRecord, spec: ActivityDefinition, now: float) -> str | None:
    """Why a running attempt's armed deadline has passed at ``now``, or None when a
    heartbeat moved it on since (the sweep then re-arms the timer)."""
    hb = spec.heartbeat_timeout_seconds or item.heartbeat_timeout_seconds
    last = item.heartbeat_epoch if item.heartbeat_epoch is not None else item.started_epoch
    if item.close_epoch is not None and item.close_epoch <= now:
        return (f"ran for {now - float(item.started_epoch or now):.1f} s, past its "
                f"start_to_close_seconds ({spec.start_to_close_seconds} s)")
    if hb and last is not None and last + hb <= now:
        return f"no heartbeat for {now - last:.1f} s (timeout {hb} s)"
    if not hb and item.close_epoch is None and item.timer_epoch is not None \
            and item.timer_epoch <= now:
        return "its deadline passed"  # armed by an older definition of the attempt
    return None


def not_started_reason(item: ActivityRecord, spec: ActivityDefinition) -> str:
    state = item.state
    if spec.launcher.is_wait:
        return waits.timeout_reason(spec)
    if state is A.READY and item.pool_wait:
        # Held by its pool, never claimable or launched: say what it waited for.
        return (f"waited for a slot of pool {item.pool_wait!r} (or a token of its rate) "
                f"longer than schedule_to_start_seconds ({spec.schedule_to_start_seconds} s)")
    if state is A.READY:
        return (f"nobody claimed it within schedule_to_start_seconds "
                f"({spec.schedule_to_start_seconds} s)")
    limit = min(x for x in (spec.schedule_to_start_seconds, spec.start_timeout_seconds) if x)
    return f"{state.value if state else '?'} and not RUNNING within {limit:.0f} s " \
           "of being queued (launch lost)"


def retry_follows(spec: ActivityDefinition, item: ActivityRecord) -> bool:
    """Whether the retry policy gives a FAILED or TIMED_OUT attempt a next attempt: while
    it has attempts left in its generation and its error type is retried, unless it is a
    map's own attempt or a rejected approval (``outcomes.retries_left``).

    The one place that decides it: ``flow.on_failure`` retries exactly when this holds,
    and the events say an activity failed for good exactly when it does not
    (:func:`failed_for_good`).
    """
    return retries_left(item, spec)


def failed_for_good(spec: ActivityDefinition, item: ActivityRecord) -> bool:
    """True when ``item`` ended FAILED or TIMED_OUT and no retry follows.

    An attempt asked to stop (its history passes through CANCELLED_RUNNING) that then
    times out was cancelled, not failed: its run's end tells of it. Decided from the
    item alone, so every delivery of the record that ended it decides the same.
    """
    if item.state not in FAILURE_STATES:
        return False
    if any(change.state == A.CANCELLED_RUNNING.value for change in item.history):
        return False
    return not retry_follows(spec, item)


def may_start_while(wf_state: WorkflowState, source: ActivityState) -> bool:
    """Whether an attempt in ``source`` may start in a workflow in ``wf_state``: only in a
    RUNNING one, or, SUSPENDED, when it was launched before the suspend."""
    return wf_state is WorkflowState.RUNNING or (
        wf_state is WorkflowState.SUSPENDED and source in ACTIVITY_LAUNCHED)
