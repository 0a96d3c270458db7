"""Scale: where each workload's units land, key by key, and the ceiling the hottest key
implies at AWS's per-partition limits (issue 19's capacity model).

Every request of the measured client goes through :class:`benchmarks.billing.Meter`,
which charges each unit to the partition-key value it lands on, for every table and
every index (:mod:`benchmarks.keys`). For a workload of ``work`` units of work (starts,
map items, activities), a key that took ``u`` WCU can take at most 1,000 WCU/s on AWS,
so the workload can go no faster than ``1,000 * work / u`` per second; likewise 3,000
RCU/s for reads, and 40,000 WCU/s for a table's total (the default table quota). The
lowest of these is the workload's ceiling, and the key that sets it is named.

Workloads, scaled down with the same mix:

* ``runs``: N runs of one definition (a chain of 3 no-op ``python`` activities) started
  at once (issue: 500);
* ``map_input`` / ``map_upstream``: one run mapping over N items, the list in the run's
  input, then produced by an upstream activity (issue: 10,000);
* ``heartbeats``: external activities claimed by workers, each run by the heartbeat
  helper (``run_activity``) heartbeating 10 times, 30 s apart on the worker's clock,
  under a 300 s heartbeat timeout before it completes (1 M activities an hour of 5
  minutes heartbeating every 30 s is 10 heartbeats per activity; the helper writes the
  ones the deadline needs: engine/heartbeats.py);
* ``simple_api``: runs requested with ``workflow_request`` rows, their external
  activities completed with ``activity_event`` rows, through the real stream handlers
  (the local runtime);
* ``attributes``: runs of 100 registered names all started with one attribute value
  (``tenant=big``): where the ``by_attribute`` entries land; then what one page of 50
  runs costs through the billing proxy, by state alone, with no filter and by that
  attribute (issue 29: at most 64 requests).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.billing import Meter, Request
from benchmarks.common import Ctx, Workers, md_table, wait_end
from benchmarks.shapes import EXTERNAL, NOOP, chain
from benchmarks.throttle import KEY_RCU, KEY_WCU, TABLE_UNITS
from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import fresh_table_prefix

WORKERS = 32


def sizes(ctx: Ctx) -> dict[str, int]:
    """Issue 19's 500 runs and 10,000 items scaled down to what one DynamoDB Local on two
    cores runs in minutes; the shares and units per unit of work hardly move with size
    (the run's item grows with its input: see the report)."""
    return {"runs": ctx.size(300, 60), "map": ctx.size(1000, 200),
            "heartbeats": ctx.size(1000, 40), "simple_api": ctx.size(100, 30),
            "attributes": ctx.size(300, 60)}


def produce(run: object) -> dict[str, Any]:
    """The upstream of ``map_upstream``: the list to map over (size from the input)."""
    n = int(getattr(run, "input", {}).get("n", 0))
    return {"xs": list(range(n))}


# -- the model -------------------------------------------------------------------------


def _empty_claim(req: Request) -> bool:
    """A claim's read of the ``claimable`` index that found nothing (a Query of a shard,
    or one request naming several shards at once)."""
    return (req.label.startswith(("Query activity_exec.claimable",
                                  "ExecuteStatement activity_exec.claimable",
                                  "Query map_item.claimable",
                                  "ExecuteStatement map_item.claimable"))
            and req.label.endswith("(0 items)"))


def limits(rows: dict[str, dict[str, Any]]) -> list[tuple[float, str]]:
    """Every ceiling the model's ``rows`` imply, with what sets it, lowest first."""
    out = [(row[k]["ceiling"], f"{cat} {'WCU' if k == 'w' else 'RCU'} key "
            f"{row[k]['key'][:60]}") for cat, row in rows.items() for k in ("w", "r")
           if k in row and row[k]["ceiling"]]
    out += [(row["quota_ceiling"], f"{cat} table quota") for cat, row in rows.items()
            if row.get("quota_ceiling")]
    return sorted(out)


def model(requests: list[Request], work: int) -> dict[str, Any]:
    """Per table and index: the hottest key by writes and by reads, its share, the
    units per unit of work it took, and the ceilings they imply."""
    w: dict[tuple[str, str], float] = {}
    r: dict[tuple[str, str], float] = {}
    polls = [q for q in requests if _empty_claim(q)]
    for req in requests:
        req.charge(w, req.wkeys)
        if not _empty_claim(req):
            req.charge(r, req.rkeys)  # an idle worker's empty claim: counted apart
    rows: dict[str, dict[str, Any]] = {}
    for kind, units, limit in (("w", w, KEY_WCU), ("r", r, KEY_RCU)):
        for cat in sorted({c for c, _ in units}):
            keys = {k: n for (c, k), n in units.items() if c == cat}
            key, hot = max(keys.items(), key=lambda kv: kv[1])
            total = sum(keys.values())
            row = rows.setdefault(cat, {"cat": cat})
            row[kind] = {"key": key, "units": hot, "total": total, "keys": len(keys),
                         "share": hot / total if total else 0.0,
                         "per_work": hot / work, "ceiling": limit * work / hot if hot else None}
            if kind == "w" and "." not in cat:  # the table quota, on the table's total
                row["quota_ceiling"] = TABLE_UNITS * work / total if total else None
    ceiling, bound = min(limits(rows)) if rows else (None, "")
    return {"work": work, "rows": rows, "ceiling": ceiling, "bound_by": bound,
            "wru": sum(w.values()), "rru": sum(r.values()), "empty_claims": len(polls),
            "empty_claim_rru": sum(sum(q.rru.values()) for q in polls)}


# -- the workloads ---------------------------------------------------------------------


@contextmanager
def metered(ctx: Ctx, **kwargs: Any) -> Iterator[tuple[Meter, Whimbrel]]:
    prefix = fresh_table_prefix()
    meter = Meter(ctx.endpoint, prefix)
    try:
        with ctx.client(prefix, endpoint=meter.url, max_workers=WORKERS, **kwargs) as wb:
            yield meter, wb
    finally:
        meter.close()


def _measure(meter: Meter, go: Callable[[], None]) -> tuple[list[Request], float]:
    meter.settle()
    meter.drain()
    t0 = time.perf_counter()
    go()
    seconds = time.perf_counter() - t0
    meter.settle()
    return meter.drain(), seconds


def runs(ctx: Ctx, n: int) -> dict[str, Any]:
    with metered(ctx) as (meter, wb):
        wb.register_workflow(chain(3).definition("scale_runs"))

        def go() -> None:
            with ThreadPoolExecutor(16) as pool:
                ids = list(pool.map(lambda _: wb.start_workflow("scale_runs"), range(n)))
            for wx in ids:
                wait_end(wb, wx, 900, 0.25)
        reqs, s = _measure(meter, go)
    return {"unit": "starts/s", "what": f"{n} runs of one definition (chain of 3)",
            "seconds": s, **model(reqs, n)}


def maps(ctx: Ctx, n: int, upstream: bool) -> dict[str, Any]:
    with metered(ctx) as (meter, wb):
        acts: tuple[ActivityDefinition, ...] = (ActivityDefinition(
            "each", launcher=NOOP, map_over="$input.xs", max_concurrency=20),)
        if upstream:
            acts = (ActivityDefinition("produce", launcher=LauncherSpec.python(
                "benchmarks.bench_scale:produce")),
                    ActivityDefinition("each", ("produce",), launcher=NOOP,
                                       map_over="produce.xs", max_concurrency=20))
        wb.register_workflow(WorkflowDefinition("scale_map", acts))
        given = {"n": n} if upstream else {"xs": list(range(n))}

        def go() -> None:
            wait_end(wb, wb.start_workflow("scale_map", given), 1800, 0.25)
        reqs, s = _measure(meter, go)
    where = "from an upstream" if upstream else "in the run's input"
    return {"unit": "items/s", "what": f"one run mapping over {n:,} items, list {where}",
            "seconds": s, **model(reqs, n)}


class WorkerClock:
    """Real time plus, per worker thread, the time its heartbeats stood for: a worker
    that heartbeats every ``BEAT_SECONDS`` lives that long between two beats without the
    benchmark waiting for it."""

    def __init__(self) -> None:
        self.local = threading.local()

    def __call__(self) -> float:
        return time.time() + getattr(self.local, "offset", 0.0)

    def advance(self, seconds: float) -> None:
        self.local.offset = getattr(self.local, "offset", 0.0) + seconds


#: Workload (c): a heartbeat every 30 s under a 300 s heartbeat timeout.
BEAT_SECONDS = 30.0


def heartbeats(ctx: Ctx, n: int, beats: int = 10) -> dict[str, Any]:
    clock = WorkerClock()
    with metered(ctx, clock=clock) as (meter, wb):
        wb.register_workflow(WorkflowDefinition("scale_hb", (ActivityDefinition(
            "work", launcher=EXTERNAL, heartbeat_timeout_seconds=300),)))

        def worker() -> None:
            while (act := wb.claim(workflow_name="scale_hb")) is not None:
                with wb.run_activity(act.activity_exec_id) as run:
                    for _ in range(beats):
                        clock.advance(BEAT_SECONDS)
                        run.heartbeat()

        def go() -> None:
            ids = [wb.start_workflow("scale_hb") for _ in range(n)]
            with ThreadPoolExecutor(8) as pool:
                for f in [pool.submit(worker) for _ in range(8)]:
                    f.result()
            for wx in ids:
                wait_end(wb, wx, 900, 0.25)
        reqs, s = _measure(meter, go)
    return {"unit": "activities/s", "what": f"{n} external activities, {beats} heartbeats "
            f"each ({BEAT_SECONDS:g} s apart, 300 s timeout)", "seconds": s, **model(reqs, n),
            "priority_reads": priority_reads(reqs, n)}


def simple_api(ctx: Ctx, n: int) -> dict[str, Any]:
    prefix = fresh_table_prefix()
    meter = Meter(ctx.endpoint, prefix)
    try:
        # exclusive=False: no dev lease, which the deployed stack does not have.
        with LocalRuntime(meter.url, prefix, heartbeat_rate_seconds=0,
                          lambda_log_level="WARNING", exclusive=False) as rt:
            wb = rt.client
            wb.register_workflow(chain(2).definition("scale_simple", launcher=EXTERNAL))
            workers = Workers(wb, "scale_simple", 8, events=True)

            def go() -> None:
                ids = [workflow_exec_id_for(wb.request_workflow("scale_simple"))
                       for _ in range(n)]
                for wx in ids:
                    wait_end(wb, wx, 900, 0.25)
            try:
                reqs, s = _measure(meter, go)
            finally:
                workers.close()
    finally:
        meter.close()
    return {"unit": "activities/s", "what": f"{n} runs (chain of 2 external activities) "
            "through workflow_request and activity_event rows and the stream handlers",
            "seconds": s, **model(reqs, 2 * n)}


#: Registered names in the ``attributes`` workload: a listing by state alone or with no
#: filter must cost the same however many there are (issue 29 names 100).
NAMES = 100
#: The listings measured, each one page of 50.
LISTINGS = (("state RUNNING", {"state": "RUNNING"}), ("state FAILED", {"state": "FAILED"}),
            ("no filter", {}), ("attribute tenant=big", {"attributes": {"tenant": "big"}}))


def attributes(ctx: Ctx, n: int) -> dict[str, Any]:
    with metered(ctx) as (meter, wb):
        for i in range(NAMES):
            wb.register_workflow(WorkflowDefinition(f"list_{i:03d}", (ActivityDefinition(
                "w", launcher=EXTERNAL, retry=RetryPolicy(max_attempts=1)),)))

        def go() -> None:
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda i: wb.start_workflow(
                    f"list_{i % NAMES:03d}", attributes={"tenant": "big"}), range(n)))
        reqs, s = _measure(meter, go)
        for i in range(0, n, 4):  # every fourth run FAILED
            got = wb.claim(workflow_name=f"list_{i % NAMES:03d}")
            if got is not None:
                wb.transition_activity(got.activity_exec_id, Transition.FAILED, error="x")
        pages = {}
        for label, kwargs in LISTINGS:
            meter.settle()
            meter.drain()
            page = wb.list_workflows(limit=50, **kwargs)
            meter.settle()
            billed = meter.drain()
            pages[label] = {"runs": len(page.items), "requests": len(billed),
                            "rru": sum(sum(q.rru.values()) for q in billed),
                            "ops": dict(Counter(q.op for q in billed))}
    return {"unit": "starts/s", "what": f"{n} runs of {NAMES} names, each with attribute "
            "tenant=big", "seconds": s, "pages": pages, **model(reqs, n)}


