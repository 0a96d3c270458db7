from __future__ import annotations

import pytest

import whimbrel
from whimbrel import InvalidInput
from whimbrel.contract.ids import (
    activity_exec_id,
    parse_activity_exec_id,
    unit_random,
    workflow_exec_id_for,
)
from whimbrel.contract.payloads import clip_error, encode_payload


def test_ids_are_deterministic_and_parse_back() -> None:
    wx = workflow_exec_id_for("req-1")
    assert wx == workflow_exec_id_for("req-1") != workflow_exec_id_for("req-2")
    aeid = activity_exec_id(wx, "load-data", 3)
    key = parse_activity_exec_id(aeid)
    assert (key.workflow_exec_id, key.activity_name, key.attempt) == (wx, "load-data", 3)
    assert key.next_attempt().activity_exec_id == activity_exec_id(wx, "load-data", 4)
    assert 0 <= unit_random(aeid) < 1 and unit_random(aeid) == unit_random(aeid)


@pytest.mark.parametrize("bad", [None, 7, "", "nocolons", "wx:a:0", "wx:a:x", ":a:1", "wx::1"])
def test_bad_activity_ids(bad: object) -> None:
    with pytest.raises(InvalidInput, match="activity_exec_id"):
        parse_activity_exec_id(bad)


def test_payload_limits() -> None:
    assert encode_payload(None, field="input", max_bytes=10) is None
    assert encode_payload({"a": [1, "é"]}, field="input", max_bytes=100) == '{"a":[1,"é"]}'
    with pytest.raises(InvalidInput, match="more than the limit of 10"):
        encode_payload({"a": "x" * 20}, field="input", max_bytes=10)
    with pytest.raises(InvalidInput, match="not JSON-serialisable"):
        encode_payload({"a": object()}, field="input", max_bytes=100)
    with pytest.raises(InvalidInput, match="not JSON-serialisable"):
        encode_payload(float("nan"), field="output", max_bytes=100)
    deep: object = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(InvalidInput, match="nested deeper"):
        encode_payload(deep, field="input", max_bytes=10_000)
    clipped = clip_error("e" * 20_000)
    assert clipped is not None and len(clipped) < 8_100 and "characters cut" in clipped


def test_public_names_are_pinned() -> None:
    assert sorted(whimbrel.__all__) == sorted([
        "ActivityCancelled", "ActivityDefinition", "ActivityExec", "ActivityNotFound",
        "ActivityRun", "ActivityState", "ActivityTimedOut", "DefinitionNotFound",
        "DefinitionVersion", "EngineDriven",
        "IllegalTransition", "InvalidDefinition", "InvalidInput", "LauncherSpec",
        "MapProgress", "NotAnApprover", "RedriveNotAllowed", "RetryNotAllowed", "RetryPolicy",
        "SignalRefused", "StateConflict", "StoreError", "SweepReport",
        "Transition",
        "Whimbrel", "WhimbrelError", "WorkflowDefinition", "WorkflowExec",
        "WorkflowNotFound", "WorkflowPage", "WorkflowState",
        # issue 11: the guards' errors; issue 12: the request view and the id rule
        "ListenerOnly", "NotAllowedNow", "UpstreamNotCompleted", "WorkflowNotRunning",
        "WorkflowRequest", "workflow_exec_id_for",
        # issue 22: schedules, pools
        "Schedule", "ScheduleConflict", "ScheduleInfo", "ScheduleNotFound",
        "PoolInfo", "PoolNotFound",
        # issue 26: code workflows
        "workflow", "WorkflowContext", "StepFailed", "WaitTimedOut", "NonDeterminism",
        # issue 29: batch operations, nudge
        "BatchReport", "NudgeReport",
        # issue 31: a cancel of an ended run, a request id given another input
        "WorkflowAlreadyEnded", "RequestIdReused",
        # issue 26: a code run's clean-up on cancel
        "Cancelled",
    ])
    for name in whimbrel.__all__:
        assert getattr(whimbrel, name) is not None
    for err in ("IllegalTransition", "StateConflict", "ActivityCancelled", "ActivityTimedOut",
                "InvalidInput", "InvalidDefinition", "StoreError", "WorkflowNotFound",
                "RetryNotAllowed", "NotAllowedNow", "UpstreamNotCompleted",
                "WorkflowNotRunning", "ListenerOnly", "NotAnApprover", "SignalRefused",
                "RedriveNotAllowed", "EngineDriven", "StepFailed", "WaitTimedOut",
                "NonDeterminism", "WorkflowAlreadyEnded", "RequestIdReused"):
        assert issubclass(getattr(whimbrel, err), whimbrel.WhimbrelError)
    # Raised into a code run's function at its wait: a broad ``except Exception`` in
    # user code must not swallow it (docs/code-workflows.md, "Clean-up on cancel").
    assert issubclass(whimbrel.Cancelled, BaseException)
    assert not issubclass(whimbrel.Cancelled, Exception)
