"""A map of 1 -> N no-op items on the Full Logic path: wall time, and where its writes go
(every request through the billing proxy): per item, lane edges, the map's own row, the
workflow item, and the most writes any one row receives (which must stay O(1))."""

from __future__ import annotations

import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.billing import Meter, Request, summarize
from benchmarks.common import Ctx, bars, md_table, median, wait_end
from benchmarks.shapes import NOOP
from whimbrel import ActivityDefinition, Whimbrel, WorkflowDefinition
from whimbrel.testing import fresh_table_prefix

WORKERS = 32  # activity threads of the client running the items


def configs(ctx: Ctx) -> list[tuple[int, int]]:
    """(items, max_concurrency) of each map measured."""
    sizes: list[int] = ctx.size([1, 10, 100, 1000], [1, 10, 100])
    return [(n, 20) for n in sizes] + ([] if ctx.quick else [(1000, 1000)])


def _seconds(wb: Whimbrel, view: Whimbrel, name: str, items: int) -> float:
    """Start to the end stamp on the workflow item (engine clock) of one map run."""
    t0 = time.time()
    wx = wb.start_workflow(name, {"xs": list(range(items))})
    return float(wait_end(view, wx, poll=0.05).ended_epoch or 0) - t0


def _kind(row: str) -> str:
    """What a written row is to the map: ``activity_exec`` rows are ``wx:name:attempt``
    and an item's name is ``<map>#<index>``."""
    table, key = row.split(" ", 1)
    if table == "activity_exec":
        return "item" if "#" in key.rsplit(":", 2)[1] else "map row"
    return {"activity_exec_dependency": "lane edge", "workflow_exec": "workflow item"}.get(
        table, table)


def _writes(requests: list[Request]) -> dict[str, Any]:
    """Successful writes by kind of row, the most to one row, the units of the run."""
    rows = Counter(i for r in requests if r.ok for i in r.items)
    kinds: Counter[str] = Counter()
    for row, n in rows.items():
        kinds[_kind(row)] += n
    row, most = rows.most_common(1)[0]
    s = summarize(requests)
    return {"item_writes": kinds["item"], "edge_writes": kinds["lane edge"],
            "most_item_writes": max(n for r, n in rows.items() if _kind(r) == "item"),
            "map_row_writes": kinds["map row"], "workflow_writes": kinds["workflow item"],
            "most_row_writes": most, "most_row": row,
            "lost": Counter(_kind(i) for r in requests if not r.ok for i in r.items),
            "wru": s["wru_total"], "rru": s["rru_total"], "rru_by_table": s["rru"]}


def run(ctx: Ctx) -> dict[str, Any]:
    prefix, maps = fresh_table_prefix(), []
    with ExitStack() as stack:
        meter = Meter(ctx.endpoint, prefix)
        stack.callback(meter.close)
        billed = stack.enter_context(ctx.client(prefix, endpoint=meter.url,
                                                max_workers=WORKERS))
        view = stack.enter_context(Whimbrel(ctx.endpoint, prefix))  # polls, unbilled
        wb = stack.enter_context(ctx.client(max_workers=WORKERS))  # straight to Local
        for items, lanes in configs(ctx):
            name = f"map_{items}_{lanes}"
            for client in (wb, billed):
                client.register_workflow(WorkflowDefinition(name, (ActivityDefinition(
                    "each", launcher=NOOP, map_over="$input.xs", max_concurrency=lanes),)))
                _seconds(client, view if client is billed else wb, name, 1)  # warm-up
            runs = [_seconds(wb, wb, name, items) for _ in range(ctx.repeats)]
            meter.settle()
            meter.drain()
            _seconds(billed, view, name, items)
            meter.settle()
            w = _writes(meter.drain())
            maps.append({"items": items, "lanes": lanes, "wall_s": median(runs), "runs": runs,
                         **w, "writes_per_item": w["item_writes"] / items,
                         "wru_per_item": w["wru"] / items, "rru_per_item": w["rru"] / items})
    return {"workers": WORKERS, "maps": maps}


def biggest(result: dict[str, Any], lanes: int = 20) -> dict[str, Any]:
    """The largest map measured at ``lanes`` (also for the targets table)."""
    return dict(max((m for m in result["maps"] if m["lanes"] == lanes),
                    key=lambda m: int(m["items"])))


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    maps = result["maps"]
    head = ["items / max_concurrency", "wall (s)", "writes per item", "most writes to one "
            "item", "lane edge writes", "map's own row writes", "workflow item writes",
            "most writes to any one row", "WRU / item", "RRU / item", "conditional writes lost"]
    rows = [[f"{m['items']:,} / {m['lanes']:,}", f"{m['wall_s']:.2f}",
             f"**{m['writes_per_item']:.2f}**", m["most_item_writes"], f"{m['edge_writes']:,}",
             m["map_row_writes"], m["workflow_writes"], f"**{m['most_row_writes']}**",
             f"{m['wru_per_item']:.2f}", f"{m['rru_per_item']:.2f}", ", ".join(
                 f"{n} ({k})" for k, n in m["lost"].items()) or "0"]
            for m in maps]
    chart = bars(img / "bench_maps.png", [f"1 → {m['items']:,}\n({m['lanes']:,} lanes)"
                                          for m in maps],
                 {"wall (s)": [m["wall_s"] for m in maps]}, "seconds, start to COMPLETED",
                 "Map: wall time vs items", log=True)
    big = biggest(result)
    return {"table": md_table(head, rows), "chart": chart, "workers": result["workers"],
            "big": big, "rru_workflow": big["rru_by_table"].get("workflow_exec", 0.0) /
            big["items"]}
