"""Batch operations: one action on every run a filter selects (``Whimbrel.batch``,
``whimbrel runs cancel|redrive|signal|suspend|resume``).

The runs come from :func:`whimbrel.client.query.list_workflows` page by page (the same
filters, newest first, Query only); each is acted on with the one-run call (cancel,
redrive, signal, suspend, resume) at most ``per_second`` a second.

**Resumable, never twice.** A batch has an id, derived from its action and filters (the
time window to the hour, or without one the UTC day, so the same command run again soon
is the same batch) unless given. Every move it makes names ``batch:<id>`` as its actor in the run's
history, and a signal it sends has the id ``batch:<id>``: running the batch again after
an interruption skips the runs it already acted on (their history says so; a signal
sent twice counts once) and acts on what is left.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from whimbrel.client import query
from whimbrel.client.query_input import parse_filters
from whimbrel.contract.errors import InvalidInput, NotAllowedNow, StateConflict
from whimbrel.contract.states import (
    WORKFLOW_PAUSABLE,
    WORKFLOW_REDRIVABLE,
    WORKFLOW_TERMINAL,
    WorkflowState,
)
from whimbrel.contract.waits import SignalRefused
from whimbrel.engine import Engine, Redrive, Suspend, Waits, WorkflowExec
from whimbrel.store.store import Store

W = WorkflowState

#: The actions a batch can take.
ACTIONS = ("cancel", "redrive", "signal", "suspend", "resume")
#: Runs read per listing page while a batch goes.
BATCH_PAGE = 100
#: The fastest rate a batch may be asked for (actions a second).
MAX_PER_SECOND = 1000.0


@dataclass
class BatchReport:
    """What one batch did (or, ``dry_run``, would do). Lists hold execution ids.

    Attributes:
        action: ``cancel``, ``redrive``, ``signal``, ``suspend`` or ``resume``.
        batch_id: the batch's id: every move it made names ``batch:<id>``; run the batch
            again with the same id to finish it after an interruption.
        dry_run: nothing was changed; ``would`` lists what would have been acted on.
        matched: runs the filters selected.
        done: runs acted on now.
        would: (dry run) runs that would have been acted on.
        skipped: runs left alone, with why (already ended, already done by this batch…).
        refused: runs the action was refused for, with the error.
    """

    action: str
    batch_id: str
    dry_run: bool = False
    matched: int = 0
    done: list[str] = field(default_factory=list)
    would: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"action": self.action, "batch_id": self.batch_id, "dry_run": self.dry_run,
                "matched": self.matched, "done": self.done, "would": self.would,
                "skipped": self.skipped, "refused": self.refused}


@dataclass(frozen=True)
class Plan:
    """A checked batch: its action, filters and id."""

    action: str
    filters: dict[str, Any]
    batch_id: str
    signal: str | None
    payload: Any
    per_second: float | None

    @property
    def actor(self) -> str:
        return f"batch:{self.batch_id}"


def plan(action: str, *, name: str | None, state: query.StateArg, since: query.TimeArg,
         until: query.TimeArg, attributes: Mapping[str, Any] | None, per_second: float | None,
         signal: str | None, payload: Any, batch_id: str | None, all_runs: bool,
         now: float) -> Plan:
    """Check a batch's arguments (nothing is read or written).

    Raises:
        InvalidInput: an unknown action, a bad filter or rate, a signal batch without a
            signal name, or no filter at all without ``all_runs``.
    """
    if action not in ACTIONS:
        raise InvalidInput(f"action must be one of {', '.join(ACTIONS)}, not {action!r}",
                           field="action")
    filters = {"name": name, "state": state, "since": since, "until": until}
    if attributes:
        filters["attributes"] = dict(attributes)
    # Raises on a bad filter.
    f = parse_filters(name, state, since, until, now=now, attributes=attributes)
    if not (name or f.states or since is not None or until is not None or attributes) \
            and not all_runs:
        raise InvalidInput("a batch with no filter would act on every run: give a name, "
                           "state, time or attribute filter (or all_runs=True, `--yes`)",
                           field="filters")
    if per_second is not None and (isinstance(per_second, bool)
                                   or not isinstance(per_second, int | float)
                                   or not math.isfinite(per_second)
                                   or not 0 < per_second <= MAX_PER_SECOND):
        raise InvalidInput(f"per_second must be a number above 0 and at most "
                           f"{MAX_PER_SECOND:g}, not {per_second!r}", field="per_second")
    if action == "signal":
        if not isinstance(signal, str) or not signal:
            raise InvalidInput("a signal batch needs the signal's name (signal=...)",
                               field="signal")
    elif signal is not None or payload is not None:
        raise InvalidInput(f"signal and payload are for a signal batch, not {action!r}",
                           field="signal")
    if batch_id is None:
        # The window to the hour; without one, today (UTC): the same command again soon
        # is the same batch, the same one next week a new one.
        hour = [None if t is None else math.floor(t / 3600) for t in (f.since, f.until)] \
            if f.since is not None or f.until is not None else ["day", math.floor(now / 86400)]
        basis = json.dumps([action, name, sorted(s.value for s in f.states),
                            list(f.attributes), hour, signal, payload],
                           sort_keys=True, default=str)
        batch_id = hashlib.sha256(basis.encode()).hexdigest()[:16]
    elif not isinstance(batch_id, str) or not 0 < len(batch_id) <= 64 \
            or not batch_id.replace("-", "").replace("_", "").isalnum():
        raise InvalidInput(f"batch_id must be 1-64 letters, digits, '-' or '_', not "
                           f"{batch_id!r}", field="batch_id")
    return Plan(action, filters, batch_id, signal, payload, per_second)


def runs(store: Store, clock: Callable[[], float], p: Plan) -> Iterator[WorkflowExec]:
    """The runs the batch's filters select, newest first, page by page."""
    cursor: str | None = None
    while True:
        page = query.list_workflows(store, clock, **p.filters, limit=BATCH_PAGE,
                                    cursor=cursor)
        yield from page.items
        if page.cursor is None:
            return
        cursor = page.cursor


