"""Hand-off latency: upstream COMPLETED -> downstream RUNNING, p50 and p99.

Three paths: Full Logic push (``python`` launcher in-process), Full Logic pull
(``external`` activities taken by a worker thread with ``claim()``), and the Simple
Lambda API through the local runtime (the worker reports COMPLETED by writing an
``activity_event`` row; DynamoDB Local's stream feeds the real handler, which readies
the next activity; the worker claims it).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import BenchContext, median, percentile
from benchmarks.shapes import EXTERNAL, chain
from whimbrel import Whimbrel
from whimbrel.contract.states import ActivityState, Transition
from whimbrel.engine.views import WorkflowExec
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import fresh_table_prefix

TITLE = "Hand-off latency"
PATHS = ("push", "pull", "runtime")
LABELS = {"push": "Full Logic, push (python launcher)",
          "pull": "Full Logic, pull (external + claim)",
          "runtime": "Simple Lambda API via local runtime"}


def _at(act: Any, state: ActivityState) -> float | None:
    for change in act.history:
        if change.state == state.value:
            return float(change.at)
    return None


def handoffs(wf: WorkflowExec, n: int, sent: dict[str, float] | None = None) -> list[float]:
    """Milliseconds from a{i-1} finishing to a{i} RUNNING. ``sent``: when the worker
    wrote each COMPLETED event (runtime path), which then counts as the finish."""
    by_name = {a.activity_name: a for a in wf.activities}
    out = []
    for i in range(1, n):
        up, down = by_name[f"a{i - 1}"], by_name[f"a{i}"]
        done = sent.get(up.activity_exec_id) if sent else _at(up, ActivityState.COMPLETED)
        running = _at(down, ActivityState.RUNNING)
        if done is not None and running is not None:
            out.append((running - done) * 1000.0)
    return out


class PullWorker(threading.Thread):
    """Claims and runs external activities; or, with ``events``, claims and reports
    completion through the Simple API (an ``activity_event`` row)."""

    def __init__(self, wb: Whimbrel, workflow: str, *, events: bool = False) -> None:
        super().__init__(daemon=True, name="bench-worker")
        self.wb, self.workflow, self.events = wb, workflow, events
        self.stop = threading.Event()
        self.sent: dict[str, float] = {}
        self.polls = 0

    def run(self) -> None:
        while not self.stop.is_set():
            act = self.wb.claim(workflow_name=self.workflow)
            self.polls += 1
            if act is None:
                self.stop.wait(0.002)  # idle poll interval
                continue
            if self.events:
                self.sent[act.activity_exec_id] = time.time()
                self.wb.send_activity_event(act.activity_exec_id, Transition.COMPLETED)
            else:
                with self.wb.run_activity(act.activity_exec_id):
                    pass


def _run_path(ctx: BenchContext, path: str, n: int, runs: int) -> dict[str, Any]:
    samples: list[list[float]] = []
    if path == "runtime":
        prefix = fresh_table_prefix()
        with LocalRuntime(ctx.endpoint_url, prefix, lambda_log_level="WARNING",
                          poll_interval=0.01) as rt:
            rt.client.register_workflow(chain("lat_rt", n, EXTERNAL))
            worker = PullWorker(Whimbrel(ctx.endpoint_url, prefix), "lat_rt", events=True)
            worker.start()
            try:
                for _ in range(runs):
                    wx = rt.client.start_workflow("lat_rt")
                    wf = rt.client.wait(wx, timeout=300, poll_seconds=0.05)
                    samples.append(handoffs(wf, n, worker.sent))
            finally:
                worker.stop.set()
                worker.join()
                rt.client.store.delete_tables()
    else:
        with ctx.client() as wb:
            launcher = EXTERNAL if path == "pull" else chain("x", 1).activities[0].launcher
            wb.register_workflow(chain("lat", n, launcher))
            waiter = Whimbrel(ctx.endpoint_url, wb.table_prefix)
            worker = None
            if path == "pull":
                worker = PullWorker(Whimbrel(ctx.endpoint_url, wb.table_prefix), "lat")
                worker.start()
            try:
                for _ in range(runs):
                    wx = wb.start_workflow("lat")
                    wf = waiter.wait(wx, timeout=300, poll_seconds=0.05)
                    samples.append(handoffs(wf, n))
            finally:
                if worker is not None:
                    worker.stop.set()
                    worker.join()
    flat = [x for s in samples for x in s]
    return {
        "p50_ms": median([percentile(s, 50) for s in samples]),
        "p99_ms": median([percentile(s, 99) for s in samples]),
        "pooled_p50_ms": percentile(flat, 50),
        "pooled_p99_ms": percentile(flat, 99),
        "handoffs": len(flat),
        "samples_ms": flat,
    }


def run(ctx: BenchContext) -> dict[str, Any]:
    n = ctx.size(30, 8)
    out: dict[str, Any] = {"chain_length": n, "runs": ctx.repeats, "paths": {}}
    for path in PATHS:
        out["paths"][path] = _run_path(ctx, path, n, ctx.repeats)
    return out


def render(result: dict[str, Any], img_dir: Path) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lat = result["_environment"]["latency"]["p50_ms"]
    rts = {"push": 4, "pull": 4, "runtime": None}
    rows = []
    for path in PATHS:
        r = result["paths"][path]
        bound = f"{rts[path] * lat:.1f}" if rts[path] else "—"
        rows.append(f"| {LABELS[path]} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
                    f"{bound} | {r['handoffs']} |")
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.boxplot([result["paths"][p]["samples_ms"] for p in PATHS],
               tick_labels=[LABELS[p].replace(", ", "\n", 1) for p in PATHS],
               showfliers=False)
    ax.axhline(4 * lat, ls="--", color="grey", label=f"4 round trips × {lat:.1f} ms")
    ax.set_ylabel("hand-off (ms)")
    ax.set_title("Upstream finished → downstream RUNNING")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(img_dir / "bench_latency.png", dpi=110)
    plt.close(fig)
    return f"""## {TITLE}

Reproduce: `./scripts/bench --only latency`. A chain of {result['chain_length']} no-op
activities, {result['runs']} runs per path; a hand-off is the time from the upstream
finishing (its `COMPLETED` history entry; on the runtime path, the moment the worker
wrote its `COMPLETED` event row) to the downstream's `RUNNING` history entry, both
stamped by the same clock. p50/p99 are medians over the runs of each run's percentile.

| path | p50 (ms) | p99 (ms) | bound: sequential round trips × request p50 (ms) | hand-offs |
|---|---|---|---|---|
{chr(10).join(rows)}

The push and pull paths take 4 sequential round trips per hand-off
([architecture](architecture.md#round-trips-per-hand-off)); the pull figure also holds
the worker's idle poll interval (2 ms). The runtime path adds DynamoDB Local's stream
(the pump polls every 10 ms here; deployed, Lambda's stream poller adds its own delay,
typically a few hundred ms) and the Lambda handler.

![hand-off latency](img/bench_latency.png)
"""
