"""The contract, checked on a finished run (re-exported by :mod:`whimbrel.testing`):
every state move allowed, attempts in order, what started was launched once."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable

from whimbrel.contract import dataflow
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.states import (
    ACTIVITY_FAILED,
    ACTIVITY_TOMBSTONES,
    ACTIVITY_TRANSITIONS,
    WORKFLOW_TRANSITIONS,
    ActivityState,
    WorkflowState,
)
from whimbrel.engine import ActivityExec, WorkflowExec

_ACTIVITY_MOVES = {(s.value, t.value) for (s, _), t in ACTIVITY_TRANSITIONS.items()}
_WORKFLOW_MOVES = {(s.value, t.value) for (s, _), t in WORKFLOW_TRANSITIONS.items()}
_STARTED = (ActivityState.READY, ActivityState.QUEUED, ActivityState.PREPARING,
            ActivityState.RUNNING)


def contract_violations(wf: WorkflowExec, definition: WorkflowDefinition | None = None,
                        *, launched: Iterable[str] = ()) -> list[str]:
    """Every way ``wf`` breaks the contract; empty when it holds.

    Checks that each activity's (and map item's) and the workflow's state history is a
    path of the contract, that attempts follow one another only after a failure or
    time-out (after a redrive also a cancel; a failure handler's, after its call for an
    earlier failure), that no activity became READY/QUEUED/RUNNING before all its
    upstreams were resolved (COMPLETED, or a failure its ``on_failure`` took over), that
    a finished workflow has nothing left running (and a COMPLETED one resolved every
    activity), and that every id in ``launched`` was launched once, from QUEUED.
    """
    out: list[str] = []
    wid = wf.workflow_exec_id
    out += _path_problems(f"workflow {wid}", [h.state for h in wf.history],
                          WorkflowState.REQUESTED.value, _WORKFLOW_MOVES, wf.state.value)
    every = (*wf.activities, *wf.items)
    by_name: dict[str, dict[int, ActivityExec]] = {}
    for act in every:
        # A tombstone (LOST) is created in its state by the reconciler: its history is
        # that one state.
        first = act.state if act.state in ACTIVITY_TOMBSTONES else ActivityState.REQUESTED
        out += _path_problems(act.activity_exec_id, [h.state for h in act.history],
                              first.value, _ACTIVITY_MOVES, act.state.value)
        by_name.setdefault(act.activity_name, {})[act.attempt] = act
    for name, attempts in by_name.items():
        for n in sorted(attempts):
            if n > 1:
                prev, cur = attempts.get(n - 1), attempts[n]
                if not _may_follow(prev, cur, wf):
                    out.append(f"{name} attempt {n} exists but attempt {n - 1} is "
                               f"{prev.state.value if prev else 'missing'}")
        if sum(a.state is ActivityState.COMPLETED for a in attempts.values()) > 1:
            out.append(f"{name} completed more than once")
    if definition is not None:
        # A run ended early resolves nothing more: what it left is SKIPPED or stopped.
        out += _order_problems(every, by_name, definition,
                               None if wf.ended_by else wf.state)
    if wf.state.is_terminal:
        live = [a.activity_exec_id for a in every if not a.state.is_terminal]
        if live:
            out.append(f"workflow {wf.state.value} while {live} are not finished")
    counts = Counter(launched)
    states = {a.activity_exec_id: a for a in every}
    for aeid, n in counts.items():
        if n > 1:
            out.append(f"{aeid} launched {n} times")
        seen = states.get(aeid)
        if seen is not None and ActivityState.QUEUED.value not in {h.state for h in seen.history}:
            out.append(f"{aeid} launched but never QUEUED")
    return out


def _may_follow(prev: ActivityExec | None, cur: ActivityExec, wf: WorkflowExec) -> bool:
    """Whether attempt ``cur`` may exist after ``prev`` (the one before it)."""
    if prev is None or not prev.state.is_terminal:
        return False
    if prev.state in ACTIVITY_FAILED:  # FAILED, TIMED_OUT, LOST: the retry policy's
        return True
    if cur.called_by is not None and cur.called_by != prev.called_by:
        return True  # a handler called again, for another failure
    return wf.redrive_count > 0 and prev.state is ActivityState.CANCELLED


def _order_problems(every: Iterable[ActivityExec], by_name: dict[str, dict[int, ActivityExec]],
                    definition: WorkflowDefinition,
                    state: WorkflowState | None) -> list[str]:
    out: list[str] = []
    resolved = _Resolved(by_name, definition)
    for act in every:
        began = [h.at for h in act.history if h.state in {s.value for s in _STARTED}]
        if not began:
            continue
        for up in definition.activity(act.activity_name).depends_on:
            at = resolved.first(up)
            if at is None or at > began[0]:
                out.append(f"{act.activity_exec_id} left REQUESTED at {began[0]} before "
                           f"upstream {up} completed ({at})")
    if state is WorkflowState.COMPLETED:
        skip = dataflow.handlers(definition)
        missing = [n for n in definition.names if n not in skip and not resolved.now(n)]
        if missing:
            out.append(f"workflow COMPLETED but {missing} never completed")
    return out


class _Resolved:
    """When each activity was first resolved, and whether it is now (views only)."""

    def __init__(self, by_name: dict[str, dict[int, ActivityExec]],
                 definition: WorkflowDefinition) -> None:
        self.by_name = by_name
        self.defn = definition

    def _latest(self, name: str) -> ActivityExec | None:
        attempts = self.by_name.get(name) or {}
        return attempts[max(attempts)] if attempts else None

    def first(self, name: str, depth: int = 0) -> float | None:
        times = [h.at for a in (self.by_name.get(name) or {}).values() for h in a.history
                 if h.state in (ActivityState.COMPLETED.value, ActivityState.SKIPPED.value)]
        handler = self.defn.activity(name).on_failure
        last = self._latest(name)
        if handler == dataflow.CONTINUE and last is not None \
                and last.state in ACTIVITY_FAILED:
            times.append(last.history[-1].at)
        elif handler and handler in self.by_name and depth < 8:
            mine = {a.activity_exec_id for a in (self.by_name.get(name) or {}).values()}
            for h_act in self.by_name[handler].values():
                if h_act.called_by in mine:
                    at = self.first(handler, depth + 1)
                    if at is not None:
                        times.append(at)
        return min(times) if times else None

    def now(self, name: str, depth: int = 0) -> bool:
        last = self._latest(name)
        if last is None or depth > 8:
            return False
        if last.state in (ActivityState.COMPLETED, ActivityState.SKIPPED):
            return True
        if last.state not in ACTIVITY_FAILED:
            return False
        handler = self.defn.activity(name).on_failure
        if handler == dataflow.CONTINUE:
            return True
        called = self._latest(handler) if handler else None
        return called is not None and called.called_by == last.activity_exec_id \
            and self.now(str(handler), depth + 1)


def assert_contract_holds(wf: WorkflowExec, definition: WorkflowDefinition | None = None,
                          *, launched: Iterable[str] = ()) -> None:
    """Raise AssertionError listing every :func:`contract_violations` of ``wf``."""
    problems = contract_violations(wf, definition, launched=launched)
    if problems:
        raise AssertionError(f"workflow {wf.workflow_exec_id} breaks the contract:\n  "
                             + "\n  ".join(problems))


def _path_problems(what: str, path: list[str], first: str, moves: set[tuple[str, str]],
                   current: str) -> list[str]:
    if not path:
        return [f"{what}: empty history"]
    out: list[str] = []
    if path[0] != first:
        out.append(f"{what}: history starts at {path[0]}")
    for a, b in itertools.pairwise(path):
        if (a, b) not in moves:
            out.append(f"{what}: illegal step {a} -> {b} in history {path}")
    if path[-1] != current:
        out.append(f"{what}: history ends at {path[-1]} but state is {current}")
    return out
