"""Per-key pools (issue 29, item 5) on DynamoDB Local, through the Python API: a pool of
2 slots keyed by tenant lets every tenant run 2; keys read from the input or an upstream;
a key that reads nothing fails its attempt; a bad ``pool_key`` is refused at register;
a slot of a keyed pool lost to a crash comes back through the sweep."""

from __future__ import annotations

import pytest
import wb_pool_activities as gated

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    DefinitionNotFound,
    InvalidDefinition,
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.contract.pools import POOL_KEY_ERROR, keyed_pool
from whimbrel.testing import RecordingLauncher, StepClock, wait_until

CLOCK = StepClock
A = ActivityState
LAMBDA = LauncherSpec("lambda", {"function": "f"})


def keyed(name: str = "w", key: str = "input.tenant", *, pull: bool = False,
          upstream: bool = False, hb: float | None = None) -> WorkflowDefinition:
    act = ActivityDefinition("a", launcher=LauncherSpec.external() if pull else LAMBDA,
                             pool="exports", pool_key=key, heartbeat_timeout_seconds=hb,
                             depends_on=("up",) if upstream else (),
                             retry=RetryPolicy(max_attempts=1))
    acts = (ActivityDefinition("up", launcher=LauncherSpec.external()), act) if upstream \
        else (act,)
    return WorkflowDefinition(name, acts)


def attempt(wb: Whimbrel, wx: str) -> tuple[str, ActivityState]:
    act = wb.get_workflow(wx).activity("a")
    return act.activity_exec_id, act.state


def run_to_end(wb: Whimbrel, aeid: str) -> None:
    wb.transition_activity(aeid, Transition.RUNNING)
    wb.transition_activity(aeid, Transition.COMPLETED, output={"ok": 1})


def held(wb: Whimbrel, tenant: str) -> int:
    return len(wb.store.pools.held_slots(keyed_pool("exports", tenant), 2))


def test_two_slots_keyed_by_tenant_let_every_tenant_run_two(
        wb: Whimbrel, launched: RecordingLauncher) -> None:
    wb.set_pool("exports", slots=2, per_second=None)
    wb.register_workflow(keyed())
    runs = {t: [wb.start_workflow("w", {"tenant": t}) for _ in range(3)] for t in "ab"}
    states = {t: [attempt(wb, wx)[1] for wx in wxs] for t, wxs in runs.items()}
    # 2 per tenant at once, 4 in all: the pool's limit applies to each key.
    assert {t: s.count(A.QUEUED) for t, s in states.items()} == {"a": 2, "b": 2}
    assert {t: s.count(A.READY) for t, s in states.items()} == {"a": 1, "b": 1}
    assert len(launched.take()) == 4
    assert (held(wb, "a"), held(wb, "b")) == (2, 2)
    key_a = wb.get_pool("exports~a")  # one key's slots and waiters, its pool's settings
    assert (key_a.name, key_a.slots, key_a.in_use, key_a.waiting) == ("exports~a", 2, 2, 1)
    assert (wb.get_pool("exports").in_use, wb.get_pool("exports").waiting) == (0, 0)
    waiting = next(wx for wx in runs["a"] if attempt(wb, wx)[1] is A.READY)
    assert wb.get_workflow(waiting).activity("a").pool_wait == "exports~a"
    first = next(wx for wx in runs["a"] if attempt(wb, wx)[1] is A.QUEUED)
    assert wb.get_workflow(first).activity("a").pool_slot.startswith("exports~a#")  # type: ignore[union-attr]
    # A release of tenant a admits a's waiter, not b's.
    run_to_end(wb, attempt(wb, first)[0])
    assert attempt(wb, waiting)[1] is A.QUEUED
    assert [attempt(wb, wx)[1] for wx in runs["b"]].count(A.QUEUED) == 2
    for wxs in runs.values():
        for wx in wxs:
            aeid, state = attempt(wb, wx)
            if state is A.QUEUED:
                run_to_end(wb, aeid)
    for wx in runs["b"]:  # b's waiter went in on b's release
        aeid, state = attempt(wb, wx)
        if state is A.QUEUED:
            run_to_end(wb, aeid)
    assert all(attempt(wb, wx)[1] is A.COMPLETED for wxs in runs.values() for wx in wxs)
    assert (held(wb, "a"), held(wb, "b")) == (0, 0)  # every slot freed
    assert wb.store.pools.waiter_heads("exports~a") == []
    assert wb.store.pools.waiter_heads("exports~b") == []
    assert launched.doubled() == []


