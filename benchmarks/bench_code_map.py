"""A code workflow's ``ctx.map`` of 1,000, 10,000 and 100,000 no-op items (issue 26's
target), on DynamoDB Local and moto's S3: items per second, DynamoDB requests and units
per item (flat as the map grows: a map step's items chain in lanes as a DAG map's, and
the code's history holds the one step), and the largest item any table holds at the end
(under DynamoDB's 400 KB: the list and the outputs are in the payload bucket).

    python -m benchmarks --only code_map      (--quick: 200 and 1,000 items)
    WHIMBREL_BENCH_CODE_MAP_SIZES=1000,10000 python -m benchmarks --only code_map
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import boto3

from benchmarks.bench_payload_map import local_bucket
from benchmarks.code_shapes import code_map
from benchmarks.common import Ctx, md_table, wait_end
from whimbrel import Whimbrel
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.testing import fresh_table_prefix

WORKERS = 32  # activity threads of the client running the items
LANES = 200  # the map's max_concurrency
READS = ("GetItem", "Query", "BatchGetItem", "Scan", "ExecuteStatement")
#: DynamoDB's largest item.
ITEM_LIMIT = 400 * 1024


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size by DynamoDB's rules (attribute names plus values; numbers about
    one byte per two digits, containers 3 bytes plus 1 per element)."""
    return sum(len(name.encode()) + _value_bytes(value) for name, value in item.items())


def _value_bytes(value: dict[str, Any]) -> int:
    kind, v = next(iter(value.items()))
    if kind == "S":
        return len(str(v).encode())
    if kind == "N":
        return (len(str(v).strip("-").replace(".", "")) + 1) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_bytes(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(_value_bytes(x) + 1 for x in v)
    if kind in ("SS", "NS"):
        return sum(len(str(x).encode()) for x in v)
    return len(str(v).encode())  # B, BS: base64 text, an upper bound


def largest_items(wb: Whimbrel, endpoint: str) -> dict[str, Any]:
    """The largest item of each execution table (a Scan: the benchmark's, no engine
    path's), by DynamoDB's size rules."""
    out: dict[str, Any] = {}
    tables = wb.store.tables
    pages = boto3.client("dynamodb", endpoint_url=endpoint).get_paginator("scan")
    for logical, name in (("workflow_exec", tables.workflow_table),
                          ("activity_exec", tables.activity_table),
                          ("map_item", tables.item_table)):
        biggest, rows = 0, 0
        for page in pages.paginate(TableName=name):
            for item in page.get("Items", []):
                rows += 1
                biggest = max(biggest, item_bytes(item))
        out[logical] = {"rows": rows, "largest_bytes": biggest}
    return out


def one_map(wb: Whimbrel, items: int) -> dict[str, Any]:
    wb.meter.reset()
    decisions = wb.engine.feature(CodeRuns).decisions
    t0 = time.time()
    wx = wb.start_workflow("code_map", {"items": items, "lanes": LANES},
                           request_id=f"bench-code-map-{items}")
    run = wait_end(wb, wx, timeout=6 * 3600, poll=1.0)
    wall = float(run.ended_epoch or 0) - t0
    assert run.state.value == "COMPLETED", run.error
    assert run.output == {"items": items, "in_order": True}, run.output
    m = wb.meter
    reads = sum(m.calls[op] for op in READS)
    writes = sum(v for op, v in m.calls.items() if op not in READS)
    return {"items": items, "wall_s": wall, "items_per_s": items / wall,
            "reads_per_item": reads / items, "writes_per_item": writes / items,
            "rru_per_item": m.total_read_units / items,
            "wru_per_item": m.total_write_units / items,
            "decisions": wb.engine.feature(CodeRuns).decisions - decisions,
            "requests": dict(m.calls), "s3_requests": dict(m.s3_requests),
            "steps": [a.activity_name for a in run.activities]}


def run(ctx: Ctx) -> dict[str, Any]:
    chosen = os.environ.get("WHIMBREL_BENCH_CODE_MAP_SIZES")
    sizes = [int(s) for s in chosen.split(",")] if chosen else \
        ctx.size([1_000, 10_000, 100_000], [200, 1_000])
    with local_bucket() as bucket, ctx.client(fresh_table_prefix(), payload_bucket=bucket,
                                              max_workers=WORKERS) as wb:
        wb.register_workflow(code_map)
        one_map(wb, 50)  # warm-up
        curve = [one_map(wb, n) for n in sizes]
        largest = largest_items(wb, ctx.endpoint)
    return {"lanes": LANES, "workers": WORKERS, "curve": curve, "largest": largest,
            "load": round(os.getloadavg()[1], 1)}


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    rows = [[f"{c['items']:,}", f"{c['wall_s']:.0f}", f"{c['items_per_s']:.0f}",
             f"{c['reads_per_item']:.3f}", f"{c['writes_per_item']:.3f}",
             f"{c['rru_per_item']:.3f}", f"{c['wru_per_item']:.3f}", c["decisions"],
             ", ".join(c["steps"])] for c in result["curve"]]
    big = result["curve"][-1]
    largest = result["largest"]
    top = max(v["largest_bytes"] for v in largest.values())
    first, mid = result["curve"][0], result["curve"][-2 if len(result["curve"]) > 1 else -1]
    flat = (f"from {mid['items']:,} to {big['items']:,} items, {mid['reads_per_item']:.2f} → "
            f"{big['reads_per_item']:.2f} reads and {mid['writes_per_item']:.2f} → "
            f"{big['writes_per_item']:.2f} writes per item; the {first['items']:,}-item run "
            f"({first['reads_per_item']:.2f} and {first['writes_per_item']:.2f}) carries more "
            "of the fixed costs (the start, the decisions, the map's end and the final "
            "listing).")
    top_note = ("The largest is a map step's row (`activity_exec`) whose list and outputs "
                "stayed inline, under the 16 KB threshold; past it they are references to "
                "S3. An item's row holds its element, its output and its history: a few "
                "hundred bytes whatever the map's size."
                if largest.get("activity_exec", {}).get("largest_bytes") == top else "")
    return {"table": md_table(["items", "wall (s)", "items / s", "reads / item",
                               "writes / item", "RRU / item", "WRU / item", "decisions",
                               "the run's steps"], rows),
            "largest": md_table(["table", "rows at the end", "largest item (bytes)"],
                                [[k, f"{v['rows']:,}", f"{v['largest_bytes']:,}"]
                                 for k, v in largest.items()]),
            "top": f"{top:,}", "under": "under" if top < ITEM_LIMIT else "**over**",
            "flat": flat, "top_note": top_note,
            "lanes": result["lanes"], "workers": result["workers"],
            "load": result.get("load", "?"), "big": big,
            "ops": ", ".join(f"{op} {k:,}" for op, k in
                             sorted(big["requests"].items(), key=lambda kv: -kv[1])),
            "s3": ", ".join(f"{op} {k:,}" for op, k in sorted(big["s3_requests"].items()))
            or "none"}
