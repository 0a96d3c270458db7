"""One decision of a code run: read what happened, replay the function, write what comes
next (DESIGN.md §5, "Code workflows on the same contract").

Every write is one the contract already makes: a step's first attempt is created with
``attribute_not_exists`` (its id is ``<wx>:<name>#<k>:1``, the same on every replay) and
moved on with ``state = :from``; the run ends with its usual conditional move. So a
decision run twice, redelivered, or cut short between any two writes schedules nothing
twice, and the next one (the step's end, the reconcile visit) finishes what it left.

The history is kept in memory between decisions (``Histories``): a terminal row never
changes, so a kept final step is the truth; a step kept as not final is read again
before the code is told to wait for it (one GetItem), and the step that just ended
comes with its follow-up. A long sequential run thus reads O(1) items per step; a cold
decision reads the run's partition in pages. The function itself is kept running,
parked where it waits (engine/code_live.py), so a decision runs only the code past the
last wait: O(1) CPU per step, not a replay from the start.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from whimbrel.contract.code import (
    CodeDefinition,
    Decision,
    Dispatch,
    History,
    NewStep,
    RunFacts,
    StepState,
    encode_step,
    is_cleanup_step,
    replay,
    step_patches,
)
from whimbrel.contract.errors import StateConflict
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.outcomes import generation
from whimbrel.contract.payloads import decode_payload
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ACTIVITY_FAILED, ActivityState, WorkflowState
from whimbrel.engine import code_cancel, rules
from whimbrel.engine.code_live import LiveRun
from whimbrel.engine.feature import Core
from whimbrel.engine.ports import serve_here

log = logging.getLogger("whimbrel.engine.code")

A = ActivityState
W = WorkflowState

#: How many runs' histories an engine keeps between decisions.
KNOWN_RUNS = 1024
#: How many runs' functions it keeps running (a parked thread each).
LIVE_RUNS = 128
#: Replays of one decision at most (each after a read showed something new).
MAX_ROUNDS = 50
#: Lock stripes: decisions of one run in one process take turns.
LOCKS = 64

CodeFn = Callable[[Any, Any], Any]


class Histories:
    """The runs' histories this process keeps, most recently used last."""

    def __init__(self, size: int = KNOWN_RUNS, live_size: int = LIVE_RUNS) -> None:
        self.size = size
        self.live_size = live_size
        self._runs: OrderedDict[str, History] = OrderedDict()
        self._live: OrderedDict[str, LiveRun] = OrderedDict()
        self._lock = threading.Lock()
        # Re-entrant: a decision's write may end a step at once (a wait given a kept
        # signal), whose follow-up decides again in the same thread.
        self.locks = [threading.RLock() for _ in range(LOCKS)]

    def lock(self, wx: str) -> threading.RLock:
        return self.locks[hash(wx) % LOCKS]

    def get(self, wx: str) -> History | None:
        with self._lock:
            history = self._runs.get(wx)
            if history is not None:
                self._runs.move_to_end(wx)
            return history

    def keep(self, wx: str, history: History) -> None:
        with self._lock:
            self._runs[wx] = history
            self._runs.move_to_end(wx)
            while len(self._runs) > self.size:
                self._give_up(self._runs.popitem(last=False)[0])

    def forget(self, wx: str) -> None:
        with self._lock:
            self._runs.pop(wx, None)
            self._give_up(wx)

    def live(self, wx: str, fn: CodeFn, facts: RunFacts, history: History,
             redrives: int) -> LiveRun:
        """The run's live function over ``history``: the one kept, or a new one (which
        replays from the start) when none is kept for this very history."""
        with self._lock:
            kept = self._live.get(wx)
            if kept is not None and not kept.gone and kept.history is history \
                    and kept.redrives == redrives:
                self._live.move_to_end(wx)
                return kept
            self._give_up(wx)
            kept = self._live[wx] = LiveRun(fn, facts, history, redrives)
            while len(self._live) > self.live_size:
                self._give_up(next(iter(self._live)))
            return kept

    def give_up_live(self) -> None:
        """Stop every function kept running (new code: the next decisions replay)."""
        with self._lock:
            for wx in list(self._live):
                self._give_up(wx)

    def _give_up(self, wx: str) -> None:
        live = self._live.pop(wx, None)
        if live is not None:
            live.give_up()


def step_state(core: Core, row: ActivityRecord, redrives: int) -> StepState | None:
    """What the code sees of a step from its latest attempt (None: not a step's row);
    ``redrives``: the run's redrive count."""
    known = core.steps.learn_row(row)
    if known is None:
        return None
    seq, spec = known
    state = row.state
    cleanup = is_cleanup_step(row.step)  # one attempt: no retry follows it
    final = state is not None and state.is_terminal and not (
        state in ACTIVITY_FAILED and not cleanup and rules.retry_follows(spec, row))
    rerun = final and state is not A.COMPLETED and generation(row) < redrives
    # The code reads a completed step's output whole (kept in S3 past the threshold).
    output = core.reads.payload(row.output, "output") if state is A.COMPLETED else row.output
    if state is A.COMPLETED and output is None and row.map_size:
        # A ctx.map whose outputs did not fit its row (no payload bucket): from its items.
        output = json.dumps(core.inputs.assembled(row.workflow_exec_id, row))
    return StepState(row.activity_name, seq, row.attempt, state, final and not rerun,
                     row.activity_exec_id, output, row.error, row.error_type,
                     row.ended_epoch, rerun, step_patches(row.step or ""),
                     row.not_before_epoch, cleanup)