def run(ctx: Ctx) -> dict[str, Any]:
    n = sizes(ctx)
    return {"workloads": {
        "runs": runs(ctx, n["runs"]),
        "map_input": maps(ctx, n["map"], upstream=False),
        "map_upstream": maps(ctx, n["map"], upstream=True),
        "heartbeats": heartbeats(ctx, n["heartbeats"]),
        "simple_api": simple_api(ctx, n["simple_api"]),
        "attributes": attributes(ctx, n["attributes"])}, "sizes": n}


# -- the report ------------------------------------------------------------------------


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}" if x >= 10 else f"{x:.2g}"


def table(result: dict[str, Any]) -> str:
    rows = []
    for name, wl in result["workloads"].items():
        for cat, row in sorted(wl["rows"].items()):
            w, r = row.get("w"), row.get("r")
            rows.append([
                name, f"`{cat}`",
                f"`{w['key'][:36]}` {w['share']:.0%} of {w['keys']:,} keys" if w else "—",
                f"{w['per_work']:.2f}" if w else "—", _fmt(w["ceiling"]) if w else "—",
                f"`{r['key'][:36]}` {r['share']:.0%} of {r['keys']:,} keys" if r else "—",
                f"{r['per_work']:.2f}" if r else "—", _fmt(r["ceiling"]) if r else "—",
                _fmt(row.get("quota_ceiling"))])
    return md_table(["workload", "table / index", "hottest key by WCU (share)",
                     "its WCU per unit of work", "ceiling at 1,000 WCU/s", "hottest key "
                     "by RCU (share)", "its RCU per unit", "ceiling at 3,000 RCU/s",
                     "ceiling at the 40,000 WCU/s table quota"], rows)


