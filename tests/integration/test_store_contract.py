"""The store's contract (``StorePort``) on DynamoDB Local, on BOTH transports, and on the
in-memory twin: every conditional write has one winner and the loser sees the item as it
is now, creates are idempotent, the cold tables and signals round-trip, index keys are
derived from intent. The same tests run through the lean client and through botocore
behind the same seam, and through the twin (``memory``) behind it, so the twin cannot
drift from DynamoDB's semantics the store relies on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from whimbrel.contract.errors import StateConflict
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.records import (
    REMOVE,
    ActivityRecord,
    Change,
    DefinitionRecord,
    EventRecord,
    RejectionRecord,
    RequestRecord,
    SignalRecord,
    WorkflowRecord,
)
from whimbrel.contract.states import ActivityState as A
from whimbrel.contract.states import WorkflowState as W
from whimbrel.store import Store
from whimbrel.store.memory import MemoryDynamoDB

WX = "0b3c6c57-7f2e-5c55-9d1e-4a3b2f6a9b10"


@pytest.fixture(params=["lean", "botocore", pytest.param("memory", marks=pytest.mark.twin)])
def store(request: pytest.FixtureRequest, table_prefix: str) -> Iterator[Store]:
    if request.param == "memory":
        s = Store(table_prefix=table_prefix, transport=MemoryDynamoDB())
    else:
        s = Store(endpoint_url=request.getfixturevalue("ddb_endpoint"),
                  table_prefix=table_prefix, transport=request.param)
    assert s.transport.name == request.param
    s.create_tables()
    yield s
    s.delete_tables()


def workflow(**over: object) -> WorkflowRecord:
    fields: dict[str, object] = dict(
        workflow_exec_id=WX, workflow_name="wf", version=1, state=W.RUNNING,
        workflow_request_id="r1", input='{"a":1}', created_epoch=100.0, created_day="d",
        updated_epoch=100.0, check_epoch=130.0, history=(Change("RUNNING", 100.0, "me"),))
    fields.update(over)
    return WorkflowRecord(**fields)  # type: ignore[arg-type]


def activity(name: str = "A", state: A = A.READY, **over: object) -> ActivityRecord:
    fields: dict[str, object] = dict(
        workflow_exec_id=WX, activity_exec_id=activity_exec_id(WX, name, 1),
        activity_name=name, workflow_name="wf", attempt=1, state=state, workflow_version=1,
        created_epoch=100.0, updated_epoch=100.0)
    fields.update(over)
    return ActivityRecord(**fields)  # type: ignore[arg-type]


def test_workflow_create_once_move_once(store: Store) -> None:
    assert store.create_workflow(workflow())
    assert not store.create_workflow(workflow(state=W.FAILED))  # a replayed start
    got = store.get_workflow(WX)
    assert got is not None and got.state is W.RUNNING and got.check_shard is not None
    moved = store.move_workflow(WX, [W.RUNNING], W.COMPLETED, {"check_epoch": REMOVE},
                                now=200.0, actor="me", workflow_name="wf")
    assert moved.state is W.COMPLETED and moved.check_epoch is None
    assert moved.check_shard is None  # the reconcile index key left with it
    assert [h.state for h in moved.history] == ["RUNNING", "COMPLETED"]
    with pytest.raises(StateConflict) as info:
        store.move_workflow(WX, [W.RUNNING], W.FAILED, {}, now=201.0, actor="other",
                            workflow_name="wf")
    assert info.value.current is not None and info.value.current.state is W.COMPLETED
    assert not store.set_workflow(WX, {"error": "x"}, states=[W.RUNNING])
    assert store.batch_get_workflows([WX, "missing"])[0].state is W.COMPLETED


def test_activity_moves_have_one_winner_and_losers_see_the_item(store: Store) -> None:
    rec = activity(timer_epoch=150.0)
    assert store.create_activity(rec) and not store.create_activity(rec)
    aeid = rec.activity_exec_id
    assert store.get_activity(aeid).timer_shard is not None  # type: ignore[union-attr]
    ran = store.move_activity(aeid, A.READY, [A.RUNNING], {"output": '{"x":1}'}, now=110.0,
                              actor="w1")
    assert ran.state is A.RUNNING and ran.output == '{"x":1}'
    with pytest.raises(StateConflict) as info:
        store.move_activity(aeid, A.READY, [A.RUNNING], {}, now=111.0, actor="w2")
    assert info.value.current is not None and info.value.current.state is A.RUNNING
    assert store.try_set_activity(aeid, {"heartbeat_epoch": 120.0}, states=[A.RUNNING])
    assert not store.try_set_activity(aeid, {"heartbeat_epoch": 121.0}, states=[A.READY])
    assert [d.activity_exec_id for d in store.due_timers(200.0, 10)] == [aeid]
    assert [a.activity_exec_id for a in store.list_activities(WX, prefix="A:")] == [aeid]


def test_claimable_index_and_edges(store: Store) -> None:
    rec = activity("B")
    assert store.create_claimable(rec)
    hits = [h for shard in store.claim_shards for h in store.claimable(shard, "wf/B/", 5)]
    assert [h.activity_exec_id for h in hits] == [rec.activity_exec_id]
    store.put_dependencies(WX, "C", ["A", "B"])
    assert store.pending_dependencies(WX, "C", limit=None) == ["A", "B"]
    store.delete_dependency(WX, "C", "A")
    assert store.pending_dependencies(WX, "C") == ["B"]


def test_cold_tables_round_trip(store: Store) -> None:
    d = DefinitionRecord("wf", 1, '{"activities":[]}', 100.0, "first")
    assert store.cold.put_definition(d) and not store.cold.put_definition(d)
    assert store.cold.put_definition(DefinitionRecord("wf", 2, "{}", 101.0))
    assert store.cold.get_definition("wf", 1) == d
    assert store.cold.latest_definition("wf").version == 2  # type: ignore[union-attr]
    assert [r.version for r in store.cold.definition_versions("wf")] == [2, 1]
    assert store.cold.workflow_names() == ["wf"]
    assert len(list(store.cold.list_definitions())) == 2
    req = RequestRecord("r1", "wf", 100.0, version=1, input='{"a":1}', source="t")
    assert store.cold.put_request(req) and not store.cold.put_request(req)
    store.cold.mark_request("r1", {"outcome": "STARTED", "reason": "ok", "processed_epoch": 1.0})
    store.cold.expire_request("r1", 9e9)
    got = store.cold.get_request("r1")
    assert got is not None and got.outcome == "STARTED" and got.expires_epoch == 9e9
    assert got.input == '{"a":1}' and got.manual is False
    store.cold.mark_request("nope", {"outcome": "X"})  # a row that is gone is not revived
    assert store.cold.get_request("nope") is None
    ev = EventRecord("e1", activity_exec_id(WX, "A", 1), "COMPLETED", 100.0, output="1")
    assert store.cold.put_event(ev) and not store.cold.put_event(ev)
    store.cold.mark_event("e1", {"outcome": "APPLIED"})
    rej = RejectionRecord("2025-01-01", "x-1", "activity_event", "bad", "InvalidInput",
                          "{}", 100.0)
    store.cold.put_rejection(rej)
    assert store.cold.list_rejections("2025-01-01") == [rej]


def test_signals_and_notification_markers(store: Store) -> None:
    sig = SignalRecord(WX, "s1", "go", 100.0, payload='{"p":1}')
    assert store.signals.put_signal(sig) and not store.signals.put_signal(sig)
    assert store.signals.bind_signal(WX, "s1", "a1")
    assert not store.signals.bind_signal(WX, "s1", "a2")
    assert store.signals.release_signal(WX, "s1", "a1")
    assert store.signals.list_signals(WX) == [sig]
    from whimbrel.store.parts.notifications import Claim
    assert store.markers.claim_notification("ev", detail_type="t", workflow_exec_id=WX,
                                            now=1.0) is Claim.NEW
    store.markers.mark_notification_sent("ev", now=2.0)
    assert store.markers.claim_notification("ev", detail_type="t", workflow_exec_id=WX,
                                            now=3.0) is Claim.SENT


def test_every_request_is_metered(store: Store) -> None:
    store.meter.reset()
    store.create_workflow(workflow())
    store.get_workflow(WX)
    assert store.meter.calls == {"PutItem": 1, "GetItem": 1}
    assert store.meter.write_units[store.table_name("workflow_exec")] > 0
