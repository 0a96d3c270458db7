"""A start without a version reads one of the name's latest-version copies, not the
name's partition (issue 19: the definition read was the key that capped one definition
at 3,000 starts/s). On DynamoDB Local: which keys a start reads, how a register moves the
copies, and every way a copy can be missing or ahead of the versions."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.records import DefinitionRecord
from whimbrel.store import specs
from whimbrel.store.keys import latest_key


def _defn(name: str, activity: str) -> WorkflowDefinition:
    return WorkflowDefinition(name, (ActivityDefinition(activity,
                                                        launcher=LauncherSpec.external()),))


def _copies(wb: Whimbrel, name: str) -> list[int | None]:
    table = specs.WORKFLOW_DEFINITION.table_name(wb.table_prefix)
    out: list[int | None] = []
    for k in range(specs.LATEST_COPIES):
        item = wb.store.botocore.get_item(TableName=table, Key={
            "workflow_name": {"S": latest_key(name, k)}, "version": {"N": "0"}}).get("Item")
        out.append(int(item["latest"]["N"]) if item else None)
    return out


def _activity_of(wb: Whimbrel, wx: str) -> str:
    return wb.get_workflow(wx).activities[0].activity_name


def test_starts_read_the_copies_spread_not_the_names_partition(
        wb: Whimbrel, ddb_endpoint: str) -> None:
    wb.register_workflow(_defn("orders", "v1"))
    assert _copies(wb, "orders") == [1] * specs.LATEST_COPIES
    # Another process (its own cache): it reads a copy per start.
    other = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=wb.table_prefix)
    table = specs.WORKFLOW_DEFINITION.table_name(wb.table_prefix)
    keys: Counter[str] = Counter()

    def observe(op: str, params: dict[str, Any], resp: dict[str, Any]) -> None:
        if params.get("TableName") == table:
            key = params.get("Key", {}).get("workflow_name", {}).get("S")
            keys[f"{op} {key}" if key else op] += 1

    other.store.transport.observers.append(observe)
    try:
        for _ in range(64):
            assert _activity_of(other, other.start_workflow("orders")) == "v1"
    finally:
        other.store.transport.observers.remove(observe)
        other.close()
    # One GetItem of a copy per start; the name's partition once, at the process's
    # first start (its once-a-minute check, which also gives the version to parse).
    assert keys["GetItem orders#latest#00"] <= 20  # 64 starts over 16 copies
    copy_reads = {k: n for k, n in keys.items() if "#latest#" in k}
    assert sum(copy_reads.values()) == 64
    assert len(copy_reads) > specs.LATEST_COPIES // 2, keys
    assert keys["Query"] == 1, keys
    assert keys["GetItem orders"] == 0, keys


def test_a_register_moves_every_copy_and_the_next_start_anywhere_uses_it(
        wb: Whimbrel, ddb_endpoint: str) -> None:
    other = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=wb.table_prefix)
    try:
        wb.register_workflow(_defn("orders", "v1"))
        assert _activity_of(other, other.start_workflow("orders")) == "v1"
        assert wb.register_workflow(_defn("orders", "v2")) == 2
        assert _copies(wb, "orders") == [2] * specs.LATEST_COPIES
        for _ in range(20):  # whichever copy a start reads
            assert _activity_of(other, other.start_workflow("orders")) == "v2"
        # The same text again is the same version and moves nothing.
        assert wb.register_workflow(_defn("orders", "v2")) == 2
        assert _copies(wb, "orders") == [2] * specs.LATEST_COPIES
    finally:
        other.close()


def test_copies_ahead_of_the_versions_fall_back_until_the_next_register(
        wb: Whimbrel) -> None:
    """A register that died between its copies and its version: the copies name a
    version that does not exist; starts use the latest that does."""
    wb.register_workflow(_defn("orders", "v1"))
    wb.store.cold.point_latest("orders", 2)  # ... and died before writing version 2
    assert _copies(wb, "orders") == [2] * specs.LATEST_COPIES
    for _ in range(5):
        assert _activity_of(wb, wb.start_workflow("orders")) == "v1"
    assert [d.version for d in wb.store.cold.definition_versions("orders")] == [1]
    # The next register takes the number the dead one had.
    assert wb.register_workflow(_defn("orders", "v2")) == 2
    assert _activity_of(wb, wb.start_workflow("orders")) == "v2"


def test_copies_only_rise(wb: Whimbrel) -> None:
    wb.register_workflow(_defn("orders", "v1"))
    wb.register_workflow(_defn("orders", "v2"))
    wb.store.cold.point_latest("orders", 1)  # a slow register of version 1, landing late
    assert _copies(wb, "orders") == [2] * specs.LATEST_COPIES
    assert _activity_of(wb, wb.start_workflow("orders")) == "v2"


def test_a_table_from_before_the_copies_gets_them_at_the_first_start(
        wb: Whimbrel, ddb_endpoint: str) -> None:
    wb.register_workflow(_defn("orders", "v1"))
    table = specs.WORKFLOW_DEFINITION.table_name(wb.table_prefix)
    for k in range(specs.LATEST_COPIES):  # as a register before this change left it
        wb.store.botocore.delete_item(TableName=table, Key={
            "workflow_name": {"S": latest_key("orders", k)}, "version": {"N": "0"}})
    assert _copies(wb, "orders") == [None] * specs.LATEST_COPIES
    fresh = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=wb.table_prefix)
    try:
        assert _activity_of(fresh, fresh.start_workflow("orders")) == "v1"
    finally:
        fresh.close()
    assert _copies(wb, "orders") == [1] * specs.LATEST_COPIES


def test_listings_never_show_a_copy(wb: Whimbrel) -> None:
    wb.register_workflow(_defn("orders", "v1"))
    wb.register_workflow(_defn("orders", "v2"))
    wb.register_workflow(_defn("billing", "b1"))
    assert sorted((d.workflow_name, d.version) for d in wb.store.cold.list_definitions()) == [
        ("billing", 1), ("orders", 1), ("orders", 2)]
    assert wb.store.cold.workflow_names() == ["billing", "orders"]
    assert [d.version for d in wb.store.cold.definition_versions("orders")] == [2, 1]


def test_a_version_written_without_the_copies_is_seen_at_the_next_check(
        wb: Whimbrel) -> None:
    """A register by a library from before the copies (a rolling upgrade) writes the
    version alone: a process sees it when its once-a-minute check of the name comes
    due, and raises the copies for everyone."""
    wb.register_workflow(_defn("orders", "v1"))
    assert _activity_of(wb, wb.start_workflow("orders")) == "v1"  # checked just now
    old = _defn("orders", "v2")
    assert wb.store.cold.put_definition(DefinitionRecord("orders", 2, old.to_json(), 0.0))
    assert _activity_of(wb, wb.start_workflow("orders")) == "v1"  # within the minute
    assert _copies(wb, "orders") == [1] * specs.LATEST_COPIES
    wb.engine.latest.recheck_seconds = 0.0  # the minute has passed
    assert _activity_of(wb, wb.start_workflow("orders")) == "v2"
    assert _copies(wb, "orders") == [2] * specs.LATEST_COPIES


def test_registers_at_once_leave_every_copy_on_the_last_version(
        wb: Whimbrel, ddb_endpoint: str) -> None:
    """Four processes register four texts of one name at once: four versions, no gap,
    and every copy (and so every start) on the highest of them."""
    clients = [Whimbrel(endpoint_url=ddb_endpoint, table_prefix=wb.table_prefix)
               for _ in range(4)]
    gate = threading.Barrier(len(clients))

    def register(i: int) -> int:
        gate.wait()
        return clients[i].register_workflow(_defn("orders", f"t{i}"))

    try:
        with ThreadPoolExecutor(len(clients)) as pool:
            versions = list(pool.map(register, range(len(clients))))
    finally:
        for client in clients:
            client.close()
    assert sorted(versions) == [1, 2, 3, 4]
    assert _copies(wb, "orders") == [4] * specs.LATEST_COPIES
    last = f"t{versions.index(4)}"
    for _ in range(5):
        assert _activity_of(wb, wb.start_workflow("orders")) == last
