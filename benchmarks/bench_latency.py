"""Hand-off latency on the push, pull and local-runtime paths, with the requests and
sequential round trips of each hand-off (counted in one more run through the proxy)."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import ExitStack
from itertools import pairwise
from pathlib import Path
from typing import Any

from benchmarks.billing import Meter
from benchmarks.common import Ctx, Workers, bars, md_table, median, percentile, wait_end
from benchmarks.shapes import EXTERNAL, NOOP, chain
from whimbrel import ActivityExec, Whimbrel
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import fresh_table_prefix

PATHS = {"push": "Full Logic push (python launcher, in-process)",
         "pull": "Full Logic pull (external, one worker claiming)",
         "runtime": "Simple API via the local runtime (streams + Lambda handlers)"}
IDLE_POLL = 0.002


def sequential(spans: Iterable[tuple[float, float]]) -> int:
    """The largest number of spans no two of which overlap in time (greedy by end)."""
    count, end = 0, float("-inf")
    for t0, t1 in sorted(spans, key=lambda s: s[1]):
        count, end = (count + 1, t1) if t0 >= end else (count, end)
    return count


def stamp(act: ActivityExec, state: str) -> float | None:
    return next((c.at for c in act.history if c.state == state), None)  # engine's clock


def _path(ctx: Ctx, path: str, n: int, metered: bool) -> dict[str, Any]:
    prefix, names, samples = fresh_table_prefix(), [s[0] for s in chain(n).names()], []
    with ExitStack() as stack:
        meter = Meter(ctx.endpoint, prefix) if metered else None
        url = meter.url if meter else ctx.endpoint
        stack.callback(meter.close if meter else lambda: None)
        wb = stack.enter_context(ctx.client(prefix, endpoint=url))
        view = stack.enter_context(Whimbrel(ctx.endpoint, prefix))
        if path == "runtime":
            stack.enter_context(LocalRuntime(url, prefix, heartbeat_rate_seconds=0,
                                             poll_interval=0.01, lambda_log_level="WARNING"))
        wb.register_workflow(chain(n).definition("lat", NOOP if path == "push" else EXTERNAL))
        worker = Workers(wb, "lat", path != "push", events=path == "runtime", poll=IDLE_POLL)
        stack.callback(worker.close)
        if meter:
            meter.drain()  # the setup's requests
        for i in range(1 if meter else ctx.repeats + 1):  # metered: one run on fresh tables
            acts = wait_end(view, wb.start_workflow("lat"), 300, 0.05).latest_activities
            done = [worker.sent.get(acts[a].activity_exec_id) if path == "runtime"
                    else stamp(acts[a], "COMPLETED") for a in names]
            running = [stamp(acts[a], "RUNNING") for a in names]
            samples += [(r - d) * 1000 for d, r in zip(done, running[1:], strict=False)
                        if d and r and (i or meter)]
        if not meter:
            return {"p50_ms": percentile(samples, 50), "p99_ms": percentile(samples, 99),
                    "handoffs": len(samples)}
        worker.close()
        meter.settle()
        reqs = [r for r in meter.drain() if not (  # idle polls of the worker are not work
            r.op == "Query" and r.index and any(a <= r.t0 and r.t1 <= b for a, b in worker.idle))]
        windows = [[(r.t0, r.t1) for r in reqs if lo <= r.t0 < hi]
                   for lo, hi in pairwise(running[2:-1]) if lo and hi]
        return {"requests_per_activity": len(reqs) / n,
                "requests_per_handoff": median(len(w) for w in windows),
                "sequential_per_handoff": min(map(sequential, windows)),  # see latency.md
                "sequential_median": median(map(sequential, windows))}


def run(ctx: Ctx) -> dict[str, Any]:
    n = ctx.size(30, 10)
    return {"chain": n, "paths": {p: {**_path(ctx, p, n, False), **_path(ctx, p, n, True)}
                                  for p in PATHS}}


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    rows = [[label, f"**{r['p50_ms']:.1f}**", f"{r['p99_ms']:.1f}", r["handoffs"],
             f"{r['requests_per_activity']:.1f}", f"{r['requests_per_handoff']:.1f}",
             f"**{r['sequential_per_handoff']}** ({r['sequential_median']:g})"]
            for label, r in ((lbl, result["paths"][k]) for k, lbl in PATHS.items())]
    return {"chain": result["chain"], "idle_poll_ms": IDLE_POLL * 1000, "table": md_table([
        "path", "p50 (ms)", "p99 (ms)", "hand-offs", "requests / activity (all-in)",
        "requests / hand-off", "sequential round trips / hand-off (median)"], rows),
        "chart": bars(img / "bench_latency.png", list(PATHS), {q: [
            result["paths"][k][f"{q}_ms"] for k in PATHS] for q in ("p50", "p99")},
            "hand-off (ms)", "Upstream finished → downstream RUNNING")}
