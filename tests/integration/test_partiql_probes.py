"""The sweep and claims ask all the shards of a sparse index in one request (a PartiQL
``SELECT … WHERE <shard> IN [...]``, ``store/plumbing.py`` ``select_in``), on DynamoDB
Local: an idle pass is one request per index; what is due is still found in every
shard; a store whose PartiQL is refused (an IAM policy without
``dynamodb:PartiQLSelect``, which DynamoDB Local cannot enforce: the refusal is
injected at the transport) reads shard by shard from then on and loses nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from test_sweep_leases import _silent

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import Whimbrel, WorkflowDefinition
from whimbrel.contract.errors import StoreError
from whimbrel.store import plumbing
from whimbrel.testing import StepClock

CLOCK = StepClock


@pytest.fixture
def requests(wb: Whimbrel) -> Iterator[Counter[str]]:
    """Every request the store sends, by operation (and index for Queries)."""
    seen: Counter[str] = Counter()

    def observe(operation: str, params: dict[str, Any], _resp: Any) -> None:
        seen[f"{operation} {params.get('IndexName', '')}".strip()] += 1
    wb.store.tables.client.observers.append(observe)
    yield seen
    wb.store.tables.client.observers.remove(observe)


def test_an_idle_pass_asks_each_index_once(wb: Whimbrel, clock: StepClock,
                                           requests: Counter[str]) -> None:
    report = wb.sweep(clock())
    assert (report.timed_out, report.errors) == ([], [])
    # timers of activity_exec and of map_item, reconcile, due_schedules, pool_checks
    assert requests == Counter({"ExecuteStatement": 5}), requests


def test_what_is_due_in_any_shard_is_found(wb: Whimbrel, clock: StepClock,
                                           requests: Counter[str]) -> None:
    ids = _silent(wb, clock, 40)
    requests.clear()
    report = wb.sweep(clock())
    assert sorted(report.timed_out) == sorted(ids)
    assert all(wb.get_activity(a).state is A.TIMED_OUT for a in ids)
    # The busy shards' pages are Queries of those shards only (of both tables for the 8
    # that map_item has too): no per-shard probe.
    busy = len(report.leases)
    assert busy > 8 and requests["Query timers"] <= busy + 8, requests


def test_more_than_a_page_due_is_asked_shard_by_shard(
        wb: Whimbrel, clock: StepClock, requests: Counter[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plumbing, "DUE_KEYS_LIMIT", 10)  # a page of 10, not 100
    ids = _silent(wb, clock, 20)
    requests.clear()
    report = wb.sweep(clock())
    assert sorted(report.timed_out) == sorted(ids)
    assert requests["Query timers"] > 32, requests  # the per-shard probe, then the pages


def test_a_store_without_partiql_reads_shard_by_shard(wb: Whimbrel, clock: StepClock,
                                                      requests: Counter[str]) -> None:
    ids = _silent(wb, clock, 6)
    wb.register_workflow(WorkflowDefinition("waiting", (Act("w"),)))  # claimed below
    queued = wb.start_workflow("waiting")
    refused: list[str] = []
    client = wb.store.tables.client
    call = client.call

    def no_partiql(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if operation == "ExecuteStatement":
            refused.append(params["Statement"])
            raise StoreError("ExecuteStatement: AccessDeniedException: not authorized to "
                             "perform dynamodb:PartiQLSelect", aws_code="AccessDeniedException",
                             retryable=False)
        return call(operation, params)
    client.call = no_partiql  # type: ignore[method-assign]
    try:
        requests.clear()
        report = wb.sweep(clock())
        first = len(refused)  # the pass's probes, sent at once: refused before it knew
        claimed = wb.claim(workflow_name="waiting")
        assert wb.sweep(clock()).timed_out == []
    finally:
        client.call = call  # type: ignore[method-assign]
    assert sorted(report.timed_out) == sorted(ids) and report.errors == []
    assert claimed is not None and claimed.workflow_exec_id == queued
    assert 1 <= first <= 5 and len(refused) == first  # then never asked again
    assert wb.store.tables.partiql is False
    assert requests["Query timers"] >= 2 * 32, requests  # every shard, twice
