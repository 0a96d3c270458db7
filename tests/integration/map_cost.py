"""What a map costs on DynamoDB Local: writes per item, the most writes any single item
receives (no hot item), units, wall time. Used by ``test_maps.py``, which asserts the
write counts; run it alone to print them::

    .venv/bin/python tests/integration/map_cost.py 1000 20

The "Maps" section of docs/benchmarks.md is the ``maps`` benchmark
(``benchmarks/bench_maps.py``), which counts the same writes through the billing proxy.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.dataflow import split_item
from whimbrel.contract.ids import parse_activity_exec_id


class WriteCounter:
    """Counts the writes each item (table row) receives, from the store's requests."""

    def __init__(self) -> None:
        self.writes: Counter[str] = Counter()
        self.lost: Counter[str] = Counter()  # conditional writes that lost
        self._lock = threading.Lock()

    def __call__(self, operation: str, params: dict[str, Any],
                 response: dict[str, Any] | None) -> None:
        keys = list(_keys(operation, params))
        with self._lock:
            for key in keys:
                (self.writes if response is not None else self.lost)[key] += 1


def _ident(attrs: dict[str, Any]) -> str:
    def text(name: str) -> str:
        return str(attrs[name]["S"])
    if "activity_exec_id" in attrs:
        return "activity " + text("activity_exec_id")
    if "dependency_key" in attrs:
        return f"edge {text('dependency_key')}/{text('upstream')}"
    if "part" in attrs:  # a large input, kept apart from the run's item
        return f"data {text('workflow_exec_id')}/{text('part')}"
    return "workflow " + text("workflow_exec_id")


#: The run's own tables: the store's other requests (the request trace row, a Simple API
#: row's marking) are no writes to the run's items.
_RUN_TABLES = ("workflow_exec", "workflow_exec_data", "activity_exec", "map_item",
               "activity_exec_dependency")


def _keys(operation: str, params: dict[str, Any]) -> list[str]:
    table = str(params.get("TableName", ""))
    if "TableName" in params and not table.endswith(_RUN_TABLES):
        return []
    if operation == "PutItem":
        return [_ident(params["Item"])]
    if operation in ("UpdateItem", "DeleteItem"):
        return [_ident(params["Key"])]
    if operation == "BatchWriteItem":
        return [_ident(r.get("PutRequest", {}).get("Item") or r["DeleteRequest"]["Key"])
                for reqs in params["RequestItems"].values() for r in reqs]
    return []


@dataclass
class MapCost:
    items: int
    lanes: int
    seconds: float
    item_writes: int
    most_item_writes: int
    map_row_writes: int
    workflow_writes: int
    edge_writes: int
    most_writes_any_row: int
    write_units: float
    read_units: float

    @property
    def writes_per_item(self) -> float:
        return self.item_writes / self.items

    def table(self) -> str:
        rows = [
            ("items / max_concurrency", f"{self.items} / {self.lanes}"),
            ("wall time, start to COMPLETED (s)", f"{self.seconds:.1f}"),
            ("writes per item (its rows: create, RUNNING, COMPLETED)",
             f"{self.writes_per_item:.2f}"),
            ("most writes to any one item", str(self.most_item_writes)),
            ("lane edges written (put + delete)", str(self.edge_writes)),
            ("writes to the map's own row", str(self.map_row_writes)),
            ("writes to the workflow item", str(self.workflow_writes)),
            ("most writes to any one row of the run", str(self.most_writes_any_row)),
            ("WRU / RRU per item (all tables, metered)",
             f"{self.write_units / self.items:.2f} / {self.read_units / self.items:.2f}"),
        ]
        return "\n".join(f"| {k} | {v} |" for k, v in [("measure", "value"), ("---", "---"),
                                                          *rows])


def measure(wb: Whimbrel, items: int, lanes: int, name: str = "map_cost") -> MapCost:
    """Run a 1 -> ``items`` map of no-op python items once and count its writes."""
    wb.register_workflow(WorkflowDefinition(name, (
        ActivityDefinition("each", launcher=LauncherSpec.python("wb_data_activities:noop"),
                           map_over="$input.xs", max_concurrency=lanes),)))
    counter = WriteCounter()
    wb.store.tables.client.observers.append(counter)
    wb.meter.reset()
    began = time.monotonic()
    wx = wb.start_workflow(name, {"xs": list(range(items))})
    wf = wb.wait(wx, timeout=600, poll_seconds=0.1)
    seconds = time.monotonic() - began
    wb.store.tables.client.observers.remove(counter)
    assert wf.state.value == "COMPLETED", wf.state
    per_item: Counter[str] = Counter()
    node = workflow = edges = 0
    for key, n in counter.writes.items():
        kind, _, ident = key.partition(" ")
        if kind == "activity":
            name_ = parse_activity_exec_id(ident).activity_name
            if split_item(name_)[1] is not None:
                per_item[split_item(name_)[0] + str(split_item(name_)[1])] += n
            else:
                node += n
        elif kind == "edge":
            edges += n
        elif ident == wx:
            workflow += n
    return MapCost(items, lanes, seconds, sum(per_item.values()), max(per_item.values()),
                   node, workflow, edges, max(counter.writes.values()),
                   wb.meter.total_write_units, wb.meter.total_read_units)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # wb_data_activities
    from whimbrel.local.credentials import supply_local_credentials
    from whimbrel.testing import dynamodb_local, fresh_table_prefix

    n, c = (int(a) for a in (sys.argv[1:] or ["1000", "20"])[:2])
    with dynamodb_local() as ddb:
        supply_local_credentials(ddb.endpoint_url)
        with Whimbrel(endpoint_url=ddb.endpoint_url, table_prefix=fresh_table_prefix(),
                      max_workers=32) as client:
            client.create_tables()
            print(measure(client, n, c).table())
