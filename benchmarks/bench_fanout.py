"""Wide fan-out 1 -> N -> 1 on the Full Logic path: wall time, and the writes each item
receives (which must stay O(1) per activity, the workflow item included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.bench_cost import FULL, measure
from benchmarks.bench_peers import INFLIGHT, whimbrel
from benchmarks.common import Ctx, bars, md_table
from benchmarks.shapes import fan


def _width(ctx: Ctx, width: int) -> dict[str, Any]:
    shape = fan(width)
    ms = whimbrel(ctx, "push", [shape])[shape.key]["ms_per_step"]
    s = measure(ctx, FULL, shape, 1)["last"]  # one more, through the billing proxy
    return {"width": width, "activities": shape.steps, "wall_s": ms * shape.steps / 1000,
            "ms_per_step": ms, "wru_per_activity": s["wru_total"] / shape.steps,
            "requests_per_activity": s["requests"] / shape.steps,
            "max_item_writes": s["max_item_writes"], "max_item": s["max_item"],
            "max_item_attempts": s["max_item_attempts"], "failed_writes": s["failed_writes"],
            "by_table": s["max_item_writes_by_table"], "histogram": s["writes_per_item"]}


def run(ctx: Ctx) -> dict[str, Any]:
    return {"widths": [_width(ctx, w) for w in ctx.size([10, 100, 1000], [10, 50])]}


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    widths = result["widths"]
    rows = [[w["width"], w["activities"], f"{w['wall_s']:.2f}", f"{w['ms_per_step']:.1f}",
             f"{w['requests_per_activity']:.1f}", f"{w['wru_per_activity']:.2f}",
             f"{w['max_item_writes']} ({w['max_item_attempts']})",
             w["by_table"].get("workflow_exec", 0), w["failed_writes"]] for w in widths]
    chart = bars(img / "bench_fanout.png", [f"1 → {w['width']} → 1" for w in widths],
                 {"wall (s)": [w["wall_s"] for w in widths]}, "seconds, start to COMPLETED",
                 "Fan-out: wall time vs width", log=True)
    big = widths[-1]
    return {"table": md_table(["width", "activities", "wall (s)", "ms / step", "requests / "
                               "activity", "WRU / activity", "most writes to one item "
                               "(attempts)", "workflow item writes", "conditional writes lost"],
                              rows), "chart": chart, "threads": INFLIGHT, "big": big,
            "per_table": ", ".join(f"`{t}` {n}" for t, n in sorted(big["by_table"].items())),
            "histogram": ", ".join(f"{n} items × {k}" for k, n in big["histogram"].items())}