def test_a_key_from_an_upstream_and_an_awkward_key_are_pools_of_their_own(
        wb: Whimbrel) -> None:
    wb.set_pool("exports", slots=1, per_second=None)
    wb.register_workflow(keyed(key="up.region", upstream=True))
    wxs = [wb.start_workflow("w") for _ in range(3)]
    regions = ["eu west#1", "eu west#1", "us"]  # '#' and a space: hashed
    for wx, region in zip(wxs, regions, strict=True):
        up = wb.get_workflow(wx).activity("up").activity_exec_id
        wb.transition_activity(up, Transition.RUNNING)
        wb.transition_activity(up, Transition.COMPLETED, output={"region": region})
    assert [attempt(wb, wx)[1] for wx in wxs] == [A.QUEUED, A.READY, A.QUEUED]
    eu = keyed_pool("exports", "eu west#1")
    assert eu.startswith("exports~~") and "#" not in eu
    assert wb.get_workflow(wxs[1]).activity("a").pool_wait == eu
    run_to_end(wb, attempt(wb, wxs[0])[0])
    assert attempt(wb, wxs[1])[1] is A.QUEUED


@pytest.mark.parametrize(("tenant", "says"), [(None, "read null"), ([1], "read a list"),
                                              ({"x": 1}, "read an object")])
def test_a_key_that_reads_no_value_fails_the_attempt_and_holds_nothing(
        wb: Whimbrel, launched: RecordingLauncher, tenant: object, says: str) -> None:
    wb.set_pool("exports", slots=1, per_second=None)
    wb.register_workflow(keyed())
    wx = wb.start_workflow("w", {"tenant": tenant})
    act = wb.get_workflow(wx).activity("a")
    assert act.state is A.FAILED and act.error_type == POOL_KEY_ERROR
    assert says in (act.error or "") and "input.tenant" in (act.error or "")
    assert launched.take() == []
    ok = wb.start_workflow("w", {"tenant": 7})  # a number is a key
    assert attempt(wb, ok)[1] is A.QUEUED
    assert wb.get_workflow(ok).activity("a").pool_slot == "exports~7#0"


def test_a_pull_attempt_of_a_keyed_pool_is_claimable_per_key(wb: Whimbrel) -> None:
    wb.set_pool("exports", slots=1, per_second=None)
    wb.register_workflow(keyed(pull=True))
    a1, a2, b1 = (wb.start_workflow("w", {"tenant": t}) for t in "aab")
    got = {wb.claim(workflow_name="w").workflow_exec_id for _ in range(2)}  # type: ignore[union-attr]
    assert got == {a1, b1}
    assert wb.claim(workflow_name="w") is None  # a's second waits for a's slot
    wb.transition_activity(attempt(wb, a1)[0], Transition.COMPLETED)
    again = wb.claim(workflow_name="w")
    assert again is not None and again.workflow_exec_id == a2


def test_a_bad_pool_key_is_refused_at_register_and_nothing_is_registered(
        wb: Whimbrel) -> None:
    wb.set_pool("exports", slots=2, per_second=None)
    for key, says in (("input.[", "pool_key is not valid JMESPath"),
                      ("tenant", "pool_key reads tenant"),
                      ("`1", "pool_key is not valid JMESPath")):
        with pytest.raises(InvalidDefinition, match="pool_key") as err:
            wb.register_workflow(keyed(key=key))
        assert says in str(err.value)
    no_pool = WorkflowDefinition("w", (ActivityDefinition("a", launcher=LAMBDA,
                                                          pool_key="input.tenant"),))
    with pytest.raises(InvalidDefinition, match="pool_key needs a pool"):
        wb.register_workflow(no_pool)
    with pytest.raises(DefinitionNotFound):
        wb.get_definition("w")


