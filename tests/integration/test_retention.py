"""Tables that don't grow forever (issue 11, part 3): every row of a finished run carries
``expires_epoch``, TTL is on for every table, and nothing a live run needs expires."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import RetryPolicy, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.contract.errors import InvalidInput
from whimbrel.settings import DAY_SECONDS, Settings
from whimbrel.store import specs
from whimbrel.testing import StepClock

DAY = DAY_SECONDS
FAN_IN = WorkflowDefinition("fanin", (Act("a"), Act("b"), Act("join", ("a", "b"))))


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


def client(endpoint: str, prefix: str, clock: StepClock, **kw: object) -> Whimbrel:
    wb = Whimbrel(endpoint_url=endpoint, table_prefix=prefix, clock=clock, **kw)  # type: ignore[arg-type]
    wb.create_tables()
    return wb


@pytest.fixture
def wb(ddb_endpoint: str, table_prefix: str, clock: StepClock) -> Iterator[Whimbrel]:
    c = client(ddb_endpoint, table_prefix, clock)
    yield c
    c.close()
    c.store.delete_tables()


def run_all(wb: Whimbrel, name: str, clock: StepClock, fail: str | None = None) -> str:
    wx = wb.start_workflow(name, request_id=f"{name}-{clock()}")
    while (act := wb.claim(workflow_name=name)) is not None:
        clock.advance(5)
        verb = "FAILED" if act.activity_name == fail else "COMPLETED"
        wb.transition_activity(act.activity_exec_id, verb, error="no")
    return wx


def edges(wb: Whimbrel, wx: str) -> list[str]:
    return [e for down in ("join", "__end__") for e in wb.store.pending_dependencies(
        wx, down, limit=None)]


def test_every_row_of_a_finished_run_expires(wb: Whimbrel, clock: StepClock) -> None:
    wb.register_workflow(FAN_IN)
    wx = run_all(wb, "fanin", clock)
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.COMPLETED and wf.ended_epoch is not None
    end = wf.ended_epoch + 30 * DAY
    assert wf.expires_epoch == end
    for act in wf.activities:
        assert act.expires_epoch is not None and end <= act.expires_epoch <= end + DAY
    request = wb.store.cold.get_request(wf.workflow_request_id)
    assert request is not None and request.expires_epoch is not None
    assert end <= request.expires_epoch <= end + DAY
    assert edges(wb, wx) == []


def test_a_failed_runs_leftover_edges_are_deleted(wb: Whimbrel, clock: StepClock) -> None:
    wb.register_workflow(FAN_IN)
    wx = run_all(wb, "fanin", clock, fail="a")
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.FAILED and wf.expires_epoch is not None
    assert edges(wb, wx) == []  # b's edge to join was never consumed
    assert all(a.expires_epoch is not None for a in wf.activities)


def test_ttl_is_on_for_every_table(wb: Whimbrel) -> None:
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    for spec in specs.TABLES:
        ttl = ddb.describe_time_to_live(TableName=spec.table_name(wb.table_prefix))
        assert ttl["TimeToLiveDescription"] == {"TimeToLiveStatus": "ENABLED",
                                                "AttributeName": "expires_epoch"}, spec


def test_retention_is_configurable_globally_and_per_definition(
        ddb_endpoint: str, table_prefix: str, clock: StepClock) -> None:
    wb = client(ddb_endpoint, table_prefix, clock, retention_days=7)
    try:
        wb.register_workflow(WorkflowDefinition("global", (Act("x"),)))
        wb.register_workflow(WorkflowDefinition("short", (Act("x"),), retention_days=2))
        wb.register_workflow(WorkflowDefinition("keep", (Act("x"),), retention_days=None))
        for name, days in (("global", 7), ("short", 2)):
            wf = wb.get_workflow(run_all(wb, name, clock))
            assert wf.ended_epoch is not None and wf.expires_epoch == wf.ended_epoch + days * DAY
        kept = wb.get_workflow(run_all(wb, "keep", clock))
        assert kept.state is WorkflowState.COMPLETED
        assert kept.expires_epoch is None and kept.activity("x").expires_epoch is None
        request = wb.store.cold.get_request(kept.workflow_request_id)
        assert request is not None and request.expires_epoch is None
    finally:
        wb.close()
        wb.store.delete_tables()


def test_retention_from_the_environment() -> None:
    assert Settings.from_env({}).retention_days == 30.0
    assert Settings.from_env({"WHIMBREL_RETENTION_DAYS": "7.5"}).retention_days == 7.5
    assert Settings.from_env({"WHIMBREL_RETENTION_DAYS": "none"}).retention_days is None
    with pytest.raises(InvalidInput, match="WHIMBREL_RETENTION_DAYS"):
        Settings.from_env({"WHIMBREL_RETENTION_DAYS": "a month"})
    with pytest.raises(InvalidInput, match="at least"):
        Settings.from_env({"WHIMBREL_RETENTION_DAYS": "0"})


def test_nothing_a_live_run_needs_expires(wb: Whimbrel, clock: StepClock) -> None:
    wb.register_workflow(WorkflowDefinition("long", (
        Act("first"), Act("second", ("first",), retry=RetryPolicy(max_attempts=1)))))
    wx = wb.start_workflow("long")
    first = wb.claim(workflow_name="long")
    assert first is not None
    wb.transition_activity(first.activity_exec_id, "COMPLETED")
    second = wb.claim(workflow_name="long")
    assert second is not None  # and it runs for weeks, with no heartbeat timeout
    expiry = wb.get_activity(first.activity_exec_id).expires_epoch
    assert expiry is not None
    # A day before the row would expire, the reconciler's visit pushes it out.
    wb.sweep(clock.advance(expiry - clock() - DAY + 60))
    pushed = wb.get_activity(first.activity_exec_id).expires_epoch
    assert pushed is not None and pushed >= clock() + 29 * DAY
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.RUNNING and wf.expires_epoch is None
    # When it finally ends, the old row carries the run's end + retention.
    wb.transition_activity(second.activity_exec_id, "COMPLETED")
    wf = wb.get_workflow(wx)
    assert wf.ended_epoch is not None
    assert (wf.activity("first").expires_epoch or 0) >= wf.ended_epoch + 30 * DAY