def load(core: Core, wx: str, redrives: int) -> History:
    """A run's history from its partition (one consistent Query, paged; a ctx.map's
    items, in ``map_item``, are not read: its step holds the outputs)."""
    history = History()
    for row in core.store.list_activities(wx, items=False):
        if row.step is not None:
            state = step_state(core, row, redrives)
            if state is not None:
                history.put(state)
    return history


def refresh(core: Core, wx: str, known: StepState, redrives: int) -> StepState:
    """A step kept as not final, read again: its attempt, then the retries after it."""
    attempt = known.attempt
    latest = known
    while True:
        row = core.store.get_activity(activity_exec_id(wx, known.name, attempt))
        if row is None:
            return latest
        core.known.remember(row)
        state = step_state(core, row, redrives)
        if state is None:
            return latest
        latest = state
        if state.final or row.retry_created is None:
            return latest
        attempt += 1


def decide(core: Core, histories: Histories, fn: CodeFn, wf: WorkflowRecord,
           defn: CodeDefinition, trigger: ActivityRecord | None, *, cold: bool,
           live: bool = True) -> str:
    """Replay ``fn`` for run ``wf`` and write what it decided; returns the outcome.
    ``cold``: read the run's history anew; ``live``: go on with (or keep) the function
    running between decisions rather than replay it each time."""
    wx = wf.workflow_exec_id
    # A cancelled run's clean-up replays from its rows as they are now, never from a
    # kept history or function (they stop where the cancel cut them): code_cancel.py.
    cleaning = code_cancel.cleaning(wf)
    cold, live = cold or cleaning, live and not cleaning
    with histories.lock(wx):
        if cleaning:
            histories.forget(wx)
        history = None if cold else histories.get(wx)
        if history is None:
            history = load(core, wx, wf.redrives)
        elif trigger is not None:
            state = step_state(core, trigger, wf.redrives)
            if state is not None:
                history.put(state)
        facts = RunFacts(wx, wf.workflow_name,
                         decode_payload(core.reads.run_input(wf), field="input"),
                         wf.running_since if wf.code_epoch is None else wf.code_epoch,
                         core.store.payload_limits, seed=wf.code_seed, cancelled=cleaning)
        histories.keep(wx, history)

        def run_on() -> Decision:
            if live:
                decision = histories.live(wx, fn, facts, history, wf.redrives).advance()
                if decision is not None:
                    return decision
            return replay(fn, facts, history)  # a BaseException the code raised: here too

        for _ in range(MAX_ROUNDS):
            decision = _settled_replay(core, run_on, facts, history, wf.redrives)
            histories.keep(wx, history)
            if decision.outcome != "waiting":
                histories.forget(wx)
            try:
                if not _apply(core, wf, defn, history, decision):
                    break  # else a step it would schedule had been scheduled and ended
            except BaseException:
                # The live function went past steps this decision may not have
                # written: the next decision replays from the table.
                histories.forget(wx)
                raise
        return decision.outcome


def _settled_replay(core: Core, run_on: Callable[[], Decision], facts: RunFacts,
                    history: History, redrives: int) -> Decision:
    """Run the code on until what it waits for is known not to have finished."""
    decision = run_on()
    # A live function tells each round only what it decided since the last one: what
    # the earlier rounds asked for is written with the last (a replay repeats it).
    steps: dict[str, NewStep] = {}
    dispatches: dict[str, Dispatch] = {}
    for _ in range(MAX_ROUNDS):
        if decision.outcome != "waiting":
            break
        changed = False
        for name in decision.waiting_on:
            known = history.get(name)
            if known is None or known.final:
                continue
            fresh = refresh(core, facts.workflow_exec_id, known, redrives)
            if fresh != known:
                history.put(fresh)
                changed = changed or fresh.final
        if not changed:
            break
        steps.update((s.name, s) for s in decision.new_steps)
        dispatches.update((d.request_id, d) for d in decision.dispatches)
        decision = run_on()
    if dispatches:
        dispatches.update((d.request_id, d) for d in decision.dispatches)
        decision.dispatches = list(dispatches.values())
    if steps and decision.outcome == "waiting":
        steps.update((s.name, s) for s in decision.new_steps)
        decision.new_steps = list(steps.values())
    return decision


