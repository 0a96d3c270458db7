"""Waits, as data: activities that wait for a time, a signal or an approval.

A wait is an activity of the DAG whose launcher kind is a :class:`WaitKind` of
:data:`WAIT_KINDS` (``timer``, ``signal``, ``approval``: ``LauncherSpec.timer/signal/
approval``). Nothing launches or claims it: it sits in READY, with its deadline armed in
the sparse ``timers`` index, until whoever makes it happen ends it in one write
(docs/contract.md, "Waits and suspension"). This module is pure: each kind's settings,
deadline, what it says it waits for, why it timed out and how it :class:`Ends` (the
engine's part is chosen by that, engine/waits.py), and the errors of a wait's moves.
A new wait kind is one class and one line of :data:`WAIT_KINDS` here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from whimbrel.contract.errors import InvalidInput, NotAllowedNow
from whimbrel.contract.kinds import How, LauncherKind
from whimbrel.contract.limits import NAME_PATTERN
from whimbrel.contract.shapes import ActivityShape

if TYPE_CHECKING:
    from whimbrel.contract.records import ActivityRecord

TIMER = "timer"
SIGNAL = "signal"
APPROVAL = "approval"

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


def _seconds(value: Any) -> bool:
    return (not isinstance(value, bool) and isinstance(value, int | float)
            and math.isfinite(value) and value > 0)


# -- the kinds -----------------------------------------------------------------------------

class Ends(StrEnum):
    """How a wait ends (besides timing out or CANCEL): the engine's part of a wait
    (engine/waits.py) is chosen by this, never by the kind's name."""

    #: Its time comes: the sweep completes it (``{"fired_at": …}``).
    FIRES = "fires"
    #: A signal of its name sent to its run (kept until it is READY); its output is the
    #: signal's payload.
    SIGNAL = "signal"
    #: A person's decision: approve completes it, reject fails it. The console and the
    #: CLI offer Approve/Reject for these kinds only.
    DECISION = "decision"


class WaitKind(LauncherKind):
    """One kind of wait: its settings, deadline, what it says it waits for, why it
    timed out and how it ends. Defaults: a ``timeout_seconds`` setting arms the
    deadline."""

    how = How.WAIT
    #: Set by each kind.
    ends: Ends
    #: How it ends, in words (the error of a worker's move asked of it).
    ends_by: str

    def config_problems(self, config: Mapping[str, Any], where: str) -> list[str]:
        timeout = config.get("timeout_seconds")
        if timeout is not None and not _seconds(timeout):
            return [f"{where}: {self.name} launcher timeout_seconds must be a number > 0"]
        return []

    def definition_problems(self, spec: ActivityShape) -> list[str]:
        return [f"activity {spec.name!r}: a {self.name} wait cannot have {key} "
                "(nothing runs it; a signal or approval takes its own timeout_seconds)"
                for key in _RUNNER_SETTINGS if getattr(spec, key) is not None]

    def deadline(self, spec: ActivityShape, ready_at: float,
                 activity_input: Any) -> float | None:
        """When a wait that became READY at ``ready_at`` falls due (None: never)."""
        timeout = spec.launcher.config.get("timeout_seconds")
        return ready_at + float(timeout) if timeout is not None else None

    def waiting_for(self, spec: ActivityShape, due: float | None) -> str:
        """What it says it waits for (``waiting_for``): its kind's name, then what; a kind
        a signal ends says ``<kind>:<signal name>`` (:func:`signal_waited` reads it)."""
        if self.ends is Ends.SIGNAL:
            return f"{self.name}:{self.signal_name(spec)}"
        return self.name

    def timeout_reason(self, spec: ActivityShape) -> str:
        return (f"no {self.name} event within its timeout_seconds "
                f"({spec.launcher.config.get('timeout_seconds')} s)")

    def signal_name(self, spec: ActivityShape) -> str | None:
        """The signal it takes (kinds that end by a signal)."""
        return None


class Timer(WaitKind):
    """``timer``: fires ``seconds`` after READY, or at the time at ``until_input``."""

    ends = Ends.FIRES
    ends_by = "its timer firing (found by the sweep)"

    def config_problems(self, config: Mapping[str, Any], where: str) -> list[str]:
        out = super().config_problems(config, where)
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
        return out

    def deadline(self, spec: ActivityShape, ready_at: float,
                 activity_input: Any) -> float | None:
        """A timer whose input holds no time is due at once, and fails when it fires
        (``timer_until`` says why)."""
        config = spec.launcher.config
        if config.get("seconds") is not None:
            return ready_at + float(config["seconds"])
        try:
            return timer_until(spec, activity_input)
        except InvalidInput:
            return ready_at

    def waiting_for(self, spec: ActivityShape, due: float | None) -> str:
        return f"{self.name}:{iso(due) if due is not None else '?'}"


class Signal(WaitKind):
    """``signal``: completes with the payload of signal ``name`` sent to its run."""

    ends = Ends.SIGNAL
    ends_by = "a signal (Whimbrel.signal, `whimbrel signal`, a SIGNAL row)"

    def config_problems(self, config: Mapping[str, Any], where: str) -> list[str]:
        out = super().config_problems(config, where)
        name = config.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            out.append(f"{where}: signal launcher needs a 'name' matching {NAME_PATTERN}")
        return out

    def timeout_reason(self, spec: ActivityShape) -> str:
        config = spec.launcher.config
        return (f"no signal {config.get('name')!r} within its timeout_seconds "
                f"({config.get('timeout_seconds')} s)")

    def signal_name(self, spec: ActivityShape) -> str | None:
        return str(spec.launcher.config.get("name"))