def summary(result: dict[str, Any]) -> str:
    return md_table(["workload", "what", "units of work", "WRU / unit", "RRU / unit",
                     "ceiling at AWS limits", "set by", "empty claims (RRU) apart"], [
        [name, wl["what"], f"{wl['work']:,}", f"{wl['wru'] / wl['work']:.2f}",
         f"{wl['rru'] / wl['work']:.2f}", f"**{_fmt(wl['ceiling'])} {wl['unit']}**",
         wl["bound_by"], f"{wl['empty_claims']:,} ({wl['empty_claim_rru']:,.0f})"]
        for name, wl in result["workloads"].items()])


def _hot(wl: dict[str, Any], cat: str, kind: str) -> str:
    row = wl["rows"].get(cat, {}).get(kind)
    if not row:
        return "—"
    unit = "WCU" if kind == "w" else "RCU"
    return (f"{row['per_work']:.2f} {unit}/item on 1 of {row['keys']:,} key"
            f"{'s' * (row['keys'] != 1)}: {_fmt(row['ceiling'])}/s")


def map_figures(results: Path) -> str:
    """Workload (b) at the issue's size, before and after issue 19's map partitions and
    small run item: from ``scale_map_10000_before.json`` and ``_after.json``
    (``python -m benchmarks.bench_scale --items 10000``)."""
    runs = {}
    for label in ("before", "after"):
        path = results / f"scale_map_10000_{label}.json"
        if path.exists():
            runs[label] = json.loads(path.read_text())
    if len(runs) < 2:
        return "_(not measured yet: `python -m benchmarks.bench_scale --items 10000`)_"
    rows = []
    for name in ("map_input", "map_upstream"):
        b, a = (runs[k]["workloads"][name] for k in ("before", "after"))
        rows.append([f"{name} ({runs['before']['items']:,} items)",
                     f"**{_fmt(b['ceiling'])} → {_fmt(a['ceiling'])} items/s**",
                     f"{b['bound_by'].split(' key')[0]} → {a['bound_by'].split(' key')[0]}",
                     f"{_hot(b, 'workflow_exec', 'r')} → {_hot(a, 'workflow_exec', 'r')}",
                     f"{_hot(b, 'activity_exec', 'w')} → {_hot(a, 'map_item', 'w')}",
                     f"{b['wru'] / b['work']:.2f} → {a['wru'] / a['work']:.2f}",
                     f"{b['rru'] / b['work']:.2f} → {a['rru'] / a['work']:.2f}",
                     f"{b['seconds']:.0f} → {a['seconds']:.0f}"])
    return md_table(["workload", "ceiling", "set by", "the run's item (reads)",
                     "the items' hottest key (writes)", "WRU / item", "RRU / item",
                     "wall s (this machine)"], rows)


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    return {"summary": summary(result), "table": table(result), **result["sizes"],
            "map_figures": map_figures(Path(__file__).resolve().parent / "results"),
            **heartbeat_figures(result["workloads"]["heartbeats"]),
            **listing_figures(result["workloads"]["attributes"])}