def _apply(core: Core, wf: WorkflowRecord, defn: CodeDefinition, history: History,
           decision: Decision) -> bool:
    """Write what ``decision`` decided; True when a step it scheduled turned out to
    exist and be final already (another process decided further): replay again."""
    wx = wf.workflow_exec_id
    props = _properties_text(decision)
    for run in decision.dispatches:  # idempotent: the request id names one run
        core.starting.start(run.workflow_name, json.loads(run.input or "null"),
                   request_id=run.request_id, source=f"dispatch:{wx}")
    if code_cancel.cleaning(wf) and decision.outcome != "waiting":
        code_cancel.end(core, wf, defn, history, decision,
                        {} if props is None else {"properties": props})
        return False
    if decision.outcome == "waiting":
        if props is not None and props != (wf.properties or "{}"):
            # Only a live run's state changes; an ended one keeps what it ended with.
            core.store.set_workflow(wx, {"properties": props}, states=[wf.state])
        waited = [s for s in (history.get(n) for n in decision.waiting_on) if s is not None]
        core.threads.each(lambda step: _rerun(core, wf, defn, history, step),
                  [s for s in waited if s.rerun])
        # A step created by a decision that died before moving it on (a retry waits
        # for its time: its timer moves it).
        now = core.clock()
        core.threads.each(lambda step: _advance(core, wf, defn, step.name, step.attempt),
                  [s for s in waited if s.state is A.REQUESTED
                   and (s.not_before is None or s.not_before <= now)])
        return any(core.threads.each(lambda step: _schedule(core, wf, defn, history, step),
                             decision.new_steps))
    extra = {} if props is None or props == (wf.properties or "{}") \
        else {"properties": props}
    if decision.outcome == "continued":
        # The new run first (its request id is this run's: a replay starts it once),
        # then this one ends naming it.
        extra["continued_as"] = core.starting.start(
            wf.workflow_name, json.loads(decision.output or "null"),
            request_id=f"{wx}:continued", source=f"continue_as_new:{wx}",
            priority=wf.priority)
    if decision.outcome in ("completed", "continued"):
        extra["output"] = decision.output or "null"
        core.ending.end_workflow(wf, defn, [W.RUNNING], W.COMPLETED, extra=extra)
        if any(not s.final for s in history.steps.values()):
            core.ending.settle(wx)  # steps started and never awaited are asked to stop
        return False
    if extra:
        core.store.set_workflow(wx, extra, states=[W.RUNNING])
    log.info("code run %s failed: %s", wx, decision.error)
    core.ending.fail_workflow(wf, decision.error or "the workflow's code failed")
    return False


def _properties_text(decision: Decision) -> str | None:
    if not decision.properties:
        return None
    return json.dumps(decision.properties, sort_keys=True, separators=(",", ":"))


def _schedule(core: Core, wf: WorkflowRecord, defn: CodeDefinition, history: History,
              step: NewStep) -> bool:
    """Create a step's first attempt (if no decision did) and move it on; True when it
    existed and has finished (the replay must go on past it)."""
    wx = wf.workflow_exec_id
    core.steps.learn(wx, step.name, step.seq, step.spec)
    # The decision runs here, so the step's code is here: run it here too.
    serve_here(core.launchers.get(step.spec.launcher.kind), step.spec.launcher.config)
    now = core.clock()
    record = core.flow.new_attempt(wf, defn, step.name, 1, now).with_changes(
        input=step.input, step=encode_step(step.seq, step.spec, step.patches, step.cleanup))
    if core.store.create_activity(record):
        history.put(StepState(step.name, step.seq, 1, A.REQUESTED, False,
                              record.activity_exec_id, cleanup=step.cleanup))
    else:  # another decision created it: it may be well on, or over
        fresh = refresh(core, wx, StepState(step.name, step.seq, 1, None, False,
                                            record.activity_exec_id), wf.redrives)
        history.put(fresh)
        if fresh.final:
            return True
    _advance(core, wf, defn, step.name, 1)
    return False


def _advance(core: Core, wf: WorkflowRecord, defn: CodeDefinition, name: str,
             attempt: int) -> None:
    try:
        core.flow.advance(code_cancel.moving(wf), defn, name, attempt)
    except StateConflict:
        pass  # moved on by another decision


def _rerun(core: Core, wf: WorkflowRecord, defn: CodeDefinition, history: History,
           step: StepState) -> None:
    """A step that failed before the run's redrive runs again: its next attempt, with a
    fresh retry budget (``retry_base``), created once and moved on."""
    previous = core.store.get_activity(step.activity_exec_id)
    if previous is None:
        return
    attempt = step.attempt + 1
    record = core.flow.new_attempt(wf, defn, step.name, attempt, core.clock(),
                              previous=previous).with_changes(retry_base=step.attempt)
    core.store.create_activity(record)
    history.put(StepState(step.name, step.seq, attempt, A.REQUESTED, False,
                          record.activity_exec_id))
    _advance(core, wf, defn, step.name, attempt)
