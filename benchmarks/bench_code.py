"""Code workflows (issue 26). *Long runs*: a sequential code workflow of 100, 1,000 and
10,000 no-op steps on the Full Logic path; per step, the reads and writes of the run's
rows, the read and write units, and the CPU the client process spent. Flat figures mean
a decision reads only what is new and runs only the code past the last wait. *Shapes*:
the peers' chain of 50 and fan-out 1→100→1 written with ``ctx.step``/``ctx.start``
(``code_shapes.py``), beside the same shapes as DAGs, in ms per step.

    ./scripts/bench --only code            # or: python -m benchmarks --only code
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.code_shapes import code_chain, code_fan
from benchmarks.common import Ctx, md_table, median, wait_end
from benchmarks.shapes import chain, fan
from whimbrel import Whimbrel
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.engine.code_decide import Histories
from whimbrel.engine.code_runs import CodeRuns

READS = ("GetItem", "Query", "BatchGetItem", "Scan", "ExecuteStatement")
#: Steps in flight, as the peers benchmark's Whimbrel push engine.
INFLIGHT = 16


class _RunRequests:
    """The requests on one run's rows made by the engine's threads (the benchmark's
    own polling for the end runs on the main thread and is left out)."""

    def __init__(self, wx: str) -> None:
        self.wx = wx
        self.reads: Counter[str] = Counter()
        self.writes: Counter[str] = Counter()
        self._main = threading.main_thread()
        self._lock = threading.Lock()

    def __call__(self, operation: str, params: dict[str, Any],
                 response: dict[str, Any] | None) -> None:
        if threading.current_thread() is self._main or self.wx not in repr(params):
            return
        with self._lock:
            (self.reads if operation in READS else self.writes)[operation] += 1


def _chain(wb: Whimbrel, steps: int, tag: str) -> dict[str, Any]:
    request_id = f"bench-code-{tag}-{steps}"
    seen = _RunRequests(workflow_exec_id_for(request_id))
    wb.store.tables.client.observers.append(seen)
    wb.meter.reset()
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        wx = wb.start_workflow("code_chain", {"steps": steps}, request_id=request_id)
        run = wait_end(wb, wx, timeout=3600, poll=0.5)
    finally:
        wb.store.tables.client.observers.remove(seen)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert run.state.value == "COMPLETED" and run.output == steps, run
    return {"steps": steps, "wall_s": wall, "ms_per_step": wall * 1000 / steps,
            "cpu_ms_per_step": cpu * 1000 / steps,
            "reads_per_step": sum(seen.reads.values()) / steps,
            "writes_per_step": sum(seen.writes.values()) / steps,
            "reads": dict(seen.reads), "writes": dict(seen.writes),
            "rru_per_step": wb.meter.total_read_units / steps,
            "wru_per_step": wb.meter.total_write_units / steps}


def _ms_per_step(wb: Whimbrel, name: str, input: Any, steps: int, repeats: int) -> dict[
        str, Any]:
    runs = []
    for i in range(repeats + 1):  # the first run is a warm-up
        t0 = time.time()  # to the end stamp on the run's item (the engine's clock)
        end = float(wait_end(wb, wb.start_workflow(name, input)).ended_epoch or 0)
        runs += [(end - t0) * 1000 / steps] if i else []
    return {"ms_per_step": median(runs), "runs": runs}


def shapes(ctx: Ctx) -> list[dict[str, Any]]:
    """The peers' shapes, code and DAG, push (``python`` no-op steps), in one client."""
    out = []
    with ctx.client(max_workers=INFLIGHT) as wb:
        wb.register_workflow(code_chain)
        wb.register_workflow(code_fan)
        for shape, name, input in ((chain(50), "code_chain", {"steps": 50}),
                                   (fan(100), "code_fan", {"width": 100})):
            wb.register_workflow(shape.definition(f"dag_{shape.key}"))
            dag = _ms_per_step(wb, f"dag_{shape.key}", None, shape.steps, ctx.repeats)
            code = _ms_per_step(wb, name, input, shape.steps, ctx.repeats)
            out.append({"shape": shape.label, "steps": shape.steps, "code": code,
                        "dag": dag, "ratio": code["ms_per_step"] / dag["ms_per_step"]})
    return out


def curve(ctx: Ctx, sizes: list[int], *, keep_running: bool) -> list[dict[str, Any]]:
    """The long-run figures at ``sizes``; ``keep_running=False``: no function is kept
    running between decisions (each replays from the start; the history is still kept),
    as before issue 26's fix."""
    out = []
    with ctx.client() as wb:
        if not keep_running:
            wb.engine.feature(CodeRuns).histories = Histories(live_size=0)
        wb.register_workflow(code_chain)
        _chain(wb, 20, "warm-up")
        for steps in sizes:
            out.append(_chain(wb, steps, "run"))
    return out


def run(ctx: Ctx) -> dict[str, Any]:
    return {"sizes": curve(ctx, ctx.size([100, 1000, 10000], [100, 1000]), keep_running=True),
            "replaying": curve(ctx, ctx.size([100, 1000, 2000], [100, 500]),
                               keep_running=False),
            "shapes": shapes(ctx),
            # The machine is shared: its 5-minute load average says how far to trust
            # the timings (the counts do not depend on it).
            "load": round(os.getloadavg()[1], 1)}


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    sizes = result["sizes"]
    rows = [[f"{s['steps']:,}", f"{s['wall_s']:.1f}", f"{s['ms_per_step']:.1f}",
             f"{s['cpu_ms_per_step']:.2f}", f"{s['reads_per_step']:.2f}",
             f"{s['writes_per_step']:.2f}", f"{s['rru_per_step']:.2f}",
             f"{s['wru_per_step']:.2f}"] for s in sizes]
    big = sizes[-1]
    replaying = [[f"{s['steps']:,}", f"{s['wall_s']:.1f}", f"{s['ms_per_step']:.1f}",
                  f"{s['cpu_ms_per_step']:.2f}", f"{s['reads_per_step']:.2f}"]
                 for s in result.get("replaying", [])]
    shape_rows = [[s["shape"], s["steps"], f"{s['code']['ms_per_step']:.1f}",
                   f"{s['dag']['ms_per_step']:.1f}", f"{s['ratio']:.2f}×"]
                  for s in result.get("shapes", [])]
    return {"table": md_table(["steps", "wall (s)", "ms / step", "CPU ms / step",
                               "reads / step", "writes / step", "RRU / step",
                               "WRU / step"], rows),
            "replaying": md_table(["steps", "wall (s)", "ms / step", "CPU ms / step",
                                   "reads / step"], replaying),
            "shapes": md_table(["shape", "steps", "code: ms / step", "DAG: ms / step",
                                "code / DAG"], shape_rows), "inflight": INFLIGHT,
            "load": result.get("load", "?"), "big": big, "reads": ", ".join(f"{k} {v:,}" for k, v in
                                           sorted(big["reads"].items()))}
