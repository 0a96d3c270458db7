"""Throughput: many concurrent chains of no-op activities on the Full Logic path, from
one process and from two processes sharing the same tables."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.common import Ctx, bars, median, wait_end
from benchmarks.shapes import chain
from whimbrel import Whimbrel

SHAPE = chain(10)
THREADS = 32
ROOT = Path(__file__).resolve().parent.parent


def drive(endpoint: str, prefix: str, workflows: int) -> dict[str, Any]:
    """Start ``workflows`` chains at once from this process and wait for every one."""
    with Whimbrel(endpoint, prefix, max_workers=THREADS) as wb:
        wb.register_workflow(SHAPE.definition("tp"))
        wb.meter.reset()
        t0 = time.time()
        with ThreadPoolExecutor(16) as pool:
            ids = list(pool.map(lambda _: wb.start_workflow("tp"), range(workflows)))
        ends = [float(wait_end(wb, wx, 900, 0.25).ended_epoch or 0) for wx in ids]
        return {"t0": t0, "t1": max(ends), "activities": workflows * SHAPE.steps,
                "calls": wb.meter.total_calls}


def _processes(ctx: Ctx, count: int, workflows: int) -> dict[str, float]:
    """``count`` processes, each driving ``workflows / count`` chains on the same tables."""
    with ctx.client() as wb:
        procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.bench_throughput",
                                   ctx.endpoint, wb.table_prefix, str(workflows // count)],
                                  stdout=subprocess.PIPE, text=True, cwd=ROOT)
                 for _ in range(count)]
        outs = [json.loads(p.communicate()[0].splitlines()[-1]) for p in procs]
    acts = sum(o["activities"] for o in outs)
    return {"per_s": acts / (max(o["t1"] for o in outs) - min(o["t0"] for o in outs)),
            "calls_per_activity": sum(o["calls"] for o in outs) / acts}


def run(ctx: Ctx) -> dict[str, Any]:
    workflows = ctx.size(100, 20)
    one, two = zip(*[(_processes(ctx, 1, workflows), _processes(ctx, 2, workflows))
                     for _ in range(ctx.repeats)], strict=True)
    return {"workflows": workflows, "chain": SHAPE.steps, "threads": THREADS,
            "one": median(r["per_s"] for r in one), "two": median(r["per_s"] for r in two),
            "calls_per_activity": median(r["calls_per_activity"] for r in one),
            "runs": {"one": one, "two": two}}


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    chart = bars(img / "bench_throughput.png", ["1 process", "2 processes"],
                 {"activities / s": [result["one"], result["two"]]}, "activities / s",
                 f"{result['workflows']} concurrent chains of {result['chain']}")
    return {**result, "chart": chart, "ratio": result["two"] / result["one"]}


if __name__ == "__main__":  # one of the two processes
    print(json.dumps(drive(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