class Approval(WaitKind):
    """``approval``: a person approves (COMPLETED) or rejects (FAILED) it."""

    ends = Ends.DECISION
    ends_by = "a decision (approve/reject, `whimbrel approve`, an APPROVE row)"

    def config_problems(self, config: Mapping[str, Any], where: str) -> list[str]:
        out = super().config_problems(config, where)
        approvers = config.get("approvers", ())
        if not (isinstance(approvers, list | tuple) and len(approvers) <= MAX_APPROVERS
                and all(isinstance(a, str) and 0 < len(a) <= MAX_WHO_CHARS
                        for a in approvers)):
            out.append(f"{where}: approval launcher approvers must be a list of at most "
                       f"{MAX_APPROVERS} names")
        return out

    def timeout_reason(self, spec: ActivityShape) -> str:
        return (f"no decision on the approval within its timeout_seconds "
                f"({spec.launcher.config.get('timeout_seconds')} s)")


#: The wait kinds, by launcher kind: part of the one table of kinds
#: (``contract.launching.LAUNCHER_KINDS``; ``launching.register`` adds to both).
WAIT_KINDS: dict[str, WaitKind] = {kind.name: kind for kind in (
    Timer(TIMER, settings=frozenset({"seconds", "until_input"})),
    Signal(SIGNAL, ("name",), settings=frozenset({"name", "timeout_seconds"})),
    Approval(APPROVAL, settings=frozenset({"approvers", "timeout_seconds"})),
)}


def wait_kind(spec: ActivityShape) -> WaitKind | None:
    """The wait kind of an activity; None when it is not a wait (a run kind)."""
    return WAIT_KINDS.get(spec.launcher.kind)


def _kind(spec: ActivityShape) -> WaitKind:
    kind = wait_kind(spec)
    if kind is None:
        raise InvalidInput(f"activity {spec.name!r} is not a wait (its launcher is "
                           f"{spec.launcher.kind!r}; waits: {', '.join(sorted(WAIT_KINDS))})",
                           field="launcher")
    return kind


def kind_waiting(waiting_for: str | None) -> WaitKind | None:
    """The kind of an attempt that says it waits for ``waiting_for`` (its part before
    ``:``); None for none or a kind this table does not know (a newer writer's)."""
    return WAIT_KINDS.get((waiting_for or "").split(":", 1)[0])


def signal_waited(waiting_for: str | None) -> str | None:
    """The signal an attempt that says it waits for ``waiting_for`` takes (a kind a
    signal ends); None otherwise."""
    kind = kind_waiting(waiting_for)
    if kind is None or kind.ends is not Ends.SIGNAL or ":" not in (waiting_for or ""):
        return None
    return str(waiting_for).split(":", 1)[1]


def offers_decision(waiting_for: str | None) -> bool:
    """Whether an attempt that says it waits for ``waiting_for`` is ended by a person's
    decision (the console's Approve/Reject): only kinds that say so, never a guess."""
    kind = kind_waiting(waiting_for)
    return kind is not None and kind.ends is Ends.DECISION


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


def timer_until(spec: ActivityShape, activity_input: Any) -> float:
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


def check_input(activities: Sequence[ActivityShape], workflow_input: Any) -> None:
    """Refuse a start whose input lacks a time a ``timer(until_input=...)`` needs.

    Raises:
        InvalidInput: naming the key and the activity.
    """
    for spec in activities:
        if spec.launcher.kind == TIMER and spec.launcher.config.get("until_input"):
            timer_until(spec, merge_input(workflow_input, spec.input))


def deadline(spec: ActivityShape, ready_at: float, activity_input: Any) -> float | None:
    """When a wait that became READY at ``ready_at`` falls due: a timer fires, a signal or
    approval times out (None: it waits for ever).

    Raises:
        InvalidInput: ``spec`` is not a wait.
    """
    return _kind(spec).deadline(spec, ready_at, activity_input)


def iso(epoch: float) -> str:
    """``2026-11-23T09:00:00Z``: how a wait names a time."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def waiting_for(spec: ActivityShape, due: float | None) -> str:
    """What a READY wait waits for: ``timer:<time>``, ``signal:<name>``, ``approval``…"""
    return _kind(spec).waiting_for(spec, due)


def timeout_reason(spec: ActivityShape) -> str:
    """Why a wait TIMED_OUT."""
    return _kind(spec).timeout_reason(spec)


def signal_name(spec: ActivityShape) -> str | None:
    """The signal an activity waits for; None when it does not end by a signal."""
    kind = wait_kind(spec)
    return kind.signal_name(spec) if kind is not None else None


def decided(spec: ActivityShape) -> bool:
    """Whether the activity is a wait a person's decision ends (approve/reject)."""
    kind = wait_kind(spec)
    return kind is not None and kind.ends is Ends.DECISION


# -- approvals -----------------------------------------------------------------------------

def approvers(spec: ActivityShape) -> tuple[str, ...]:
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


def rejected(spec: ActivityShape, item: ActivityRecord) -> bool:
    """A rejected approval: a decision, not a fault, so its retry policy does not apply."""
    return decided(spec) and item.error_type == REJECTED


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
        how = WAIT_KINDS[kind].ends_by
        super().__init__(
            f"{transition} refused for {activity_exec_id}: it is a {kind} wait, which "
            f"ends only by {how}; CANCEL is the only move others may ask of it",
            activity_exec_id=activity_exec_id, kind=kind, transition=transition)
        self.activity_exec_id = activity_exec_id


class SignalRefused(NotAllowedNow):
    """A signal nothing can receive: its run has ended (or is ending), or every activity
    waiting for that name has already received one. Nothing was stored."""
