"""Issue 20, the pure parts: LOST in the contract's tables and sets, the late-report rule,
a stream record's write time, and what the reporter of a late result is told."""

from __future__ import annotations

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.errors import ActivityTimedOut
from whimbrel.contract.launching import RetryPolicy
from whimbrel.contract.outcomes import retries_left
from whimbrel.contract.records import ActivityRecord
from whimbrel.contract.states import (
    ACTIVITY_TOMBSTONES,
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
    allowed_transitions,
)
from whimbrel.engine.intake.decode import written_epoch
from whimbrel.engine.late import gave_up

A, T = ActivityState, Transition


def _attempt(state: ActivityState, attempt: int = 1) -> ActivityRecord:
    return ActivityRecord("wx", f"wx:a:{attempt}", "a", "w", attempt, state)


def test_lost_is_a_tombstone_no_move_leads_to_or_leaves() -> None:
    assert {A.LOST} == ACTIVITY_TOMBSTONES and A.LOST.is_terminal
    assert allowed_transitions(A.LOST) == ()
    assert A.LOST not in ACTIVITY_TRANSITIONS.values()


def test_the_retry_policy_answers_lost_like_timed_out() -> None:
    spec = ActivityDefinition("a", retry=RetryPolicy(max_attempts=2))
    assert retries_left(_attempt(A.LOST), spec)
    assert not retries_left(_attempt(A.LOST, 2), spec)
    assert retries_left(_attempt(A.LOST), spec) == retries_left(_attempt(A.TIMED_OUT), spec)


def test_only_an_end_of_an_attempt_given_up_on_is_late() -> None:
    for state in A:
        for verb in T:
            expected = state in (A.TIMED_OUT, A.LOST) and verb in (T.COMPLETED, T.FAILED)
            assert gave_up(_attempt(state), verb) is expected, (state, verb)
    assert not gave_up(None, T.COMPLETED)


def test_a_stream_records_write_time() -> None:
    assert written_epoch({"dynamodb": {"ApproximateCreationDateTime": 1795600000}}) \
        == 1795600000.0
    assert written_epoch({"dynamodb": {}}) is None
    assert written_epoch({"dynamodb": {"ApproximateCreationDateTime": "soon"}}) is None
    assert written_epoch({"dynamodb": {"ApproximateCreationDateTime": True}}) is None
    assert written_epoch({}) is None


def test_the_reporter_of_a_late_result_is_told_it_was_kept() -> None:
    kept = ActivityTimedOut("wx:a:1", "LOST", kept=True)
    assert "late output" in str(kept) and "LOST" in str(kept) and kept.kept
    assert "will not change its state" in str(ActivityTimedOut("wx:a:1"))
