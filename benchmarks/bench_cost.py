"""Cost per activity by AWS billing rules, Full Logic and Simple Lambda paths: every
request of the measured client goes through :class:`benchmarks.billing.Meter`."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.billing import Meter, summarize
from benchmarks.common import PRICES, Ctx, bars, md_table, medians, wait_end
from benchmarks.shapes import NOOP, Shape, chain, diamond, fan
from whimbrel import LauncherSpec, Whimbrel, workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import fresh_table_prefix

WORKFLOW_TABLES = ("workflow_request", "workflow_exec")
FULL, SIMPLE = "Full Logic", "Simple Lambda"


def shapes(ctx: Ctx) -> list[Shape]:
    return [chain(10), diamond(), fan(ctx.size(100, 20))]


class EventReportingLambda:
    """The ``lambda`` launcher, emulated: the 'function' reports RUNNING then COMPLETED
    with the Simple API, as an activity deployed as a Lambda function would."""

    client: Whimbrel

    def launch(self, request: Any) -> None:
        threading.Thread(target=lambda: [self.client.send_activity_event(
            request.activity_exec_id, move) for move in ("RUNNING", "COMPLETED")]).start()


def derive(s: dict[str, Any], n: int, lambdas: int, records: int) -> dict[str, float]:
    """Per-activity figures of one workflow of ``n`` activities (``s``: its summary)."""
    wf = sum(v for k, v in s["wru"].items() if k.split(".")[0] in WORKFLOW_TABLES)
    ddb = (s["wru_total"] * PRICES["wru"] + s["rru_total"] * PRICES["rru"]) / n
    return {"wru_per_activity": s["wru_total"] / n, "activity_level": (s["wru_total"] - wf) / n,
            "workflow_level": wf, "rru_per_activity": s["rru_total"] / n,
            "requests_per_activity": s["requests"] / n, "lambda": lambdas / n,
            "lambda_worst": records / n, "usd": ddb + lambdas / n * PRICES["lambda_request"],
            "usd_worst": ddb + records / n * PRICES["lambda_request"], **{k: s[k] for k in (
                "wru_total", "rru_total", "reported_wru_total", "reported_rru_total")}}


def measure(ctx: Ctx, api: str, shape: Shape, repeats: int) -> dict[str, Any]:
    """``repeats`` workflows of ``shape`` after a warm-up, every request billed."""
    prefix = fresh_table_prefix()
    fn = EventReportingLambda()
    runs: list[dict[str, float]] = []
    with ExitStack() as stack:
        meter = Meter(ctx.endpoint, prefix)
        stack.callback(meter.close)
        wb = stack.enter_context(ctx.client(prefix, endpoint=meter.url))
        view = stack.enter_context(Whimbrel(ctx.endpoint, prefix))
        # exclusive=False: no dev lease, which the deployed stack does not have.
        rt = stack.enter_context(LocalRuntime(
            meter.url, prefix, heartbeat_rate_seconds=0, poll_interval=0.01,
            launchers={"lambda": fn}, lambda_log_level="ERROR",
            exclusive=False)) if api == SIMPLE else None
        pumps = list(rt.pumps.values()) if rt else []
        fn.client = rt.client if rt else wb
        wb.register_workflow(shape.definition("cost", LauncherSpec.parse(
            "lambda:bench-noop") if rt else NOOP))
        for i in range(repeats + 1):
            meter.settle()
            meter.drain()
            before = [sum(p.stats.invocations for p in pumps), sum(p.stats.records for p in pumps)]
            # Simple API: one workflow_request item; the stream does the rest.
            wait_end(view, workflow_exec_id_for(rt.client.request_workflow("cost")) if rt
                     else wb.start_workflow("cost"), poll=0.05)
            if rt:
                rt.wait_idle(60)
            meter.settle()
            last = summarize(meter.drain())
            runs += [derive(last, shape.steps, sum(p.stats.invocations for p in pumps) - before[0],
                            sum(p.stats.records for p in pumps) - before[1])] if i else []
    return {"api": api, "shape": shape.label, "steps": shape.steps, "median": medians(runs),
            "last": last, **{k: last[k] for k in ("labels", "wru", "reported_wru")},
            "floor": shape.floor_writes() / shape.steps, "sfn": shape.sfn_transitions(),
            "temporal": shape.temporal_actions()}


def run(ctx: Ctx) -> dict[str, Any]:
    return {"scenarios": [{k: v for k, v in measure(ctx, api, s, ctx.repeats).items() if k !=
                           "last"} for api in (FULL, SIMPLE) for s in shapes(ctx)],
            "prices": PRICES}


def _why(label: str) -> str:
    return "a conditional write that lost: Local reports nothing, AWS bills it" if \
        "condition failed" in label else "an empty Query: Local reports 0, AWS bills the " \
        "minimum unit" if "(0 items)" in label else "**unexplained**"


def chain_full(result: dict[str, Any]) -> dict[str, float]:  # for the targets table
    return dict(next(s for s in result["scenarios"] if s["api"] == FULL)["median"])


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    sc = result["scenarios"]
    rows, cross = [], []
    for s in sc:
        m = s["median"]
        rows.append([s["api"], s["shape"], s["steps"], f"**{m['wru_per_activity']:.2f}**",
                     f"{m['activity_level']:.2f}", f"{m['workflow_level']:.1f}",
                     f"{s['floor']:.2f}", f"{m['rru_per_activity']:.2f}",
                     f"{m['requests_per_activity']:.1f}", f"{m['lambda']:.2f} "
                     f"({m['lambda_worst']:.2f})" if s["api"] == SIMPLE else "0",
                     f"{m['usd']:.2f}"])
        diffs = [f"{k}: {v['wru'] + v['rru']:g} / {v['reported_wru'] + v['reported_rru']:g} "
                 f"({_why(k)})" for k, v in sorted(s["labels"].items())
                 if abs(v["wru"] + v["rru"] - v["reported_wru"] - v["reported_rru"]) > 1e-9]
        cross.append([s["api"], s["shape"], f"{m['wru_total']:g} / {m['reported_wru_total']:g}",
                      f"{m['rru_total']:g} / {m['reported_rru_total']:g}",
                      "; ".join(diffs) or "nowhere"])
    half = len(sc) // 2
    usd = [[f["shape"], f"{f['median']['usd']:.2f}", f"{s['median']['usd']:.2f} "
            f"({s['median']['usd_worst']:.2f})", f["sfn"],
            f"{f['sfn'] / f['steps'] * PRICES['sfn_transition']:.2f}", f["temporal"],
            f"{f['temporal'] / f['steps'] * PRICES['temporal_action']:.2f}"]
           for f, s in zip(sc[:half], sc[half:], strict=True)]
    chart = bars(img / "bench_cost_wru.png", [f"{s['api']}\n{s['shape']}" for s in sc],
                 {c: [s["wru"].get(c, 0.0) / s["steps"] for s in sc]
                  for c in sorted({c for s in sc for c in s["wru"]})},
                 "WRU per activity (AWS rules)", "Write units per activity by table / index",
                 stacked=True, hline=(4.0, "target: 4 WRU (chain, Full Logic)"))
    return {"chart": chart, "prices": PRICES, "table": md_table(
        ["API", "workflow", "activities", "WRU / activity (all-in)", "activity-level",
         "workflow-level WRU / workflow", "floor", "RRU / activity", "requests / activity",
         "Lambda invocations / activity (worst case)", "$ / million activities"], rows),
        "usd_table": md_table(["workflow", "Whimbrel Full Logic", "Whimbrel Simple Lambda "
                               "(worst case)", "Step Functions transitions", "Step Functions",
                               "Temporal actions", "Temporal Cloud"], usd),
        "crosscheck": md_table(["API", "workflow", "WRU calc / Local", "RRU calc / Local",
                                "where they differ"], cross)}
