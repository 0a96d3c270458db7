"""The heartbeat listener at scale: one ``sweep`` over up to 100k running activities,
1% stale, loaded as copies of a template workflow claimed through the public API (see
``templates/sweep.md``). Its cost must follow what is due, not what is running."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3

from benchmarks.billing import Meter, summarize
from benchmarks.common import Ctx, bars, md_table, medians
from whimbrel import ActivityDefinition, LauncherSpec, RetryPolicy, Whimbrel, WorkflowDefinition
from whimbrel.store import consumers, specs

HEARTBEAT = 300.0
STALE_EVERY = 100
SWEEP_RATE = float(consumers.HEARTBEAT_RATE_SECONDS_AWS)
DEFINITION = WorkflowDefinition("sweep", (ActivityDefinition(
    "work", launcher=LauncherSpec.external(), heartbeat_timeout_seconds=HEARTBEAT,
    retry=RetryPolicy(max_attempts=1)),))
TIMERS = specs.table_spec("activity_exec").index("timers")
RECONCILE = specs.table_spec("workflow_exec").index("reconcile")


def _shift(value: Any, t0: float, delta: float) -> Any:
    """``value`` with each number within an hour of the epoch ``t0`` moved by ``delta``."""
    if isinstance(value, dict):
        if set(value) == {"N"} and abs(float(value["N"]) - t0) < 3600:
            return {"N": repr(float(value["N"]) + delta)}
        return {k: _shift(v, t0, delta) for k, v in value.items()}
    return [_shift(v, t0, delta) for v in value] if isinstance(value, list) else value


class Population:
    """``n`` copies of the template; copy ``i`` is stale when ``i % STALE_EVERY == 0``."""

    def __init__(self, wb: Whimbrel, endpoint: str, n: int) -> None:
        wb.register_workflow(DEFINITION)
        wx = wb.start_workflow("sweep")
        act = wb.claim(workflow_name="sweep")
        assert act is not None and act.workflow_exec_id == wx, "template claim failed"
        self.t0, self.n, self.wx = time.time(), n, wx
        self.client = boto3.client("dynamodb", endpoint_url=endpoint)
        self.tables = {t: f"{wb.table_prefix}{t}" for t in ("workflow_exec", "activity_exec")}
        self.templates = {t: json.dumps(self.client.get_item(
            TableName=name, ConsistentRead=True, Key={"workflow_exec_id": {"S": wx}, **(
                {"activity_exec_id": {"S": act.activity_exec_id}} if t == "activity_exec"
                else {})})["Item"]) for t, name in self.tables.items()}
        self.ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"sweep-{n}-{i}")) for i in range(n)]
        self.stale = list(range(0, n, STALE_EVERY))
        # Next reconcile visits spread over the coming hour; due: those before the next sweep.
        self.check = [self.t0 + 3600 * (1 - (i * 0.6180339887) % 1) for i in range(n)]
        self.due = {self.ids[i] for i in range(n) if i % STALE_EVERY and
                    self.check[i] <= self.t0 + SWEEP_RATE}

    def load(self, ids: Iterable[int]) -> None:
        """Write copies ``ids`` of both items with parallel BatchWriteItem."""
        def put(table: str, chunk: list[dict[str, Any]]) -> None:
            request = {self.tables[table]: [{"PutRequest": {"Item": it}} for it in chunk]}
            while request:
                request = self.client.batch_write_item(RequestItems=request)["UnprocessedItems"]

        items = {t: [self._item(t, i) for i in ids] for t in self.tables}
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda job: put(job[0], items[job[0]][job[1]:job[1] + 25]), [
                (t, k) for t in items for k in range(0, len(items[t]), 25)]))

    def _item(self, table: str, i: int) -> dict[str, Any]:
        act = table == "activity_exec"
        spec, shards = (TIMERS, specs.TIMER_SHARDS) if act else (RECONCILE, specs.RECONCILE_SHARDS)
        back = -(HEARTBEAT + 60) if act and i % STALE_EVERY == 0 else 0.0
        item = _shift(json.loads(self.templates[table].replace(self.wx, self.ids[i])), self.t0,
                      back if act else -86_400)  # stale heartbeats; workflows a day old
        item[spec.hash_key.name] = {"S": str(i % shards)}
        item[spec.range_key.name if spec.range_key else ""] = {
            "N": repr(self.t0 + back + HEARTBEAT if act else self.check[i])}
        return item


def _size(ctx: Ctx, n: int) -> dict[str, Any]:
    with ctx.client() as wb:
        pop = Population(wb, ctx.endpoint, n)
        started = time.perf_counter()
        pop.load(range(n))
        load_s, meter = time.perf_counter() - started, Meter(ctx.endpoint, wb.table_prefix)
        runs: dict[str, list[dict[str, float]]] = {"stale": [], "idle": [], "next": []}
        problems = []
        with Whimbrel(meter.url, wb.table_prefix) as metered:
            metered.sweep(pop.t0 - HEARTBEAT)  # warm-up: nothing is due yet
            for r in range(ctx.repeats):
                if r:  # put back what the last repeat changed
                    pop.load(pop.stale + [i for i in range(n) if pop.ids[i] in pop.due])
                for kind, now, want in (("stale", pop.t0, (len(pop.stale), set())),
                                        ("idle", pop.t0, (0, set())),
                                        ("next", pop.t0 + SWEEP_RATE, (0, pop.due))):
                    meter.drain()
                    t0 = time.perf_counter()
                    report = metered.sweep(now)
                    ms, reqs = (time.perf_counter() - t0) * 1000, meter.drain()
                    s, find = summarize(reqs), summarize([q for q in reqs if q.index])
                    # A reconcile visit either repairs a run or finds it whole ("checked").
                    visited = set(report.reconciled) | set(report.checked)
                    runs[kind].append({
                        "ms": ms, "requests": s["requests"], "rru": s["rru_total"],
                        "wru": s["wru_total"], "find_requests": find["requests"],
                        "find_rru": find["rru_total"], "visits": len(visited)})
                    if (len(report.timed_out), visited) != want or report.errors:
                        problems.append(f"{kind} sweep {r}: timed out {len(report.timed_out)}, "
                                        f"visited {len(visited)} of {len(want[1])}")
        meter.close()
    return {"running": n, "stale": len(pop.stale), "due": len(pop.due), "load_seconds": load_s,
            "problems": problems, **{f"{k}_sweep": medians(v) for k, v in runs.items()}}


def run(ctx: Ctx) -> dict[str, Any]:
    return {"sizes": [_size(ctx, n) for n in ctx.size([1_000, 10_000, 100_000],
                                                      [1_000, 5_000])]}


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    sizes, rows = result["sizes"], []
    for s in sizes:
        st, idle, nxt, k = s["stale_sweep"], s["idle_sweep"], s["next_sweep"], max(1, s["stale"])
        rows.append([f"{s['running']:,}", f"{k:,}", f"{st['ms']:,.0f}", f"{st['requests']:,.0f}",
                     f"{st['rru']:,.1f} / {st['wru']:,.0f}", f"{st['requests'] / k:.2f}",
                     f"{st['find_requests']:.0f} / {st['find_rru']:.1f}", f"{idle['ms']:.0f}",
                     f"{idle['requests']:.0f} / {idle['rru']:.1f}", f"{nxt['visits']:.0f}",
                     f"{nxt['requests']:,.0f}", f"{nxt['requests'] / max(1, nxt['visits']):.2f}"])
    problems = [p for s in sizes for p in s["problems"]]
    return {"heartbeat": HEARTBEAT, "rate": SWEEP_RATE, "table": md_table([
        "running", "stale", "stale sweep: ms", "requests", "RRU / WRU", "requests / stale",
        "finding: requests / RRU", "idle sweep: ms", "requests / RRU", "next sweep: visits",
        "requests", "requests / visit"], rows), "chart": bars(
        img / "bench_sweep.png", [f"{s['running']:,} running" for s in sizes],
        {f"{k} sweep": [s[f"{k}_sweep"]["requests"] for s in sizes] for k in (
            "stale", "next", "idle")}, "requests per sweep", "One sweep (1% stale)", log=True),
        "load": ", ".join(f"{s['running']:,} in {s['load_seconds']:.0f} s" for s in sizes),
        "checks": "every stale sweep timed out exactly the stale activities, idle sweeps did "
        "nothing, and the next sweep visited exactly the due workflows" if not problems
        else "**problems**: " + "; ".join(problems)}
