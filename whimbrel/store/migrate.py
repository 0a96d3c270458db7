"""``whimbrel tables migrate``: move runs written before issue 19 onto the write-sharded
listing keys (docs/deploy.md, "Upgrading").

Before issue 19 a run's ``by_day`` key (``created_day``) was its UTC day and its
``by_name_state`` key ``<name>#<state>``; now they carry a write shard
(``specs.by_day_key``, ``specs.name_state_key``). No index, attribute name or type
changed, so a stack updates in place; the engine runs on an unmigrated table (the
sparse indexes' shards ``"0".."3"`` are among today's, and a run's next state change
moves its ``name_state``), only listings miss the old runs' entries until this
backfill rewrites them. It is the one Scan of the project: paged, idempotent (a run
already on its shard is left alone) and resumable (each page returns the position to
go on from). Rejections need nothing: their listing also reads the unsharded day.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from whimbrel.contract.states import WorkflowState
from whimbrel.store.codec import Expression
from whimbrel.store.errors import ConditionLost
from whimbrel.store.keys import day_key, name_state_key, state_key
from whimbrel.store.store import Store

__all__ = ["MigrationReport", "migrate_index_keys"]


@dataclass
class MigrationReport:
    scanned: int = 0
    rewritten: int = 0
    #: Runs that changed while the migration read them (their new write put them on
    #: their shard, or an old process wrote the old shape again: run it once more).
    changed_meanwhile: list[str] = field(default_factory=list)
    #: Where a stopped migration goes on (``start_key=``); None once it is done.
    last_key: dict[str, Any] | None = None


def _wanted(item: dict[str, Any]) -> dict[str, str]:
    """The listing keys ``item`` should have and lacks (nothing when it has them)."""
    wx = item["workflow_exec_id"]["S"]
    out: dict[str, str] = {}
    if "created_day" in item and item["created_day"]["S"] != day_key(wx):
        out["created_day"] = day_key(wx)
    name, state = item.get("workflow_name", {}).get("S"), item.get("state", {}).get("S")
    if name and state in {s.value for s in WorkflowState}:
        want = name_state_key(name, state, wx)
        if item.get("name_state", {}).get("S") != want:
            out["name_state"] = want
    if state in {s.value for s in WorkflowState}:
        by_state = state_key(state, wx)  # issue 29's by_state index
        if item.get("state_key", {}).get("S") != by_state:
            out["state_key"] = by_state
    return out


def migrate_index_keys(store: Store, *, page_size: int = 100,
                       start_key: dict[str, Any] | None = None, max_pages: int | None = None,
                       progress: Callable[[MigrationReport], None] | None = None,
                       ) -> MigrationReport:
    """Rewrite every run's listing keys to their write shards (see the module).

    ``start_key`` resumes a migration that stopped (``MigrationReport.last_key``);
    ``max_pages`` stops after that many Scan pages (a resumable step)."""
    report = MigrationReport()
    table = store.table_name("workflow_exec")
    params: dict[str, Any] = {
        "TableName": table, "Limit": page_size, "ConsistentRead": True,
        "ProjectionExpression": "workflow_exec_id, workflow_name, #s, name_state, state_key, "
                                "created_day",
        "ExpressionAttributeNames": {"#s": "state"}}
    key = start_key
    pages = 0
    while True:
        if key:
            params["ExclusiveStartKey"] = key
        page = store.tables.client.call("Scan", params)
        for item in page.get("Items", []):
            report.scanned += 1
            changes = _wanted(item)
            if changes:
                _rewrite(store, table, item, changes, report)
        key = page.get("LastEvaluatedKey")
        pages += 1
        report.last_key = key
        if progress:
            progress(report)
        if not key or (max_pages is not None and pages >= max_pages):
            return report


def _rewrite(store: Store, table: str, item: dict[str, Any], changes: dict[str, str],
             report: MigrationReport) -> None:
    expr = Expression()
    update = expr.update(changes)
    # Only the image we read: the item still exists, in the state we read, with the keys
    # we read (a state change since wrote its own name_state, which wins).
    conds = [expr.equals("state", item["state"]["S"]) if "state" in item
             else expr.exists("workflow_exec_id")]
    for attr in ("name_state", "state_key", "created_day"):
        conds.append(expr.equals(attr, item[attr]["S"]) if attr in item
                     else expr.missing(attr))
    wx = item["workflow_exec_id"]["S"]
    try:
        store.tables.client.call("UpdateItem", expr.params(
            TableName=table, Key={"workflow_exec_id": {"S": wx}},
            UpdateExpression=update, ConditionExpression=" AND ".join(conds)))
    except ConditionLost:
        report.changed_meanwhile.append(wx)
        return
    report.rewritten += 1
