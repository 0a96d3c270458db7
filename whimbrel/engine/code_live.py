"""A code run's function kept running between its decisions, so that a long run does
not replay from its start at every step (issue 26: a replay per step is O(n) CPU, a run
of n sequential steps O(n²)).

The function runs in a thread of its own. Where it waits for a step that has not
finished, it *parks*: the decider gets what it decided so far (the steps to schedule,
the wait) and, once the history it shares with the function may hold the step, lets it
go on from there. A run's decisions take turns (the decider holds the run's lock), so
the history is never read and written at once.

This is only a cache of a replay: the function, the context and the history are those
a replay from the start would use, and a history only ever gains facts (a final step
never changes), so going on from the park decides what a replay would. Whenever the
live run is missing — another process, a cold decision, an eviction, a run idle for
``IDLE_SECONDS`` — the decider starts a new one, which replays from the start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from whimbrel.contract.code import Decision, History, RunFacts, WorkflowContext
from whimbrel.contract.code.context import _Suspend, decision_of, run_code

#: A live run parked this long with no decision gives up its thread (the next decision
#: replays from the start).
IDLE_SECONDS = 60.0

CodeFn = Callable[[Any, Any], Any]


class LiveRun:
    """One run's function, running in its own thread, parked where it waits.

    Attributes:
        history: the history it replays over (the decider's own copy; it only grows).
        redrives: the run's redrive count when it began (a redrive replays anew).
    """

    def __init__(self, fn: CodeFn, facts: RunFacts, history: History, redrives: int,
                 idle_seconds: float = IDLE_SECONDS) -> None:
        self.history = history
        self.redrives = redrives
        self._fn = fn
        self._ctx = WorkflowContext(facts, history)
        self._ctx._park = self._park  # the live run's own hook
        self._idle = idle_seconds
        self._cond = threading.Condition()
        self._code_turn = False  # the function runs (the decider waits), or not
        self._gone = False  # ended, given up, or its thread died: no more decisions
        self._decision: Decision | None = None
        self._thread = threading.Thread(target=self._main, daemon=True,
                                        name=f"whimbrel-code {facts.workflow_exec_id}")
        self._started = False

    @property
    def gone(self) -> bool:
        return self._gone

    def advance(self) -> Decision | None:
        """Let the function run on until it waits again or ends: what it decided since
        it last parked. None: this live run is gone (replay instead)."""
        with self._cond:
            if self._gone:
                return None
            self._code_turn = True
            if self._started:
                self._cond.notify_all()
            else:
                self._started = True
                self._thread.start()
            while self._code_turn:
                self._cond.wait()
            decision, self._decision = self._decision, None
            return decision

    def give_up(self) -> None:
        """Stop: the parked function unwinds (scheduling nothing) and its thread ends."""
        with self._cond:
            self._gone = True
            self._cond.notify_all()

    # -- the function's thread ------------------------------------------------------------

    def _park(self, step: str) -> None:
        ctx = self._ctx
        with self._cond:
            decision = decision_of(ctx, Decision("waiting"))
            ctx.new_steps, ctx.waiting_on, ctx.dispatches = [], [], []
            if decision.outcome != "waiting":  # the replay went wrong: it ends here
                self._gone = True
            self._hand_back(decision)
            deadline = time.monotonic() + self._idle
            while not self._code_turn and not self._gone:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._gone = True  # idle too long: the thread is worth more
                    break
                self._cond.wait(left)
            if self._gone:
                ctx._closed = True
        if ctx._closed:
            raise _Suspend(step)  # unwinds the function; run_code catches it

    def _main(self) -> None:
        decision: Decision | None = None
        try:
            outcome = run_code(self._fn, self._ctx)
            if not self._ctx._closed:
                decision = decision_of(self._ctx, outcome)
        finally:  # also when the function raised past run_code (a BaseException)
            with self._cond:
                was_gone = self._gone
                self._gone = True
                if not was_gone or self._code_turn:
                    self._hand_back(decision)

    def _hand_back(self, decision: Decision | None) -> None:
        self._decision = decision
        self._code_turn = False
        self._cond.notify_all()