def why_skip(p: Plan, wf: WorkflowExec) -> str | None:
    """Why the batch leaves ``wf`` alone (None: it acts on it)."""
    if any(h.by == p.actor for h in wf.history):
        return "already done by this batch"
    state = wf.state
    if p.action == "cancel" and (state in WORKFLOW_TERMINAL or state is W.CANCEL_REQUESTED):
        return f"already {state.value}"
    if p.action == "redrive" and state not in WORKFLOW_REDRIVABLE:
        return f"{state.value}: only a FAILED, CANCELLED or TIMED_OUT run is redriven"
    if p.action == "signal" and state in WORKFLOW_TERMINAL:
        return f"already {state.value}"
    if p.action == "suspend" and state is not W.RUNNING:
        return f"{state.value}: only a RUNNING run is suspended"
    if p.action == "resume" and (state not in WORKFLOW_PAUSABLE or state is W.RUNNING):
        return f"{state.value}: only a SUSPENDED run is resumed"
    return None


def act(engine: Engine, p: Plan, wx: str) -> None:
    """The batch's action on one run, its moves named ``batch:<id>``."""
    if p.action == "cancel":
        engine.ending.cancel(wx, actor=p.actor)
    elif p.action == "redrive":
        engine.feature(Redrive).redrive(wx, actor=p.actor)
    elif p.action == "signal":
        assert p.signal is not None
        engine.feature(Waits).send(wx, p.signal, p.payload, signal_id=p.actor)
    elif p.action == "suspend":
        engine.feature(Suspend).suspend(wx, actor=p.actor)
    else:
        engine.feature(Suspend).resume(wx, actor=p.actor)


