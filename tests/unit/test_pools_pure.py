"""Issue 22's pure helpers added with the engine wiring: slot references, an attempt's
priority, the claim key's order, slot check times, the QUEUED state's place in the
contract, a Workflow Ended event's queued time. No I/O."""

from __future__ import annotations

import pytest

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.notifications import queued_seconds, workflow_ended
from whimbrel.contract.pools import (
    MAX_CHECK_SECONDS,
    SLOT_CHECK_SECONDS,
    PoolKeyFailed,
    base_pool,
    check_after,
    evaluate_pool_key,
    is_keyed_pool,
    is_run_pool,
    keyed_pool,
    parse_slot_ref,
    pool_key_problem,
    run_pool,
    slot_ref,
)
from whimbrel.contract.priority import attempt_priority, claim_key_order, order_text
from whimbrel.contract.records import Change, WorkflowRecord
from whimbrel.contract.states import (
    WORKFLOW_LIVE,
    WORKFLOW_WAITING,
    WorkflowState,
    WorkflowTransition,
    next_workflow_state,
    workflow_sources,
)

W, WT = WorkflowState, WorkflowTransition


def test_slot_references_round_trip() -> None:
    assert parse_slot_ref(slot_ref("api", 7)) == ("api", 7)
    assert parse_slot_ref(slot_ref("api", None)) == ("api", None)  # admitted, no slot
    assert parse_slot_ref(slot_ref(run_pool("etl.v2"), 0)) == ("run:etl.v2", 0)
    assert is_run_pool(run_pool("x")) and not is_run_pool("x")
    for bad in ("", "#3", "api#x"):
        with pytest.raises(InvalidInput, match="not a pool slot"):
            parse_slot_ref(bad)


def test_an_attempt_waits_with_its_activity_priority_shifted_by_its_run() -> None:
    assert attempt_priority(5, None) == 5
    assert attempt_priority(2, None) == 2  # a default run leaves the activity's
    assert attempt_priority(5, 1) == 1  # a default activity takes the run's
    assert attempt_priority(5, 8) == 8
    assert attempt_priority(2, 3) == 0  # urgent in an urgent run: more urgent, kept >= 0
    assert attempt_priority(8, 9) == 9  # and <= 9


def test_the_claim_key_carries_the_serving_order() -> None:
    order = order_text(2, 1000.0)
    assert claim_key_order(f"wf/act/{order}/wx:act:1") == order
    assert claim_key_order("wf/act/wx:act:1") == ""  # a key from before: served first
    assert claim_key_order(None) == ""
    assert order_text(0, 1000.0) < order_text(5, 1000.0) < order_text(5, 1001.0)
    assert order_text(9, 0.0) < order_text(0, 9 * 300.0 + 1)  # aging: 45 minutes


def test_a_held_slot_is_checked_with_its_holders_age() -> None:
    assert check_after(0) == SLOT_CHECK_SECONDS
    assert check_after(1000) == 500
    assert check_after(10**6) == MAX_CHECK_SECONDS


def test_the_queued_run_state_in_the_contract() -> None:
    assert next_workflow_state(W.REQUESTED, WT.QUEUE) is W.QUEUED
    assert next_workflow_state(W.QUEUED, WT.START) is W.RUNNING
    assert next_workflow_state(W.QUEUED, WT.CANCEL) is W.CANCEL_REQUESTED
    assert next_workflow_state(W.QUEUED, WT.TIME_OUT) is W.TIMED_OUT
    assert {W.QUEUED} == WORKFLOW_WAITING and W.QUEUED in WORKFLOW_LIVE
    assert W.QUEUED not in workflow_sources(WT.SUSPEND)
    assert W.QUEUED not in workflow_sources(WT.FAIL)  # never fails before it starts


def test_workflow_ended_says_how_long_a_run_was_queued() -> None:
    history = (Change("REQUESTED", 100.0), Change("QUEUED", 100.0),
               Change("RUNNING", 160.5), Change("COMPLETED", 200.0))
    wf = WorkflowRecord("wx", "etl", 1, W.COMPLETED, created_epoch=100.0, ended_epoch=200.0,
                        history=history)
    assert queued_seconds(wf, 200.0) == 60.5
    assert workflow_ended(wf, previous="RUNNING").detail["queued_seconds"] == 60.5
    never = WorkflowRecord("wx", "etl", 1, W.CANCELLED, created_epoch=100.0,
                           ended_epoch=130.0, history=(
                               *history[:2], Change("CANCEL_REQUESTED", 130.0),
                               Change("CANCELLED", 130.0)))
    assert queued_seconds(never, 130.0) == 30.0
    plain = WorkflowRecord("wx", "etl", 1, W.COMPLETED, history=(Change("RUNNING", 1.0),))
    assert "queued_seconds" not in workflow_ended(plain, previous="RUNNING").detail


# -- per-key pools (issue 29) ------------------------------------------------------------


def test_a_keyed_pool_names_its_key_or_its_hash_and_maps_back_to_its_pool() -> None:
    assert keyed_pool("exports", "t-9") == "exports~t-9"
    assert keyed_pool("exports", "eu.west_1") == "exports~eu.west_1"
    for awkward in ("a b", "x#1", "tenant/7", "é", "", "k" * 65):
        name = keyed_pool("exports", awkward)
        assert name.startswith("exports~~") and len(name) == len("exports~~") + 32
        assert "#" not in name and name == keyed_pool("exports", awkward)  # stable
    assert keyed_pool("exports", "a b") != keyed_pool("exports", "a_b")
    for name in ("exports~t-9", keyed_pool("exports", "x#1")):
        assert base_pool(name) == "exports" and is_keyed_pool(name)
        pool, k = parse_slot_ref(slot_ref(name, 3))
        assert (pool, k) == (name, 3)
    assert base_pool("exports") == "exports" and not is_keyed_pool("exports")
    assert not is_keyed_pool(run_pool("w"))


@pytest.mark.parametrize(("doc", "key"), [
    ({"input": {"tenant": "a"}}, "a"), ({"input": {"tenant": 7}}, "7"),
    ({"input": {"tenant": 7.0}}, "7"), ({"input": {"tenant": 2.5}}, "2.5"),
    ({"input": {"tenant": True}}, "true")])
def test_a_key_is_a_string_a_number_or_a_boolean(doc: object, key: str) -> None:
    assert evaluate_pool_key("input.tenant", doc) == key


@pytest.mark.parametrize(("doc", "says"), [
    ({"input": {}}, "read null"), ({"input": None}, "read null"),
    ({"input": {"tenant": [1]}}, "read a list"),
    ({"input": {"tenant": {"a": 1}}}, "read an object")])
def test_a_key_that_is_not_a_scalar_says_which(doc: object, says: str) -> None:
    with pytest.raises(PoolKeyFailed, match=says) as err:
        evaluate_pool_key("input.tenant", doc)
    assert err.value.error_type == "PoolKeyFailed" and "input.tenant" in str(err.value)


def test_pool_key_problems() -> None:
    assert pool_key_problem("p", None) is None
    assert pool_key_problem("p", "input.tenant") is None
    assert pool_key_problem("p", "up.region", ("up",)) is None
    assert "needs a pool" in (pool_key_problem(None, "input.tenant") or "")
    assert "not valid JMESPath" in (pool_key_problem("p", "input.[") or "")
    assert "reads up" in (pool_key_problem("p", "up.region") or "")
    assert "non-empty" in (pool_key_problem("p", "") or "")
    assert "non-empty" in (pool_key_problem("p", 3) or "")
