"""Heartbeat listener at scale (issue #4): with 1k, 10k and 100k running activities of
which 1% are stale, one ``sweep`` must cost in proportion to the stale ones, and an idle
sweep must cost the same small constant at every size.

Loading 100k RUNNING activities through the engine would take long, so the items are
written directly with BatchWriteItem (parallel threads, not part of any figure) in the
exact shape the engine writes: a *template* workflow is started and its activity claimed
through the real engine (RUNNING, heartbeat timeout armed in the sparse ``timers``
index), both items are read back raw, and every loaded item is that template with its
own ids, shards and times. Each running activity is the single activity of its own
RUNNING workflow (definition ``bench_sweep``: one ``external`` activity, heartbeat
timeout ``HEARTBEAT_TIMEOUT`` s, no retry), so timing one out fails exactly one workflow.

Times (``T0`` = when the template was claimed):

* live activities heartbeat at ``T0``: deadline ``T0 + HEARTBEAT_TIMEOUT``;
* stale activities (every 100th) last heartbeat ``STALE_BY`` s before their deadline
  passed: deadline ``T0 - STALE_BY``;
* workflows are a day old, so the reconciler visits each once an hour (its maximum
  interval); their next visit times are spread evenly over ``(T0, T0 + 3600]``, the
  steady state of a population of long-running workflows.

Per repeat: a **stale sweep** at ``T0`` (times out every stale activity), an **idle
sweep** at ``T0`` (nothing left to do), and a **reconcile sweep** at ``T0 + 60`` (the
next scheduled sweep on AWS: no new stale activity, but 1/60 of the running workflows
are due their hourly reconcile visit). The touched items are rewritten between repeats,
so every repeat sees the same tables. Each sweep's calls are split by the trace: the
sparse-index Queries (finding the work) and everything else (acting on it).

A **wide** variant puts 1,000 activities in each workflow, to show what the acting cost
depends on besides the stale count.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from benchmarks.bench_peer import Call, CallTrace
from benchmarks.billing import Billing
from benchmarks.common import BenchContext, median
from whimbrel import Whimbrel
from whimbrel.contract.definitions import (
    ActivityDefinition,
    LauncherSpec,
    RetryPolicy,
    WorkflowDefinition,
)
from whimbrel.contract.ids import shard_of, unit_random, workflow_exec_id_for
from whimbrel.store import specs

TITLE = "Heartbeat listener at scale: sweep cost vs running activities"

SIZES_FULL = [1_000, 10_000, 100_000]
SIZES_QUICK = [1_000, 5_000]
STALE_EVERY = 100  # 1% stale
FIXED_STALE = 10
HEARTBEAT_TIMEOUT = 300.0
STALE_BY = 60.0
WORKFLOW_AGE = 86_400.0
RECONCILE_INTERVAL = 3_600.0  # whimbrel.engine.sweep.MAX_RECONCILE_INTERVAL_SECONDS
SWEEP_RATE = float(specs.HEARTBEAT_RATE_SECONDS_AWS)
LOAD_THREADS = 16
WIDE = 1_000  # activities per workflow in the wide variant
DEF_NAME = "bench_sweep"
WIDE_NAME = "bench_sweep_wide"

_WX = "@@WX@@"
_RID = "@@RID@@"


def _definition(name: str, activities: Iterable[str]) -> WorkflowDefinition:
    return WorkflowDefinition(name, tuple(
        ActivityDefinition(a, launcher=LauncherSpec.external(),
                           heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT,
                           retry=RetryPolicy(max_attempts=1))
        for a in activities), description="bench: heartbeat listener at scale")


# -- items in the engine's shape ------------------------------------------------------------


@dataclass
class Template:
    """Raw DynamoDB JSON of a RUNNING workflow and its claimed activity, ids replaced."""

    workflow: str
    activity: str
    t0: float
    attrs: dict[str, str]  # attribute names from the index specs

    @classmethod
    def capture(cls, wb: Whimbrel) -> Template:
        rid = f"bench-sweep-template-{uuid.uuid4()}"
        wx = wb.start_workflow(DEF_NAME, request_id=rid)
        act = wb.claim(workflow_name=DEF_NAME)
        if act is None or act.workflow_exec_id != wx:
            raise RuntimeError("sweep template: could not claim the template activity")
        client = wb.store.boto_client()
        wf_table = wb.store.table_name("workflow_exec")
        act_table = wb.store.table_name("activity_exec")
        req_table = wb.store.table_name("workflow_request")
        wf_item = client.get_item(TableName=wf_table, ConsistentRead=True,
                                  Key={"workflow_exec_id": {"S": wx}})["Item"]
        act_key = {"workflow_exec_id": {"S": wx},
                   "activity_exec_id": {"S": act.activity_exec_id}}
        act_item = client.get_item(TableName=act_table, Key=act_key,
                                   ConsistentRead=True)["Item"]
        client.delete_item(TableName=act_table, Key=act_key)
        client.delete_item(TableName=wf_table, Key={"workflow_exec_id": {"S": wx}})
        client.delete_item(TableName=req_table, Key={"workflow_request_id": {"S": rid}})
        timers = specs.ACTIVITY_EXEC.index("timers")
        reconcile = specs.WORKFLOW_EXEC.index("reconcile")
        assert timers.range_key and reconcile.range_key
        attrs = {"timer_shard": timers.hash_key.name, "timer_epoch": timers.range_key.name,
                 "check_shard": reconcile.hash_key.name,
                 "check_epoch": reconcile.range_key.name}
        for name in (attrs["timer_shard"], attrs["timer_epoch"], "heartbeat_epoch"):
            if name not in act_item:
                raise RuntimeError(f"sweep template: claimed activity has no {name}")
        if act_item["state"]["S"] != "RUNNING" or wf_item["state"]["S"] != "RUNNING":
            raise RuntimeError("sweep template: activity or workflow not RUNNING")
        deadline = float(act_item[attrs["timer_epoch"]]["N"])

        def text(item: dict[str, Any]) -> str:
            return json.dumps(item).replace(rid, _RID).replace(wx, _WX)

        return cls(text(wf_item), text(act_item), deadline - HEARTBEAT_TIMEOUT, attrs)


class Population:
    """Deterministic items: workflow ``w`` (0..workflows-1) with ``activities`` names;
    activity ``j`` of workflow ``w`` is stale when ``(w * len + j) % STALE_EVERY == 0``."""

    def __init__(self, tmpl: Template, name: str, version: int, activities: list[str],
                 workflows: int, tag: str) -> None:
        self.tmpl = tmpl
        self.name = name
        self.version = version
        self.activities = activities
        self.workflows = workflows
        self.tag = tag
        self.t0 = tmpl.t0
        self.created = self.t0 - WORKFLOW_AGE
        self.created_day = datetime.fromtimestamp(self.created, UTC).strftime("%Y-%m-%d")

    def wx(self, w: int) -> str:
        return workflow_exec_id_for(self.rid(w))

    def rid(self, w: int) -> str:
        return f"bench-sweep-{self.tag}-{w}"

    def aeid(self, w: int, j: int) -> str:
        return f"{self.wx(w)}:{self.activities[j]}:1"

    def is_stale(self, w: int, j: int) -> bool:
        return (w * len(self.activities) + j) % STALE_EVERY == 0

    def check_epoch(self, w: int) -> float:
        # Evenly spread over (T0, T0 + 3600], fixed by the id.
        return self.t0 + RECONCILE_INTERVAL * (1.0 - unit_random(self.wx(w)))

    def workflow_item(self, w: int, check_epoch: float | None = None) -> dict[str, Any]:
        a = self.tmpl.attrs
        wx = self.wx(w)
        item: dict[str, Any] = json.loads(
            self.tmpl.workflow.replace(_WX, wx).replace(_RID, self.rid(w)))
        item["workflow_name"] = {"S": self.name}
        item["version"] = {"N": str(self.version)}
        item["created_epoch"] = {"N": repr(self.created)}
        item["created_day"] = {"S": self.created_day}
        item[a["check_shard"]] = {"S": shard_of(wx, specs.RECONCILE_SHARDS)}
        # The listing indexes' keys, as the store writes them for a RUNNING run.
        state = item["state"]["S"]
        item[specs.WORKFLOW_EXEC.index("by_name_state").hash_key.name] = {
            "S": specs.name_state_key(self.name, state)}
        item[specs.WORKFLOW_EXEC.index("by_state").hash_key.name] = {
            "S": specs.state_shard_key(state, shard_of(wx, specs.STATE_SHARDS))}
        epoch = self.check_epoch(w) if check_epoch is None else check_epoch
        item[a["check_epoch"]] = {"N": repr(epoch)}
        return item

    def activity_item(self, w: int, j: int, stale: bool | None = None) -> dict[str, Any]:
        a = self.tmpl.attrs
        wx = self.wx(w)
        aeid = self.aeid(w, j)
        item: dict[str, Any] = json.loads(self.tmpl.activity.replace(_WX, wx))
        item["activity_exec_id"] = {"S": aeid}
        item["activity_name"] = {"S": self.activities[j]}
        item["workflow_name"] = {"S": self.name}
        if "workflow_version" in item:
            item["workflow_version"] = {"N": str(self.version)}
        stale = self.is_stale(w, j) if stale is None else stale
        beat = self.t0 - HEARTBEAT_TIMEOUT - STALE_BY if stale else self.t0
        item["heartbeat_epoch"] = {"N": repr(beat)}
        item[a["timer_shard"]] = {"S": shard_of(aeid, specs.TIMER_SHARDS)}
        item[a["timer_epoch"]] = {"N": repr(beat + HEARTBEAT_TIMEOUT)}
        return item

    def stale(self) -> list[tuple[int, int]]:
        return [(w, j) for w in range(self.workflows) for j in range(len(self.activities))
                if self.is_stale(w, j)]


class Loader:
    """Parallel BatchWriteItem, unmetered (not part of any figure)."""

    def __init__(self, wb: Whimbrel) -> None:
        self.client = boto3.client(
            "dynamodb", endpoint_url=wb.store.endpoint_url, region_name=wb.store.region,
            config=Config(max_pool_connections=LOAD_THREADS + 4,
                          retries={"max_attempts": 10, "mode": "standard"}))
        self.wf_table = wb.store.table_name("workflow_exec")
        self.act_table = wb.store.table_name("activity_exec")
        self.written = 0
        self._lock = threading.Lock()

    def _batch(self, table: str, items: list[dict[str, Any]]) -> None:
        request: dict[str, Any] = {table: [{"PutRequest": {"Item": it}} for it in items]}
        delay = 0.01
        while request:
            out = self.client.batch_write_item(RequestItems=request)
            request = out.get("UnprocessedItems") or {}
            if request:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        with self._lock:
            self.written += len(items)

    def put(self, table: str, items: Iterator[dict[str, Any]]) -> None:
        with ThreadPoolExecutor(max_workers=LOAD_THREADS) as pool:
            jobs = []
            chunk: list[dict[str, Any]] = []
            for item in items:
                chunk.append(item)
                if len(chunk) == 25:
                    jobs.append(pool.submit(self._batch, table, chunk))
                    chunk = []
            if chunk:
                jobs.append(pool.submit(self._batch, table, chunk))
            for job in jobs:
                job.result()

    def load(self, pop: Population) -> float:
        t0 = time.perf_counter()
        self.put(self.wf_table, (pop.workflow_item(w) for w in range(pop.workflows)))
        self.put(self.act_table, (pop.activity_item(w, j) for w in range(pop.workflows)
                                  for j in range(len(pop.activities))))
        return time.perf_counter() - t0

    def states(self) -> Counter[str]:
        """Activity states by a Scan (verification only; never on a measured path)."""
        counts: Counter[str] = Counter()
        kwargs: dict[str, Any] = {"TableName": self.act_table, "ProjectionExpression": "#s",
                                  "ExpressionAttributeNames": {"#s": "state"}}
        while True:
            page = self.client.scan(**kwargs)
            counts.update(it["state"]["S"] for it in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return counts
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


# -- one measured sweep ---------------------------------------------------------------------


def _sum(calls: list[Call]) -> dict[str, float]:
    return {"calls": float(len(calls)), "rru": sum(c.rru for c in calls),
            "wru": sum(c.wru for c in calls), "call_ms": sum(c.ms for c in calls)}


def measure_sweep(wb: Whimbrel, trace: CallTrace, bill: Billing, now: float) -> dict[str, Any]:
    """Run ``wb.sweep(now)``; totals from ``wb.meter``, phases from the call trace, units
    as AWS bills them from ``bill``."""
    trace.reset()
    wb.meter.reset()
    bill.reset()
    t0 = time.perf_counter()
    report = wb.sweep(now)
    t1 = time.perf_counter()
    calls, _ = trace.snapshot()
    billed = bill.summary()
    timer_q = [c for c in calls if c.index == "timers"]
    rec_q = [c for c in calls if c.index == "reconcile"]
    t_rec = min((c.t0 for c in rec_q), default=t1)
    rest = [c for c in calls if c.index not in ("timers", "reconcile")]
    timer_act = [c for c in rest if c.t0 < t_rec]
    rec_act = [c for c in rest if c.t0 >= t_rec]
    phases = {
        "timer_query": _sum(timer_q),
        "timer_action": _sum(timer_act),
        "reconcile_query": _sum(rec_q),
        "reconcile_action": _sum(rec_act),
    }
    phases["timer_query"]["ms"] = phases["timer_query"]["call_ms"]
    phases["timer_action"]["ms"] = (t_rec - t0) * 1000.0 - phases["timer_query"]["call_ms"]
    phases["reconcile_query"]["ms"] = phases["reconcile_query"]["call_ms"]
    phases["reconcile_action"]["ms"] = (t1 - t_rec) * 1000.0 - phases["reconcile_query"]["call_ms"]
    return {
        "ms": (t1 - t0) * 1000.0,
        "calls": float(wb.meter.total_calls),
        "rru": wb.meter.total_read_units,
        "wru": wb.meter.total_write_units,
        "billed_rru": float(billed["rru_total"]),
        "billed_wru": float(billed["wru_total"]),
        "traced_calls": float(len(calls)),
        "timed_out": sorted(report.timed_out),
        "reconciled": sorted(report.reconciled),
        "errors": list(report.errors),
        "phases": phases,
        "_calls": calls,
    }


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: median([float(r[k]) for r in runs])
                           for k in ("ms", "calls", "rru", "wru", "billed_rru", "billed_wru")}
    out["timed_out"] = median([float(len(r["timed_out"])) for r in runs])
    out["reconciled"] = median([float(len(r["reconciled"])) for r in runs])
    out["phases"] = {
        p: {k: median([float(r["phases"][p][k]) for r in runs])
            for k in ("calls", "rru", "wru", "ms")}
        for p in runs[0]["phases"]
    }
    return out


def _strip(run: dict[str, Any]) -> dict[str, Any]:
    """What a run keeps in the JSON: figures, counts, errors; not the id lists."""
    return {k: (len(v) if k in ("timed_out", "reconciled") else v)
            for k, v in run.items() if not k.startswith("_")}


def _labels(calls: list[Call], key_prefix: str | None = None) -> list[str]:
    return [c.label() for c in sorted(calls, key=lambda c: c.t0)
            if key_prefix is None or (c.key or "").startswith(key_prefix)]


# -- scenarios ----------------------------------------------------------------------------


def _size(ctx: BenchContext, wb: Whimbrel, tmpl: Template, n: int) -> dict[str, Any]:
    version = wb.engine.definition(DEF_NAME)[0]
    pop = Population(tmpl, DEF_NAME, version, ["work"], n, tag=f"n{n}")
    loader = Loader(wb)
    load_s = loader.load(pop)
    stale = pop.stale()
    stale_ids = {pop.aeid(w, j) for w, j in stale}
    t0 = pop.t0
    due = {pop.wx(w) for w in range(n)
           if pop.check_epoch(w) <= t0 + SWEEP_RATE and not pop.is_stale(w, 0)}
    trace = CallTrace(wb.store)
    bill = Billing(wb.table_prefix)
    bill.attach_store(wb.store)
    checks: list[str] = []
    stale_runs: list[dict[str, Any]] = []
    idle_runs: list[dict[str, Any]] = []
    rec_runs: list[dict[str, Any]] = []
    fixed_runs: list[dict[str, Any]] = []
    examples: dict[str, Any] = {}
    try:
        # Warm-up, not measured: a sweep before the first stale deadline finds nothing
        # (the first Queries after a bulk load can be slow on DynamoDB Local).
        wb.sweep(t0 - STALE_BY - 1.0)
        for r in range(ctx.repeats):
            if r:  # put back what the previous repeat changed
                loader.put(loader.wf_table, (pop.workflow_item(w) for w, _ in stale))
                loader.put(loader.act_table, (pop.activity_item(w, j) for w, j in stale))
                loader.put(loader.wf_table, (pop.workflow_item(w) for w in range(n)
                                             if pop.wx(w) in due))
            s = measure_sweep(wb, trace, bill, t0)
            if set(s["timed_out"]) != stale_ids or s["errors"]:
                checks.append(f"repeat {r}: stale sweep timed out {len(s['timed_out'])} of "
                              f"{len(stale_ids)} stale (errors: {s['errors'][:3]})")
            if r == 0:
                states = loader.states()
                s["states_after"] = dict(states)
                if states.get("TIMED_OUT", 0) != len(stale_ids) or \
                        states.get("RUNNING", 0) != n - len(stale_ids):
                    checks.append(f"after the stale sweep the table holds {dict(states)}")
                one = sorted(stale_ids)[len(stale_ids) // 2]
                wx_one = one.rsplit(":", 2)[0]
                examples["per_stale_calls"] = [
                    c.label() for c in sorted(s["_calls"], key=lambda c: c.t0)
                    if c.index is None and (c.key or "").startswith(wx_one)]
            stale_runs.append(s)
            i = measure_sweep(wb, trace, bill, t0)
            if i["timed_out"] or i["reconciled"] or i["errors"]:
                checks.append(f"repeat {r}: idle sweep did work: {_strip(i)}")
            if r == 0:
                examples["idle_calls"] = _labels(i["_calls"])
            idle_runs.append(i)
            c = measure_sweep(wb, trace, bill, t0 + SWEEP_RATE)
            if set(c["reconciled"]) != due or c["timed_out"] or c["errors"]:
                checks.append(f"repeat {r}: reconcile sweep visited {len(c['reconciled'])} of "
                              f"{len(due)} due (timed out {len(c['timed_out'])}, errors "
                              f"{c['errors'][:3]})")
            if r == 0 and c["reconciled"]:
                one_wx = c["reconciled"][len(c["reconciled"]) // 2]
                examples["per_visit_calls"] = [x.label() for x in sorted(c["_calls"],
                                                                         key=lambda x: x.t0)
                                               if x.index is None and x.key
                                               and x.key.startswith(one_wx)]
            rec_runs.append(c)
        # The same tables with only FIXED_STALE stale: the cost must not follow n.
        fixed = stale[:FIXED_STALE]
        fixed_ids = {pop.aeid(w, j) for w, j in fixed}
        for r in range(ctx.repeats):
            loader.put(loader.wf_table, (pop.workflow_item(w) for w, _ in fixed))
            loader.put(loader.act_table, (pop.activity_item(w, j) for w, j in fixed))
            f = measure_sweep(wb, trace, bill, t0)
            if set(f["timed_out"]) != fixed_ids or f["errors"]:
                checks.append(f"repeat {r}: fixed-stale sweep timed out {len(f['timed_out'])} "
                              f"of {len(fixed_ids)}")
            fixed_runs.append(f)
    finally:
        trace.close()
        bill.detach()
    return {
        "running": n,
        "stale": len(stale_ids),
        "due_reconcile": len(due),
        "load_seconds": load_s,
        "items_loaded": loader.written,
        "stale_sweep": {"median": _medians(stale_runs), "runs": [_strip(x) for x in stale_runs]},
        "idle_sweep": {"median": _medians(idle_runs), "runs": [_strip(x) for x in idle_runs]},
        "reconcile_sweep": {"median": _medians(rec_runs), "runs": [_strip(x) for x in rec_runs]},
        "fixed_stale_sweep": {"stale": len(fixed_ids), "median": _medians(fixed_runs),
                              "runs": [_strip(x) for x in fixed_runs]},
        "examples": examples,
        "checks": checks,
    }


def _wide(ctx: BenchContext, wb: Whimbrel, tmpl: Template, workflows: int) -> dict[str, Any]:
    """Workflows of WIDE activities: half hold 1% stale activities, the other half are
    due a reconcile visit at T0 + 60 (and hold no stale one)."""
    names = [f"a{j:04d}" for j in range(WIDE)]
    version = wb.register_workflow(_definition(WIDE_NAME, names))
    pop = Population(tmpl, WIDE_NAME, version, names, workflows, tag="wide")
    half = max(1, workflows // 2)
    t0 = pop.t0
    stale = [(w, j) for w in range(half) for j in range(WIDE) if j % STALE_EVERY == 0]
    stale_ids = {pop.aeid(w, j) for w, j in stale}
    due_w = list(range(half, workflows))

    def wf_items(ws: Iterable[int]) -> Iterator[dict[str, Any]]:
        for w in ws:
            yield pop.workflow_item(w, check_epoch=t0 + SWEEP_RATE / 2 if w >= half else None)

    def act_items() -> Iterator[dict[str, Any]]:
        for w in range(workflows):
            for j in range(WIDE):
                yield pop.activity_item(w, j, stale=(w, j) in stale_set)

    stale_set = set(stale)
    loader = Loader(wb)
    t_load = time.perf_counter()
    loader.put(loader.wf_table, wf_items(range(workflows)))
    loader.put(loader.act_table, act_items())
    load_s = time.perf_counter() - t_load
    trace = CallTrace(wb.store)
    bill = Billing(wb.table_prefix)
    bill.attach_store(wb.store)
    checks: list[str] = []
    stale_runs: list[dict[str, Any]] = []
    rec_runs: list[dict[str, Any]] = []
    try:
        wb.sweep(t0 - STALE_BY - 1.0)  # warm-up, finds nothing
        for r in range(ctx.repeats):
            if r:
                loader.put(loader.wf_table, wf_items(range(workflows)))
                loader.put(loader.act_table, (pop.activity_item(w, j, stale=True)
                                              for w, j in stale))
            s = measure_sweep(wb, trace, bill, t0)
            if set(s["timed_out"]) != stale_ids or s["errors"]:
                checks.append(f"repeat {r}: wide stale sweep timed out {len(s['timed_out'])} "
                              f"of {len(stale_ids)}")
            stale_runs.append(s)
            c = measure_sweep(wb, trace, bill, t0 + SWEEP_RATE)
            want = {pop.wx(w) for w in due_w}
            if not want <= set(c["reconciled"]) or c["errors"]:
                checks.append(f"repeat {r}: wide reconcile visited {len(c['reconciled'])}, "
                              f"expected {len(want)} running ones among them")
            rec_runs.append(c)
    finally:
        trace.close()
        bill.detach()
    return {
        "workflows": workflows,
        "activities_per_workflow": WIDE,
        "running": workflows * WIDE,
        "stale": len(stale_ids),
        "stale_workflows": half,
        "due_reconcile": len(due_w),
        "load_seconds": load_s,
        "stale_sweep": {"median": _medians(stale_runs), "runs": [_strip(x) for x in stale_runs]},
        "reconcile_sweep": {"median": _medians(rec_runs), "runs": [_strip(x) for x in rec_runs]},
        "checks": checks,
    }


def run(ctx: BenchContext) -> dict[str, Any]:
    sizes = SIZES_QUICK if ctx.quick else SIZES_FULL
    result: dict[str, Any] = {
        "sizes": sizes,
        "stale_fraction": 1.0 / STALE_EVERY,
        "fixed_stale": FIXED_STALE,
        "heartbeat_timeout_seconds": HEARTBEAT_TIMEOUT,
        "sweep_rate_seconds": SWEEP_RATE,
        "reconcile_interval_seconds": RECONCILE_INTERVAL,
        "load_threads": LOAD_THREADS,
        "by_size": [],
    }
    for n in sizes:
        with ctx.client() as wb:
            wb.register_workflow(_definition(DEF_NAME, ["work"]))
            tmpl = Template.capture(wb)
            result["by_size"].append(_size(ctx, wb, tmpl, n))
    wide_workflows = ctx.size(10, 2)
    with ctx.client() as wb:
        wb.register_workflow(_definition(DEF_NAME, ["work"]))
        tmpl = Template.capture(wb)
        result["wide"] = _wide(ctx, wb, tmpl, wide_workflows)
    return result


# -- report -------------------------------------------------------------------------------


def _f(value: Any, digits: int = 1) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "-"
    if v != v:
        return "-"
    return f"{v:,.{digits}f}"


def _chart(result: dict[str, Any], img_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["by_size"]
    xs = [r["running"] for r in rows]
    series = [("stale_sweep", "1% stale", "#d62728", "o"),
              ("fixed_stale_sweep", f"{result['fixed_stale']} stale", "#9467bd", "s"),
              ("idle_sweep", "idle (0 stale)", "#2ca02c", "^"),
              ("reconcile_sweep", "next sweep: reconcile visits only", "#1f77b4", "D")]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for ax, key, ylabel in ((axes[0], "ms", "sweep time (ms)"),
                            (axes[1], "billed_rru", "read units (RRU, AWS billing rules)")):
        for skey, label, color, marker in series:
            ys = [float(r[skey]["median"].get(key, r[skey]["median"]["rru"])
                        if key == "billed_rru" else r[skey]["median"][key]) for r in rows]
            ax.plot(xs, ys, marker=marker, color=color, label=label)
        ax.plot(xs, [r["stale"] for r in rows], color="black", linestyle="--", linewidth=1,
                label="stale count (1%)")
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylim(bottom=0)
        ax.set_xticks(xs, [f"{x:,}" for x in xs])
        ax.minorticks_off()
        ax.set_xlabel("running activities")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_title("time of one sweep")
    axes[1].set_title("read units of one sweep")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.suptitle("Heartbeat listener: one sweep vs running activities (median)", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    names = ["bench_sweep_scale.png"]
    fig.savefig(img_dir / names[0], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    bars = [
        ("find stale: timers-index Queries",
         lambda r: r["stale_sweep"]["median"]["phases"]["timer_query"]["calls"], "#ff9896"),
        ("act on stale ones",
         lambda r: r["stale_sweep"]["median"]["phases"]["timer_action"]["calls"], "#d62728"),
        ("idle sweep (all of it)", lambda r: r["idle_sweep"]["median"]["calls"], "#2ca02c"),
        ("next sweep: reconcile visits",
         lambda r: r["reconcile_sweep"]["median"]["phases"]["reconcile_action"]["calls"],
         "#1f77b4"),
    ]
    width = 0.2
    for b, (label, get, color) in enumerate(bars):
        pos = [i + (b - 1.5) * width for i in range(len(rows))]
        vals = [float(get(r)) for r in rows]
        ax.bar(pos, vals, width, label=label, color=color)
        for x, v in zip(pos, vals, strict=True):
            ax.text(x, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=7)
    ax.set_yscale("symlog", linthresh=10.0)
    ax.set_ylim(bottom=0)
    ax.set_xticks(range(len(rows)), [f"{x:,}" for x in xs])
    ax.set_xlabel("running activities (1% stale)")
    ax.set_ylabel("DynamoDB calls")
    ax.set_title("Calls per sweep: finding vs acting (median)", fontsize=11)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", which="major", alpha=0.3)
    fig.tight_layout()
    names.append("bench_sweep_calls.png")
    fig.savefig(img_dir / names[1], dpi=110)
    plt.close(fig)
    return names


def render(result: dict[str, Any], img_dir: Path) -> str:
    env = result.get("_environment", {})
    p50 = float(env.get("latency", {}).get("p50_ms", float("nan")))
    rows = result["by_size"]
    charts = _chart(result, img_dir)
    hb = result["heartbeat_timeout_seconds"]
    rate = result["sweep_rate_seconds"]
    lines = [
        f"## {TITLE}",
        "",
        "How one pass of the heartbeat listener (`whimbrel.engine.sweep.sweep`, through "
        "`Whimbrel.sweep(now)`) scales with the number of running activities, 1% of them "
        "stale. Each running activity is the only activity of its own RUNNING workflow "
        f"(one `external` activity, heartbeat timeout {hb:.0f} s, no retry), so a time-out "
        "fails one workflow. The items are loaded with parallel BatchWriteItem "
        f"({result['load_threads']} threads; load time below, not part of any figure) in "
        "the exact shape the engine writes: a template workflow is started and its "
        "activity claimed through the engine, read back raw, and copied with new ids, "
        "shards and times. Live activities' deadlines are in the future, stale ones' "
        f"{STALE_BY:.0f} s in the past; the workflows are a day old, so the reconciler "
        f"visits each hourly, their next visits spread over the coming hour.",
        "",
        "Per size and repeat: a **stale sweep** (times out every stale activity; verified "
        "against the report and, once per size, by a Scan counting TIMED_OUT and RUNNING "
        "items), an **idle sweep** right after (nothing due), and the **next sweep**, "
        f"{rate:.0f} s later (the AWS schedule), which finds no stale activity but the "
        f"workflows due their hourly reconcile visit (1/{RECONCILE_INTERVAL / rate:.0f} of "
        "them). Touched items are rewritten between repeats. A last series re-arms only "
        f"{result['fixed_stale']} stale activities in the same tables. Calls and units are "
        "the store's CapacityMeter (`wb.meter`: what DynamoDB Local reports); "
        "*billed* units are the same requests priced by AWS's rules "
        "(`benchmarks/billing.py`, which also charges the minimum unit of an empty Query "
        "and a lost conditional write, both reported as 0 by DynamoDB Local; its hooks are "
        "attached during every measured sweep). The split into *finding* (Queries of the "
        "sparse `timers` / `reconcile` indexes) and *acting* comes from a trace of the "
        f"same calls. Medians over {env.get('repeats', '?')} repeats.",
        "",
        f"![sweep time and read units vs running activities](img/{charts[0]})",
        "",
        "**Stale sweep** (1% stale), whole pass, per stale activity and per running activity:",
        "",
        "| running | stale | load (s) | ms | calls | RRU | WRU | billed RRU / WRU | ms / stale | "
        "calls / stale | RRU / stale | ms / running | calls / running | RRU / running |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        s = r["stale_sweep"]["median"]
        st, n = max(r["stale"], 1), max(r["running"], 1)
        lines.append(
            f"| {r['running']:,} | {r['stale']:,} | {_f(r['load_seconds'])} | {_f(s['ms'], 0)} | "
            f"{_f(s['calls'], 0)} | {_f(s['rru'])} | {_f(s['wru'])} | "
            f"{_f(s.get('billed_rru'))} / {_f(s.get('billed_wru'))} | {_f(s['ms'] / st, 2)} | "
            f"{_f(s['calls'] / st, 2)} | {_f(s['rru'] / st, 2)} | {_f(s['ms'] / n, 3)} | "
            f"{_f(s['calls'] / n, 3)} | {_f(s['rru'] / n, 3)} |")
    lines += [
        "",
        "**Finding vs acting** (same stale sweep): the `timers` Queries read only the index "
        "entries at or before `now`, so their read units follow the stale count; acting "
        "reads each stale activity, times it out and fails its workflow. The **idle** sweep "
        f"(0 stale) and the sweep with only **{result['fixed_stale']} stale** run on the same "
        "tables: their cost must not follow the running count.",
        "",
        "| running | stale | find: calls | find: RRU | find (ms) | act: calls | act: RRU | "
        "act: WRU | act (ms) | act calls / stale | idle: ms | idle: calls | idle: RRU "
        "(billed) | "
        f"{result['fixed_stale']} stale: ms | calls | RRU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ph = r["stale_sweep"]["median"]["phases"]
        fx = r["fixed_stale_sweep"]["median"]
        i = r["idle_sweep"]["median"]
        st = max(r["stale"], 1)
        q, a = ph["timer_query"], ph["timer_action"]
        lines.append(
            f"| {r['running']:,} | {r['stale']:,} | {_f(q['calls'], 0)} | {_f(q['rru'])} | "
            f"{_f(q['ms'])} | {_f(a['calls'], 0)} | {_f(a['rru'])} | {_f(a['wru'])} | "
            f"{_f(a['ms'], 0)} | {_f(a['calls'] / st, 2)} | {_f(i['ms'], 1)} | "
            f"{_f(i['calls'], 0)} | {_f(i['rru'], 1)} ({_f(i.get('billed_rru'), 1)}) | "
            f"{_f(fx['ms'], 0)} | "
            f"{_f(fx['calls'], 0)} | {_f(fx['rru'])} |")
    ex = rows[-1].get("examples", {}) if rows else {}
    if ex.get("per_stale_calls"):
        lines += ["", "Calls that act on one stale activity (from the trace): "
                  + "; ".join(f"`{c}`" for c in ex["per_stale_calls"]) + "."]
    if ex.get("idle_calls"):
        lines += ["", "An idle sweep: " + "; ".join(f"`{c}`" for c in ex["idle_calls"])
                  + f" - {len(ex['idle_calls'])} Queries of the two sparse indexes, "
                  f"about {len(ex['idle_calls'])} x {_f(p50, 2)} ms "
                  f"= {_f(len(ex['idle_calls']) * p50, 1)} ms at the measured p50 latency."]
    lines += [
        "",
        f"![calls per sweep](img/{charts[1]})",
        "",
        "**The reconcile part grows with running workflows.** It does not find stale "
        "activities: it revisits every non-terminal workflow on a schedule (first "
        "120 s after the start, then backing off with the workflow's age to at most an "
        f"hour), so a sweep every {rate:.0f} s visits about running workflows x "
        f"{rate:.0f} / {RECONCILE_INTERVAL:.0f} of them even when nothing is wrong "
        "(more while workflows are young: up to half of them per sweep in their first "
        "minutes). Its cost is per workflow, not per stale activity:",
        "",
        "| running workflows | due visits | next sweep (ms) | calls | RRU | WRU | "
        "billed RRU / WRU | "
        "calls / visit | RRU / visit | visit calls per running workflow per hour |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        c = r["reconcile_sweep"]["median"]
        act = c["phases"]["reconcile_action"]
        visits = max(c["reconciled"], 1)
        per_hour = act["calls"] / max(r["running"], 1) * (3600.0 / rate)
        lines.append(
            f"| {r['running']:,} | {_f(c['reconciled'], 0)} | {_f(c['ms'], 0)} | "
            f"{_f(c['calls'], 0)} | {_f(c['rru'])} | {_f(c['wru'])} | "
            f"{_f(c.get('billed_rru'))} / {_f(c.get('billed_wru'))} | "
            f"{_f(act['calls'] / visits, 2)} | {_f(act['rru'] / visits, 2)} | "
            f"{_f(per_hour, 2)} |")
    if ex.get("per_visit_calls"):
        lines += ["", "Calls of one reconcile visit to a healthy running workflow: "
                  + "; ".join(f"`{c}`" for c in ex["per_visit_calls"]) + "."]
    if rows:
        big = rows[-1]
        c = big["reconcile_sweep"]["median"]
        visits = c["reconciled"]
        if visits:
            per_visit_calls = c["phases"]["reconcile_action"]["calls"] / visits
            lines += [
                "",
                f"At {big['running']:,} running workflows the {_f(visits, 0)} visits of one "
                f"sweep took {_f(c['ms'] / 1000.0, 1)} s here ({_f(per_visit_calls, 1)} calls "
                f"each; made one after another at the measured p50 latency that is about "
                f"{_f(visits * per_visit_calls * p50 / 1000.0, 1)} s), against a "
                f"{rate:.0f} s schedule. With young workflows (visited every "
                "120 s) the same population would need 30 x as many visits per sweep; and "
                "the sweep takes at most 1,000 due entries per index shard per pass.",
            ]
    wide = result.get("wide")
    if wide:
        s = wide["stale_sweep"]["median"]
        sa = s["phases"]["timer_action"]
        c = wide["reconcile_sweep"]["median"]
        ca = c["phases"]["reconcile_action"]
        st = max(wide["stale"], 1)
        narrow = ""
        if rows:
            na = rows[0]["stale_sweep"]["median"]["phases"]["timer_action"]
            nst = max(rows[0]["stale"], 1)
            narrow = (f" (one activity per workflow: {_f(na['calls'] / nst, 2)} calls, "
                      f"{_f(na['rru'] / nst, 1)} RRU, {_f(na['ms'] / nst, 1)} ms)")
        lines += [
            "",
            f"**Wide workflows** ({wide['workflows']} workflows x "
            f"{wide['activities_per_workflow']:,} activities = {wide['running']:,} running; "
            f"{wide['stale']} stale in {wide['stale_workflows']} of them, the other "
            f"{wide['due_reconcile']} due a reconcile visit). Acting on one stale activity: "
            f"{_f(sa['calls'] / st, 2)} calls, {_f(sa['rru'] / st, 1)} RRU, "
            f"{_f(sa['ms'] / st, 1)} ms{narrow}. One reconcile visit: "
            f"{_f(ca['calls'] / max(c['reconciled'], 1), 2)} calls, "
            f"{_f(ca['rru'] / max(c['reconciled'], 1), 1)} RRU, "
            f"{_f(ca['ms'] / max(c['reconciled'], 1), 0)} ms. A time-out in a workflow that is "
            "already failing, and every reconcile visit, read the workflow's whole activity "
            "partition (a consistent Query), so these grow with the workflow's width - not "
            "with the number of running activities elsewhere.",
        ]
    checks = [f"{r['running']:,}: {c}" for r in rows for c in r.get("checks", [])]
    checks += [f"wide: {c}" for c in (wide or {}).get("checks", [])]
    lines += ["", "Verification: " + ("every stale sweep timed out exactly the stale "
                                       "activities, idle sweeps did nothing, and the next "
                                       "sweep visited exactly the due workflows."
                                       if not checks else "**problems:** "
                                       + "; ".join(checks))]
    lines += ["", "Reproduce: `./scripts/bench --only sweep` (`--quick`: 1k and 5k running, "
              "2 wide workflows).", ""]
    return "\n".join(lines)
