"""Waits, as data: activities that wait for a time, a signal or an approval.

A wait is an activity of the DAG whose launcher kind is ``timer``, ``signal`` or
``approval`` (``LauncherSpec.timer/signal/approval``). Nothing launches or claims it:
it sits in READY, with its deadline armed in the sparse ``timers`` index, until whoever
makes it happen ends it in one write (docs/contract.md, "Waits and suspension"). This
module is pure: what a wait's settings may be, when it falls due, what it says it waits
for, and the errors of its moves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from whimbrel.contract.errors import InvalidInput, NotAllowedNow
from whimbrel.contract.limits import NAME_PATTERN

if TYPE_CHECKING:
    from whimbrel.contract.activities import ActivityDefinition
    from whimbrel.contract.records import ActivityRecord

TIMER = "timer"
SIGNAL = "signal"
APPROVAL = "approval"
#: The launcher kinds of waits, and the settings each accepts.
WAIT_SETTINGS: Mapping[str, frozenset[str]] = {
    TIMER: frozenset({"seconds", "until_input"}),
    SIGNAL: frozenset({"name", "timeout_seconds"}),
    APPROVAL: frozenset({"approvers", "timeout_seconds"}),
}
WAIT_KINDS = frozenset(WAIT_SETTINGS)

#: ``error_type`` of an approval that was rejected: a decision, not a fault, so its retry
#: policy does not apply (the workflow fails).
REJECTED = "Rejected"
#: Durations an activity that waits cannot have: nobody runs, heartbeats or claims it.
_RUNNER_SETTINGS = ("heartbeat_timeout_seconds", "start_to_close_seconds",
                    "schedule_to_start_seconds")
MAX_APPROVERS = 100
MAX_WHO_CHARS = 256
MAX_COMMENT_CHARS = 4000
MAX_SIGNAL_ID_CHARS = 512
_NAME = re.compile(NAME_PATTERN)


# -- definitions ---------------------------------------------------------------------------

def _seconds(value: Any) -> bool:
    return (not isinstance(value, bool) and isinstance(value, int | float)
            and math.isfinite(value) and value > 0)


def config_problems(kind: str, config: Mapping[str, Any], where: str) -> list[str]:
    """The problems of a wait's launcher settings (empty for other kinds)."""
    allowed = WAIT_SETTINGS.get(kind)
    if allowed is None:
        return []
    out = [f"{where}: {kind} launcher has no setting {key!r} (it takes "
           f"{', '.join(sorted(allowed))})" for key in sorted(set(config) - allowed)]
    timeout = config.get("timeout_seconds")
    if timeout is not None and not _seconds(timeout):
        out.append(f"{where}: {kind} launcher timeout_seconds must be a number > 0")
    if kind == TIMER:
        given = [k for k in ("seconds", "until_input") if config.get(k) is not None]
        if len(given) != 1:
            out.append(f"{where}: timer launcher needs exactly one of 'seconds' or "
                       "'until_input'")
        elif given == ["seconds"] and not _seconds(config["seconds"]):
            out.append(f"{where}: timer launcher seconds must be a number > 0")
        elif given == ["until_input"] and not (isinstance(config["until_input"], str)
                                               and config["until_input"]):
            out.append(f"{where}: timer launcher until_input must name a key of the "
                       "activity's input")
    elif kind == SIGNAL:
        name = config.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            out.append(f"{where}: signal launcher needs a 'name' matching {NAME_PATTERN}")
    else:
        approvers = config.get("approvers", ())
        if not (isinstance(approvers, list | tuple) and len(approvers) <= MAX_APPROVERS
                and all(isinstance(a, str) and 0 < len(a) <= MAX_WHO_CHARS
                        for a in approvers)):
            out.append(f"{where}: approval launcher approvers must be a list of at most "
                       f"{MAX_APPROVERS} names")
    return out


def definition_problems(spec: ActivityDefinition) -> list[str]:
    """What a wait may not have that other activities may."""
    if spec.launcher.kind not in WAIT_KINDS:
        return []
    return [f"activity {spec.name!r}: a {spec.launcher.kind} wait cannot have {key} "
            "(nothing runs it; a signal or approval takes its own timeout_seconds)"
            for key in _RUNNER_SETTINGS if getattr(spec, key) is not None]


# -- when a wait falls due -----------------------------------------------------------------

