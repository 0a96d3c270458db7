"""The contract table, walked pair by pair against docs/contract.md ("Activity transitions")."""

from __future__ import annotations

import itertools

import pytest

from whimbrel import ActivityState as A
from whimbrel import IllegalTransition
from whimbrel import Transition as T
from whimbrel import WorkflowState as W
from whimbrel.contract.states import (
    ACTIVITY_TERMINAL,
    WORKFLOW_TERMINAL,
    allowed_transitions,
    next_activity_state,
    next_workflow_state,
)
from whimbrel.contract.states import (
    WorkflowTransition as WT,
)

# docs/contract.md's table, typed out independently of the implementation's table: the
# original contract plus Whimbrel's one extension ("Deadlines"): TIME_OUT of an attempt
# nobody started within its schedule-to-start time; and issue 22's SKIP of an attempt
# nobody launched (the engine's move: "Skipped activities").
EXPECTED = {
    A.REQUESTED: {T.CANCEL: A.CANCELLED, T.READY: A.READY, T.QUEUED: A.QUEUED,
                  T.SKIP: A.SKIPPED},
    A.READY: {T.CANCEL: A.CANCELLED, T.QUEUED: A.QUEUED, T.PREPARING: A.PREPARING,
              T.RUNNING: A.RUNNING, T.TIME_OUT: A.TIMED_OUT, T.SKIP: A.SKIPPED},
    A.QUEUED: {T.CANCEL: A.CANCELLED, T.PREPARING: A.PREPARING, T.RUNNING: A.RUNNING,
               T.FAILED: A.FAILED, T.TIME_OUT: A.TIMED_OUT},
    A.PREPARING: {T.CANCEL: A.CANCELLED, T.RUNNING: A.RUNNING, T.FAILED: A.FAILED,
                  T.TIME_OUT: A.TIMED_OUT},
    A.RUNNING: {T.CANCEL: A.CANCELLED_RUNNING, T.FAILED: A.FAILED, T.COMPLETED: A.COMPLETED,
                T.TIME_OUT: A.TIMED_OUT},
    A.CANCELLED_RUNNING: {T.FAILED: A.CANCELLED, T.COMPLETED: A.CANCELLED,
                          T.TIME_OUT: A.TIMED_OUT},
}


@pytest.mark.parametrize(("state", "transition"), list(itertools.product(A, T)))
def test_every_pair(state: A, transition: T) -> None:
    expected = EXPECTED.get(state, {}).get(transition)
    if expected is None:
        with pytest.raises(IllegalTransition) as info:
            next_activity_state(state, transition, activity_exec_id="x:y:1")
        assert info.value.current == state.value
        assert info.value.transition == transition.value
        assert "x:y:1" in str(info.value)
    else:
        assert next_activity_state(state, transition) is expected


def test_terminal_states_have_no_moves() -> None:
    # LOST: the reconciler's tombstone of a vanished row (created, never moved to).
    assert {A.CANCELLED, A.TIMED_OUT, A.FAILED, A.COMPLETED, A.LOST,
            A.SKIPPED} == ACTIVITY_TERMINAL
    for state in ACTIVITY_TERMINAL:
        assert allowed_transitions(state) == ()
        assert state.is_terminal


def test_enums_store_their_names() -> None:
    for enum in (A, T, W):
        for member in enum:
            assert member.value == member.name
            assert str(member) == member.name


def test_workflow_machine() -> None:
    assert next_workflow_state(W.REQUESTED, WT.START) is W.RUNNING
    assert next_workflow_state(W.RUNNING, WT.COMPLETE) is W.COMPLETED
    assert next_workflow_state(W.RUNNING, WT.FAIL) is W.FAILED_WAITING
    assert next_workflow_state(W.FAILED_WAITING, WT.STOPPED) is W.FAILED
    assert next_workflow_state(W.RUNNING, WT.CANCEL) is W.CANCEL_REQUESTED
    assert next_workflow_state(W.CANCEL_REQUESTED, WT.STOPPED) is W.CANCELLED
    for live in (W.REQUESTED, W.RUNNING, W.FAILED_WAITING, W.CANCEL_REQUESTED):
        assert next_workflow_state(live, WT.TIME_OUT) is W.TIMED_OUT
    assert {W.COMPLETED, W.FAILED, W.CANCELLED, W.TIMED_OUT} == WORKFLOW_TERMINAL
    # Terminal, except for an operator's REDRIVE of a run that did not complete.
    for state in (W.FAILED, W.CANCELLED, W.TIMED_OUT):
        assert next_workflow_state(state, WT.REDRIVE) is W.RUNNING
    for state, move in itertools.product(WORKFLOW_TERMINAL, WT):
        if move is WT.REDRIVE and state is not W.COMPLETED:
            continue
        with pytest.raises(IllegalTransition):
            next_workflow_state(state, move)