def listing_figures(wl: dict[str, Any]) -> dict[str, Any]:
    """The listings' cost per page and the ``by_attribute`` index's spread (issue 29)."""
    pages = md_table(["page of 50", "runs on it", "requests (target ≤ 64)", "of which",
                      "RRU"], [
        [label, f"{p['runs']:,}", f"**{p['requests']}**",
         ", ".join(f"{n} {op}" for op, n in sorted(p["ops"].items())), f"{p['rru']:.1f}"]
        for label, p in wl["pages"].items()])
    index = wl["rows"]["workflow_attribute.by_attribute"]["w"]
    return {"listing_pages": pages, "listing_most": max(p["requests"]
                                                         for p in wl["pages"].values()),
            "attr_share": index["share"], "attr_keys": index["keys"],
            "attr_ceiling": index["ceiling"], "attr_key": index["key"],
            "attr_mean": 1 / index["keys"]}


def heartbeat_figures(wl: dict[str, Any]) -> dict[str, Any]:
    """Workload (c)'s figures the report's prose quotes (issue 29)."""
    table_row = wl["rows"]["activity_exec"]
    later = limits(wl["rows"])[1:3]
    hot = wl["priority_reads"]
    return {"hb_table_wcu": table_row["w"]["total"] / wl["work"],
            "hb_quota": table_row["quota_ceiling"], "hb_wru": wl["wru"] / wl["work"],
            "hb_ceiling": wl["ceiling"], "hb_bound": wl["bound_by"],
            "hb_next": "; ".join(f"{_fmt(c)}/s, {what}" for c, what in later),
            "hb_priority_key": hot["key"], "hb_priority_rcu": hot["per_work"],
            "hb_priority_ceiling": KEY_RCU / hot["per_work"]}