def parse_when(value: Any) -> float | None:
    """Epoch seconds from a number, a numeric string or an ISO-8601 time (UTC unless it
    names a zone); None when it is none of these."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) and value >= 0 else None
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return parse_when(float(value))
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def merge_input(workflow_input: Any, static: Mapping[str, Any] | None) -> Any:
    """An activity's input: the workflow's input with its static ``input`` over it."""
    if static is None:
        return workflow_input
    return {**workflow_input, **static} if isinstance(workflow_input, dict) else dict(static)


def timer_until(spec: ActivityDefinition, activity_input: Any) -> float:
    """The time a ``timer(until_input=...)`` fires at.

    Raises:
        InvalidInput: the input has no usable time at that key.
    """
    key = str(spec.launcher.config.get("until_input"))
    value = activity_input.get(key) if isinstance(activity_input, Mapping) else None
    when = parse_when(value)
    if when is None:
        raise InvalidInput(
            f"input[{key!r}] of timer activity {spec.name!r} must be epoch seconds or an "
            f"ISO-8601 time, not {value!r}"[:300], field="input")
    return when


def check_input(activities: Sequence[ActivityDefinition], workflow_input: Any) -> None:
    """Refuse a start whose input lacks a time a ``timer(until_input=...)`` needs.

    Raises:
        InvalidInput: naming the key and the activity.
    """
    for spec in activities:
        if spec.launcher.kind == TIMER and spec.launcher.config.get("until_input"):
            timer_until(spec, merge_input(workflow_input, spec.input))


def deadline(spec: ActivityDefinition, ready_at: float, activity_input: Any) -> float | None:
    """When a wait that became READY at ``ready_at`` falls due: a timer fires, a signal or
    approval times out (None: it waits for ever). A timer whose input holds no time is
    due at once, and fails when it fires (``timer_until`` says why)."""
    config = spec.launcher.config
    if spec.launcher.kind == TIMER:
        if config.get("seconds") is not None:
            return ready_at + float(config["seconds"])
        try:
            return timer_until(spec, activity_input)
        except InvalidInput:
            return ready_at
    timeout = config.get("timeout_seconds")
    return ready_at + float(timeout) if timeout is not None else None


def iso(epoch: float) -> str:
    """``2026-11-23T09:00:00Z``: how a wait names a time."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def waiting_for(spec: ActivityDefinition, due: float | None) -> str:
    """What a READY wait waits for: ``timer:<time>``, ``signal:<name>`` or ``approval``."""
    kind = spec.launcher.kind
    if kind == TIMER:
        return f"{TIMER}:{iso(due) if due is not None else '?'}"
    if kind == SIGNAL:
        return f"{SIGNAL}:{spec.launcher.config.get('name')}"
    return APPROVAL


def timeout_reason(spec: ActivityDefinition) -> str:
    """Why a signal or approval wait TIMED_OUT."""
    config = spec.launcher.config
    what = (f"signal {config.get('name')!r}" if spec.launcher.kind == SIGNAL
            else "decision on the approval")
    return f"no {what} within its timeout_seconds ({config.get('timeout_seconds')} s)"


# -- approvals -----------------------------------------------------------------------------

def approvers(spec: ActivityDefinition) -> tuple[str, ...]:
    return tuple(spec.launcher.config.get("approvers") or ())


def decision_text(by: Any, comment: Any) -> tuple[str, str]:
    """``by`` and ``comment`` of a decision, checked.

    Raises:
        InvalidInput: ``by`` empty or not text, or either too long.
    """
    if not isinstance(by, str) or not by.strip() or len(by) > MAX_WHO_CHARS:
        raise InvalidInput(f"by must name who decides (text of 1 to {MAX_WHO_CHARS} "
                           f"characters), not {by!r}"[:300], field="by")
    if comment is None:
        comment = ""
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT_CHARS:
        raise InvalidInput(f"comment must be text of at most {MAX_COMMENT_CHARS} "
                           "characters", field="comment")
    return by.strip(), comment


def approval_output(by: str, comment: str, at: float) -> dict[str, Any]:
    return {"approved": True, "by": by, "comment": comment, "at": at}


def rejection_error(by: str, comment: str) -> str:
    return f"rejected by {by}" + (f": {comment}" if comment else "")


def rejected(spec: ActivityDefinition, item: ActivityRecord) -> bool:
    """A rejected approval: a decision, not a fault, so its retry policy does not apply."""
    return spec.launcher.kind == APPROVAL and item.error_type == REJECTED


# -- errors --------------------------------------------------------------------------------

class NotAnApprover(NotAllowedNow):
    """``approve``/``reject`` by someone the approval does not list; nothing changed."""

    def __init__(self, *, activity_exec_id: str, by: str, allowed: Sequence[str]) -> None:
        super().__init__(
            f"{by!r} may not decide {activity_exec_id}: only {', '.join(allowed)} may",
            activity_exec_id=activity_exec_id, by=by, approvers=list(allowed))
        self.activity_exec_id = activity_exec_id
        self.by = by


class WaitsForEvent(NotAllowedNow):
    """A worker's move (READY, RUNNING, COMPLETED…) asked of a wait: a wait ends only by
    its own event (its timer, a signal, a decision), and otherwise only CANCEL."""

    def __init__(self, *, activity_exec_id: str, kind: str, transition: str) -> None:
        how = {TIMER: "its timer firing (found by the sweep)",
               SIGNAL: "a signal (Whimbrel.signal, `whimbrel signal`, a SIGNAL row)",
               APPROVAL: "a decision (approve/reject, `whimbrel approve`, an APPROVE row)",
               }.get(kind, "its event")
        super().__init__(
            f"{transition} refused for {activity_exec_id}: it is a {kind} wait, which "
            f"ends only by {how}; CANCEL is the only move others may ask of it",
            activity_exec_id=activity_exec_id, kind=kind, transition=transition)
        self.activity_exec_id = activity_exec_id


class SignalRefused(NotAllowedNow):
    """A signal nothing can receive: its run has ended (or is ending), or every activity
    waiting for that name has already received one. Nothing was stored."""