#: What a run's action may be refused with (a state the run moved to meanwhile, a signal
#: its run does not wait for): recorded, and the batch goes on.
REFUSALS = (NotAllowedNow, StateConflict, SignalRefused, InvalidInput)


def run_batch(engine: Engine, store: Store, clock: Callable[[], float], p: Plan, *,
              dry_run: bool = False,
              progress: Callable[[str, str], None] | None = None,
              sleep: Callable[[float], None] = time.sleep,
              monotonic: Callable[[], float] = time.monotonic) -> BatchReport:
    """Act on every selected run, paced to ``p.per_second``; ``progress(wx, outcome)``
    is told of each (``done``, ``would``, ``skipped``, ``refused``)."""
    report = BatchReport(p.action, p.batch_id, dry_run=dry_run)
    started = monotonic()
    acted = 0
    for wf in runs(store, clock, p):
        report.matched += 1
        wx = wf.workflow_exec_id
        why = why_skip(p, wf)
        if why is not None:
            report.skipped[wx] = why
            outcome = "skipped"
        elif dry_run:
            report.would.append(wx)
            outcome = "would"
        else:
            if p.per_second:  # the n-th action no sooner than n / per_second in
                wait = started + acted / p.per_second - monotonic()
                if wait > 0:
                    sleep(wait)
            acted += 1
            try:
                act(engine, p, wx)
                report.done.append(wx)
                outcome = "done"
            except REFUSALS as exc:
                report.refused[wx] = str(exc)
                outcome = "refused"
        if progress is not None:
            progress(wx, outcome)
    return report


class Batches:
    """Batch operations (mixed into :class:`whimbrel.Whimbrel`)."""

    engine: Engine
    store: Store
    clock: Callable[[], float]

    def batch(self, action: str, *, name: str | None = None, state: query.StateArg = None,
              since: query.TimeArg = None, until: query.TimeArg = None,
              attributes: Mapping[str, Any] | None = None, per_second: float | None = None,
              dry_run: bool = False, signal: str | None = None, payload: Any = None,
              batch_id: str | None = None, all_runs: bool = False,
              progress: Callable[[str, str], None] | None = None) -> BatchReport:
        """Take one action on every run the filters select (those of
        :meth:`list_workflows`), newest first.

        Each run is acted on with the one-run call — ``cancel`` (``cancel_workflow``),
        ``redrive`` (``redrive_workflow``), ``signal`` (``signal``, with ``signal`` and
        ``payload``), ``suspend``, ``resume`` — or skipped when its state does not allow
        it, or when this batch acted on it before; a run whose action is refused (it
        moved on meanwhile, a signal it does not wait for) is recorded and the batch goes
        on. Resumable: every move names ``batch:<batch_id>`` in the run's history (a
        signal has that id), so running the same batch again after an interruption acts
        on what is left and never twice on one run. ``batch_id`` defaults to one derived
        from the action and the filters (times to the hour; without a time filter, the
        UTC day).

        Args:
            action: ``cancel``, ``redrive``, ``signal``, ``suspend`` or ``resume``.
            name, state, since, until, attributes: the filters of :meth:`list_workflows`.
            per_second: at most this many actions a second (None: as fast as it goes).
            dry_run: change nothing; the report's ``would`` lists what would be acted on.
            signal, payload: a signal batch's signal name and payload.
            batch_id: the batch's id (1-64 letters, digits, ``-``, ``_``).
            all_runs: act even with no filter (every run of the default lookback).
            progress: told ``(workflow_exec_id, outcome)`` of each run as it goes.

        Raises:
            InvalidInput: an unknown action, a bad filter, rate or id, a signal batch
                without ``signal``, or no filter without ``all_runs`` (nothing changed).
        """
        p = plan(action, name=name, state=state, since=since, until=until,
                 attributes=attributes, per_second=per_second, signal=signal,
                 payload=payload, batch_id=batch_id, all_runs=all_runs, now=self.clock())
        return run_batch(self.engine, self.store, self.clock, p, dry_run=dry_run,
                         progress=progress)
