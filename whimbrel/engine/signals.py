"""Signals: named events sent to a run and received by the activities that wait for them
(``LauncherSpec.signal``; the ``signal`` kind of the waits feature, engine/waits.py;
docs/architecture.md, "Signals").

A signal that finds the only wait of its name READY completes it in **one** conditional
write (``READY → RUNNING → COMPLETED``, the payload as output, ``signal:<signal_id>`` as
the actor of the move in its history). Otherwise it is *kept* in the ``signal`` table
(one ``attribute_not_exists`` put: a ``signal_id`` names one signal of the run) and given
to a wait when one of its name is READY: the wait's READY move looks for kept signals,
and so does the sender after keeping one (each writes first and reads after, so at
least one sees the other). Giving is two conditional writes: the signal is bound to the
attempt (``consumed_by``: exactly one wait gets it), then the wait completes; a wait that
was gone by then frees it again, and a binding to an attempt that ended otherwise (a
hand-over that died half-way) is taken over.

A ``signal_id`` names one signal, always. Every send first creates the signal's item,
keyed by (run, ``signal_id``), with ``attribute_not_exists``: of concurrent senders of one
id exactly one creates it, and every later send (while it is kept, after it was
delivered, after the run ended) compares its name and payload with the item's. The same
signal again changes nothing; another payload under the same id raises
``SignalRefused``. The creator then delivers it: to the one READY wait of its name in
one more write (the item is created already bound to that wait, so a crash between is
a half-done hand-over the reconciler finishes), otherwise by offering it as a kept
signal. A kept signal no wait received by the end of its run is reported: a rejection
record (source ``signal``) names its id (:func:`report_undelivered`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from whimbrel.contract import checks, waits
from whimbrel.contract.code.definition import CodeDefinition
from whimbrel.contract.errors import InvalidInput, StateConflict
from whimbrel.contract.ids import new_request_id
from whimbrel.contract.limits import NAME_PATTERN
from whimbrel.contract.payloads import is_ref
from whimbrel.contract.records import (
    ActivityRecord,
    RejectionRecord,
    SignalRecord,
    WorkflowRecord,
    day_of,
    latest_of,
)
from whimbrel.contract.states import ACTIVITY_FAILED, WORKFLOW_PROCEEDING, ActivityState, Transition
from whimbrel.engine import rules
from whimbrel.engine.signal_port import SignalPort
from whimbrel.settings import DAY_SECONDS

if TYPE_CHECKING:
    from whimbrel.contract.definitions import WorkflowDefinition
    from whimbrel.engine.feature import Core

A = ActivityState
_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class SignalOutcome:
    """What a sent signal did."""

    signal_id: str
    #: The attempt that received it; None while it is kept for a wait to come.
    received_by: str | None
    #: It had been sent (and received or kept) before under the same ``signal_id``.
    duplicate: bool = False


def tag(signal_id: str) -> str:
    """The actor of the move that gives a wait its signal (in the wait's history)."""
    return f"signal:{signal_id}"


def waiting_on(defn: WorkflowDefinition, name: str) -> list[str]:
    """The activities that wait for signal ``name``, in the order that receives first."""
    return [n for n in defn.topological_order()
            if waits.signal_name(defn.activity(n)) == name]


# -- sending -------------------------------------------------------------------------------

def send(engine: Core, workflow_exec_id: str, name: Any, payload: Any = None, *,
         signal_id: Any = None) -> SignalOutcome:
    """Deliver signal ``name`` to a run (or keep it for the wait to come).

    Raises:
        InvalidInput: a malformed argument, a payload that is not JSON or too large, a
            name no activity of the run waits for.
        WorkflowNotFound: no such run.
        SignalRefused: the run has ended (or is ending), every wait of that name has
            received a signal or ended, or the ``signal_id`` names another signal (sent
            before, or at the same moment, with another name or payload).
    """
    checks.text(workflow_exec_id, "workflow_exec_id")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInput(f"signal name must match {NAME_PATTERN}, not {name!r}"[:300],
                           field="name")
    signal_id = new_request_id() if signal_id is None else checks.text(
        signal_id, "signal_id", max_chars=waits.MAX_SIGNAL_ID_CHARS)
    text = engine.reads.limits.encode(payload, "payload")
    wf = engine.reads.workflow(workflow_exec_id)
    defn = engine.definitions.definition_of(wf)
    code = isinstance(defn, CodeDefinition)  # takes any name, at any time: kept
    names = [] if code else waiting_on(defn, name)
    if not names and not code:
        known = sorted({str(waits.signal_name(a)) for a in defn.activities
                        if waits.signal_name(a) is not None})
        raise InvalidInput(
            f"no activity of workflow {wf.workflow_name!r} waits for signal {name!r}"
            + (f" (it waits for: {', '.join(known)})" if known else
               " (it waits for no signal)"), field="name")
    kept = engine.store.part(SignalPort).get_signal(workflow_exec_id, signal_id)
    if kept is not None:  # sent before: the same signal, or refused
        _same(engine, kept, name, text)
        return _offer(engine, defn, kept, engine.store.list_activities(workflow_exec_id),
                      duplicate=True)
    acts = engine.store.list_activities(workflow_exec_id)
    holder = _received_by(acts, signal_id)
    if holder is not None:  # received, and its item expired since (a very long run)
        return SignalOutcome(signal_id, holder, duplicate=True)
    if wf.state not in WORKFLOW_PROCEEDING:
        raise waits.SignalRefused(
            f"workflow {workflow_exec_id} is {wf.state.value}: it receives no more signals",
            workflow_exec_id=workflow_exec_id, workflow_state=wf.state.value, name=name)
    latest = latest_of(acts)
    names = _waits_for(defn, acts, name) if code else names
    if not code and not _may_still_receive(defn, latest, names):
        raise waits.SignalRefused(
            f"every activity of {workflow_exec_id} that waits for signal {name!r} "
            f"({', '.join(names)}) has received one or ended: nothing would receive it",
            workflow_exec_id=workflow_exec_id, name=name)
    wait = latest.get(names[0]) if len(names) == 1 else None
    bound = wait if wait is not None and wait.state is A.READY else None
    now = engine.clock()
    record = SignalRecord(workflow_exec_id, signal_id, name, now, text,
                          consumed_by=bound.activity_exec_id if bound else None,
                          expires_epoch=_expiry(engine, defn, now))
    if not engine.store.part(SignalPort).put_signal(record):
        # Sent at the same moment by another sender: its item decides.
        found = engine.store.part(SignalPort).get_signal(workflow_exec_id, signal_id)
        if found is None:  # expired between the two writes: nothing to compare with
            raise waits.SignalRefused(
                f"signal_id {signal_id!r} is being sent to {workflow_exec_id} by another "
                "sender; send it again", workflow_exec_id=workflow_exec_id, name=name)
        _same(engine, found, name, text)
        return _offer(engine, defn, found, engine.store.list_activities(workflow_exec_id),
                      duplicate=True)
    if bound is not None:
        # The one wait of this name, READY: the item was created bound to it, so this
        # one write completes it (the wait's own condition arbitrates a cancel or a
        # timeout); a crash before it is a hand-over the reconciler finishes (_give).
        try:
            engine.moves.end_wait(bound, defn, Transition.COMPLETED, output=text,
                     actor=tag(signal_id))
            return SignalOutcome(signal_id, bound.activity_exec_id)
        except StateConflict as lost:
            if lost.current is not None and _has_tag(lost.current, signal_id):
                return SignalOutcome(signal_id, bound.activity_exec_id)
            engine.store.part(SignalPort).release_signal(workflow_exec_id, signal_id,
                                                bound.activity_exec_id)
            record = SignalRecord(workflow_exec_id, signal_id, name, now, text,
                                  expires_epoch=record.expires_epoch)
    # Kept first, then the activities read again: a wait that became READY meanwhile
    # either sees this signal in its own READY follow-up or is seen here.
    return _offer(engine, defn, record,
                  engine.store.list_activities(workflow_exec_id))


def _same(engine: Core, kept: SignalRecord, name: str, payload: str | None) -> None:
    """A send of a ``signal_id`` that exists: it must be the same signal (a payload kept
    in S3 is read to compare: only for a repeated send).

    Raises:
        SignalRefused: another name or payload.
    """
    if kept.signal_name != name or (kept.payload != payload and (
            not is_ref(kept.payload) or engine.reads.payload(kept.payload) != payload)):
        raise waits.SignalRefused(
            f"signal_id {kept.signal_id!r} was sent to this run before as signal "
            f"{kept.signal_name!r} with another payload or name; a signal_id names one "
            "signal", workflow_exec_id=kept.workflow_exec_id, name=name,
            signal_id=kept.signal_id)


def _offer(engine: Core, defn: WorkflowDefinition, signal: SignalRecord,
           acts: list[ActivityRecord], *, duplicate: bool = False) -> SignalOutcome:
    """Give a kept signal to the first READY wait of its name that takes it."""
    holder = _received_by(acts, signal.signal_id)
    if holder is not None:
        return SignalOutcome(signal.signal_id, holder, duplicate=True)
    latest = latest_of(acts)
    for name in _waits_for(defn, acts, signal.signal_name):
        wait = latest.get(name)
        if wait is not None and wait.state is A.READY \
                and _give(engine, defn, signal, wait, acts):
            return SignalOutcome(signal.signal_id, wait.activity_exec_id, duplicate)
    return SignalOutcome(signal.signal_id, None, duplicate)


# -- receiving kept signals ----------------------------------------------------------------

def after_ready(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                item: ActivityRecord) -> bool:
    """A signal wait just became READY (or the reconciler found it READY): give it the
    oldest signal kept for its name, if any. True if it received one."""
    spec = defn.activity(item.activity_name)
    name = waits.signal_name(spec)
    if name is None or item.state is not A.READY:
        return False
    aeid = item.activity_exec_id
    kept = [s for s in engine.store.part(SignalPort).list_signals(wf.workflow_exec_id)
            if s.signal_name == name]
    # One already given to this attempt first (a hand-over that died half-way), then the
    # free ones oldest first, then those given to attempts that may have ended.
    kept.sort(key=lambda s: (s.consumed_by != aeid, s.consumed_by is not None,
                             s.sent_epoch, s.signal_id))
    acts: list[ActivityRecord] | None = None
    for signal in kept:
        if signal.consumed_by not in (None, aeid) and acts is None:
            acts = engine.store.list_activities(wf.workflow_exec_id)
        if _give(engine, defn, signal, item, acts or []):
            return True
    return False


def _give(engine: Core, defn: WorkflowDefinition, signal: SignalRecord,
          wait: ActivityRecord, acts: Sequence[ActivityRecord]) -> bool:
    """Bind ``signal`` to ``wait``, then complete the wait with it. True if the wait has
    it now."""
    aeid, sid, wx = wait.activity_exec_id, signal.signal_id, wait.workflow_exec_id
    taking: str | None = None
    if signal.consumed_by not in (None, aeid):
        holder = next((a for a in acts if a.activity_exec_id == signal.consumed_by), None) \
            or engine.store.get_activity(str(signal.consumed_by))
        if holder is not None and (holder.state is None or not holder.state.is_terminal
                                   or _has_tag(holder, sid)):
            return False  # a live attempt's (its hand-over is repaired), or received
        taking = signal.consumed_by
    now = engine.clock()
    if not engine.store.part(SignalPort).bind_signal(wx, sid, aeid, taking_from=taking,
                                            expires_epoch=_expiry(engine, defn, now)):
        return False  # another wait got it first
    try:
        engine.moves.end_wait(wait, defn, Transition.COMPLETED, output=signal.payload,
                 actor=tag(sid))
    except StateConflict as lost:
        if lost.current is not None and _has_tag(lost.current, sid):
            return True  # a replay of this very hand-over completed it
        # cancelled or timed out: free it
        engine.store.part(SignalPort).release_signal(wx, sid, aeid)
        return False
    return True


# -- repairs (the reconciler) --------------------------------------------------------------

def repair(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
           acts: list[ActivityRecord], now: float) -> bool:
    """A RUNNING run's reconcile visit: give kept signals to READY waits (a hand-over
    that died half-way, a send racing a READY move), and keep a long run's kept signals
    from expiring. Costs nothing for a run that waits for no signal."""
    if not any(waits.signal_name(a) is not None for a in defn.activities):
        return False
    changed = False
    for item in latest_of(acts).values():
        if item.state is A.READY:
            changed |= after_ready(engine, wf, defn, item)
    retention = engine.definitions.retention(defn)
    if retention is not None:
        guard = min(DAY_SECONDS, retention / 2)
        for signal in engine.store.part(SignalPort).list_signals(wf.workflow_exec_id):
            if signal.expires_epoch is not None and signal.expires_epoch < now + guard:
                engine.store.part(SignalPort).expire_signal(wf.workflow_exec_id, signal.signal_id,
                                                   _expiry(engine, defn, now) or now)
    return changed


# -- at the run's end ----------------------------------------------------------------------

#: ``source`` of the rejection record that reports a kept signal no wait received.
SOURCE_SIGNAL = "signal"
#: How long such a record is kept (as the intake's rejections).
_REPORT_TTL_SECONDS = 30 * DAY_SECONDS


def undelivered(engine: Core, wf: WorkflowRecord) -> list[SignalRecord]:
    """The run's kept signals no wait received (free, or bound to an attempt that ended
    without it). One Query, plus a read per bound signal; nothing for a run that waits
    for no signal."""
    defn = engine.definitions.definition_of(wf)
    if not any(waits.signal_name(a) is not None for a in defn.activities):
        return []
    left = []
    for signal in engine.store.part(SignalPort).list_signals(wf.workflow_exec_id):
        if signal.consumed_by is not None:
            holder = engine.store.get_activity(signal.consumed_by)
            if holder is not None and _has_tag(holder, signal.signal_id):
                continue
        left.append(signal)
    return left


def report_undelivered(engine: Core, wf: WorkflowRecord) -> int:
    """Report each kept signal of an ended run that no wait received: a rejection record
    naming its id, where an operator lists rejected rows. Idempotent: the record's id is
    derived from the run's end and the signal id, so a replay rewrites the same row."""
    left = undelivered(engine, wf)
    now = engine.clock()
    ended = float(wf.ended_epoch or now)
    for signal in left:
        sid = signal.signal_id
        reason = (f"signal {signal.signal_name!r} (signal_id {sid!r}) was kept for run "
                  f"{wf.workflow_exec_id}, but no wait received it before the run ended "
                  f"{wf.state.value}: it was not delivered")
        engine.store.cold.put_rejection(RejectionRecord(
            rejection_day=day_of(ended),
            rejection_id=f"{int(ended * 1000):013d}-{SOURCE_SIGNAL}-"
                         f"{wf.workflow_exec_id}-{sid}",
            source=SOURCE_SIGNAL, reason=reason, error_type="SignalUndelivered",
            record=json.dumps({"workflow_exec_id": wf.workflow_exec_id, "signal_id": sid,
                               "signal": signal.signal_name, "payload": signal.payload,
                               "sent_epoch": signal.sent_epoch}, default=str),
            when_epoch=now, expires_epoch=float(int(now + _REPORT_TTL_SECONDS))))
    return len(left)


# -- helpers -------------------------------------------------------------------------------

def _waits_for(defn: WorkflowDefinition, acts: Sequence[ActivityRecord],
               name: str) -> list[str]:
    """The waits for signal ``name``: a DAG's by its definition; a code run's are the
    steps READY for it now (its code asks for them as it goes), oldest first."""
    if not isinstance(defn, CodeDefinition):
        return waiting_on(defn, name)
    ready = [a for a in latest_of(list(acts)).values()
             if a.state is A.READY and waits.signal_waited(a.waiting_for) == name]
    return [a.activity_name for a in sorted(ready, key=lambda a: a.created_epoch)]


def _has_tag(item: ActivityRecord, signal_id: str) -> bool:
    return any(h.by == tag(signal_id) for h in item.history)


def _received_by(acts: Sequence[ActivityRecord], signal_id: str) -> str | None:
    return next((a.activity_exec_id for a in acts if _has_tag(a, signal_id)), None)


def _may_still_receive(defn: WorkflowDefinition, latest: dict[str, ActivityRecord],
                       names: Sequence[str]) -> bool:
    """Whether a wait of one of ``names`` is, or may still become, READY."""
    for name in names:
        act = latest.get(name)
        if act is None or act.state is None or not act.state.is_terminal:
            return True
        if act.state in ACTIVITY_FAILED \
                and rules.retry_follows(defn.activity(name), act):
            return True  # its retry is (or will be) created
    return False


def _expiry(engine: Core, defn: WorkflowDefinition, now: float) -> float | None:
    return rules.expiry(now + rules.RETENTION_SLACK_SECONDS, engine.definitions.retention(defn))