def test_a_keyed_slot_lost_to_a_crash_comes_back_through_the_sweep(
        wb: Whimbrel, launched: RecordingLauncher, clock: StepClock) -> None:
    wb.set_pool("exports", slots=1, per_second=None)
    wb.register_workflow(keyed(hb=30.0))
    first, second = (wb.start_workflow("w", {"tenant": "a"}) for _ in range(2))
    holder = attempt(wb, first)[0]
    wb.transition_activity(holder, Transition.RUNNING)
    # A holder gone without its end (no release): a raw DeleteItem of its row.
    wb.store.tables.client.call("DeleteItem", {
        "TableName": f"{wb.table_prefix}activity_exec",
        "Key": {"workflow_exec_id": {"S": first}, "activity_exec_id": {"S": holder}}})
    assert attempt(wb, second)[1] is A.READY
    for _ in range(6):  # the run's reconcile visit, then the keyed slot's check
        clock.advance(130)
        wb.sweep()
        if attempt(wb, second)[1] is not A.READY:
            break
    assert attempt(wb, second)[1] is A.QUEUED
    assert wb.store.pools.get_slot("exports~a", 0).holder == attempt(wb, second)[0]
    assert launched.doubled() == []


def test_code_steps_take_a_pool_keyed_by_the_run_input(wb: Whimbrel) -> None:
    """``ctx.start(..., pool=, pool_key=)``: each tenant's run holds its own slot."""
    wb.set_pool("steps", slots=1, per_second=None)
    wb.register_workflow(gated.keyed_steps)
    runs = {t: wb.start_workflow("keyed_steps", {"tenant": t}) for t in "ab"}

    def rows(wx: str) -> list[tuple[str, str]]:
        return sorted((a.pool_slot or "", a.pool_wait or "") for a in wb.store.list_activities(wx)
                      if a.activity_name.startswith("job#"))

    for t, wx in runs.items():
        assert wait_until(lambda wx=wx: len(rows(wx)) == 2 and rows(wx),
                          message="both steps written") == [
            ("", f"steps~{t}"), (f"steps~{t}#0", "")]
    wx = runs["a"]
    first = next(a for a in wb.store.list_activities(wx) if a.pool_slot is not None)
    wb.transition_activity(first.activity_exec_id, Transition.RUNNING)
    wb.transition_activity(first.activity_exec_id, Transition.COMPLETED, output=1)
    assert wait_until(lambda: rows(wx) == [("steps~a#0", ""), ("steps~a#0", "")] or None,
                      message="a's second step took a's slot")
    assert rows(runs["b"]) == [("", "steps~b"), ("steps~b#0", "")]


def test_nudge_gives_back_the_keyed_slot_of_a_lost_holder(
        wb: Whimbrel, launched: RecordingLauncher) -> None:
    """A vanished holder's LOST tombstone records no slot: nudge finds it in the key its
    run's input reads, and the key's waiter goes on at once (no sweep)."""
    wb.set_pool("exports", slots=1, per_second=None)
    wb.register_workflow(keyed())
    first, second = (wb.start_workflow("w", {"tenant": "a"}) for _ in range(2))
    holder = attempt(wb, first)[0]
    wb.transition_activity(holder, Transition.RUNNING)
    wb.store.tables.client.call("DeleteItem", {
        "TableName": f"{wb.table_prefix}activity_exec",
        "Key": {"workflow_exec_id": {"S": first}, "activity_exec_id": {"S": holder}}})
    report = wb.nudge(first)
    assert report.released == ["exports~a#0"], report
    assert attempt(wb, second)[1] is A.QUEUED
    assert wb.store.pools.get_slot("exports~a", 0).holder == attempt(wb, second)[0]
    assert launched.doubled() == []


def test_raising_slots_lets_a_keys_waiters_in_by_the_sweep(
        wb: Whimbrel, launched: RecordingLauncher, clock: StepClock) -> None:
    """A key's waiters are not known to ``set_pool`` (it names no key): raised, they go
    in at their runs' reconcile visit (or the key's next end)."""
    wb.set_pool("exports", slots=1, per_second=None)
    wb.register_workflow(keyed())
    first, second = (wb.start_workflow("w", {"tenant": "a"}) for _ in range(2))
    assert [attempt(wb, wx)[1] for wx in (first, second)] == [A.QUEUED, A.READY]
    wb.set_pool("exports", slots=2, per_second=None)
    waited = 0.0
    while attempt(wb, second)[1] is A.READY and waited < 3600:
        clock.advance(30)
        waited += 30
        wb.sweep()
    assert attempt(wb, second)[1] is A.QUEUED
    assert waited <= 300  # 120 s here: its run's first reconcile visit (docs/definitions.md)
    assert launched.doubled() == []