def priority_reads(requests: list[Request], work: int) -> dict[str, Any]:
    """The busiest priority shard (``p<k>``) of ``claimable`` by reads, per unit of work
    (the key every claim read before issue 29's priority groups: ``p0``)."""
    r: dict[tuple[str, str], float] = {}
    for req in requests:
        if not _empty_claim(req):
            req.charge(r, req.rkeys)
    shards = {k: n for (cat, k), n in r.items()
              if cat == "activity_exec.claimable" and k.startswith("p")}
    key, units = max(shards.items(), key=lambda kv: kv[1]) if shards else ("—", 0.0)
    return {"key": key, "per_work": units / work, "keys": len(shards)}


# -- workload (b) alone, at any size -----------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.bench_scale --items 10000``: workload (b) alone (one run
    mapping over N items, the list in the input, then from an upstream) on a fresh
    DynamoDB Local, written to ``benchmarks/results/scale_map_<N>.json`` (or ``--out``);
    the full benchmark (``./scripts/bench --only scale``) runs it at a size that fits
    its time."""
    import argparse
    import os
    import sys

    from benchmarks.common import dynamodb

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_scale")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--label", default="", help="kept in the file (e.g. before/after)")
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    out = args.out or Path(__file__).resolve().parent / "results" / \
        f"scale_map_{args.items}.json"
    result: dict[str, Any] = {"items": args.items, "label": args.label, "workloads": {}}
    for name, upstream in (("map_input", False), ("map_upstream", True)):
        with dynamodb() as endpoint:
            started = time.perf_counter()
            wl = maps(Ctx(endpoint, False, 1), args.items, upstream)
            print(f"{name}: {time.perf_counter() - started:.0f} s, ceiling "
                  f"{_fmt(wl['ceiling'])} {wl['unit']} ({wl['bound_by']})",
                  file=sys.stderr, flush=True)
            result["workloads"][name] = wl
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(summary(result), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
