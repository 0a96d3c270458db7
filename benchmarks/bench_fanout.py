"""Wide fan-out: 1 → N → 1 on the Full Logic path with ``python`` no-op activities.

For each width, one warm-up workflow (1 → 10 → 1), then ``ctx.repeats`` measured ones on
the same tables. Time to completion is the workflow item's ``ended_epoch -
created_epoch`` (the engine's own clock: no polling delay in it); the wall time from the
``start_workflow`` call to the benchmark seeing the end is reported beside it.
:class:`benchmarks.billing.Billing` counts request units by AWS's rules and every write
per item key (table + primary key), so the largest number of writes any single item
received — which must stay O(1) per activity — is measured, not assumed.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_cost import PY_NOOP, fanout, wait_terminal
from benchmarks.billing import Billing
from benchmarks.common import BenchContext, median, percentile
from whimbrel.contract.states import WorkflowState
from whimbrel.store.store import Store

TITLE = "Wide fan-out"

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def short_item(item: str) -> str:
    """``table key`` with the execution id shortened to ``<wx>`` and a sort key that
    repeats its partition key kept once."""
    table, _, key = item.partition(" ")
    parts = key.split("|")
    if len(parts) > 1 and parts[0] in parts[-1]:
        key = parts[-1]
    return f"{table} {_UUID.sub('<wx>', key)}"


def widths(ctx: BenchContext) -> list[int]:
    return [10, 100, 1000] if not ctx.quick else [10, 50]


def _one(ctx: BenchContext, width: int) -> dict[str, Any]:
    defn = fanout(width, PY_NOOP, f"bench_fanout_{width}")
    warm = fanout(10, PY_NOOP, "bench_fanout_warmup")
    runs: list[dict[str, float]] = []
    last: dict[str, Any] = {}
    worst: dict[str, Any] = {}
    timeout = max(120.0, width * 0.6)
    with ctx.client(max_workers=32) as wb:
        wb.register_workflow(defn)
        wb.register_workflow(warm)
        viewer = Store(table_prefix=wb.table_prefix, endpoint_url=ctx.endpoint_url)
        wait_terminal(viewer, wb.start_workflow(warm.name), timeout)
        bill = Billing(wb.table_prefix)
        bill.attach_store(wb.store)
        try:
            for _ in range(ctx.repeats):
                bill.wait_quiet()
                bill.reset()
                t0 = time.perf_counter()
                m0 = time.monotonic()
                wx = wb.start_workflow(defn.name)
                wf = wait_terminal(viewer, wx, timeout)
                wall = time.perf_counter() - t0
                bill.wait_quiet()
                if wf.state != WorkflowState.COMPLETED.value:
                    raise RuntimeError(f"1→{width}→1 ended {wf.state}: {wf.error}")
                s = bill.summary()
                n = len(defn.activities)
                charges = bill.charges()
                lat = [(c.t1 - c.t0) * 1000 for c in charges]
                busy = sum(c.t1 - c.t0 for c in charges)
                # When each middle activity was queued, by the engine's own clock (the
                # history on its item), read through the unbilled client.
                queued = [float(h.at) for a in viewer.list_activities(wx)
                          if a.activity_name not in ("root", "join")
                          for h in (a.history or []) if h.state == "QUEUED"]
                done = [c.t1 for c in charges if "RUNNING→COMPLETED" in c.label]
                runs.append({
                    "mids_queued_seconds": (max(queued) - float(wf.created_epoch)
                                            if queued else 0.0),
                    "last_completed_seconds": (max(done) - m0) if done else 0.0,
                    "request_ms_p50": median(lat),
                    "request_ms_p99": percentile(lat, 99),
                    "mean_requests_in_flight": busy / max(1e-9, wall),
                    "seconds": float(wf.ended_epoch) - float(wf.created_epoch),
                    "wall_seconds": wall,
                    "wru_total": float(s["wru_total"]),
                    "rru_total": float(s["rru_total"]),
                    "reported_wru_total": float(s["reported_wru_total"]),
                    "reported_rru_total": float(s["reported_rru_total"]),
                    "wru_per_activity": float(s["wru_total"]) / n,
                    "rru_per_activity": float(s["rru_total"]) / n,
                    "requests": float(sum(s["calls"].values())),
                    "failed_writes": float(s["failed_writes"]),
                    "max_item_writes": float(s["max_item_writes"]),
                    "max_item_attempts": float(s["max_item_attempts"]),
                    "workflow_item_writes": float(
                        s["max_item_writes_by_table"].get("workflow_exec", 0)),
                    "activity_item_max_writes": float(
                        s["max_item_writes_by_table"].get("activity_exec", 0)),
                    "dependency_item_max_writes": float(
                        s["max_item_writes_by_table"].get("activity_exec_dependency", 0)),
                })
                failed = sorted({f"{c.label} ← {c.caller}" for c in charges
                                 if not c.ok and c.wru})
                if s["max_item_attempts"] >= worst.get("attempts", 0):
                    worst = {"attempts": s["max_item_attempts"],
                             "item": s["max_item_attempts_item"], "failed": failed}
                last = {"max_item": s["max_item"], "failed": failed,
                        "max_item_attempts_item": s["max_item_attempts_item"],
                        "histogram": s["writes_per_item_histogram"],
                        "max_item_writes_by_table": s["max_item_writes_by_table"],
                        "wru": s["wru"], "rru": s["rru"]}
        finally:
            bill.detach()
    keys = runs[0].keys()
    return {"width": width, "activities": width + 2,
            "median": {k: median([r[k] for r in runs]) for k in keys},
            "runs": runs, "last_run": last, "most_attempts": worst}


def run(ctx: BenchContext) -> dict[str, Any]:
    return {"widths": [_one(ctx, w) for w in widths(ctx)], "repeats": ctx.repeats,
            "quick": ctx.quick}


# -- report ------------------------------------------------------------------------------


def _charts(rows: list[dict[str, Any]], img_dir: Path) -> tuple[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    time_png = "bench_fanout_time_vs_width.png"
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ws = [r["width"] for r in rows]
    secs = [r["median"]["seconds"] for r in rows]
    ax.plot(ws, secs, marker="o", color="#1976d2", label="time to completion (median)")
    for r in rows:
        pts = [x["seconds"] for x in r["runs"]]
        ax.scatter([r["width"]] * len(pts), pts, color="#1976d2", alpha=0.3, s=12)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("fan-out width N (1 → N → 1)")
    ax.set_ylabel("seconds, start to COMPLETED")
    ax.set_title("Fan-out: time to completion vs width")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(img_dir / time_png, dpi=110)
    plt.close(fig)

    hist_png = "bench_fanout_writes_per_item.png"
    main = rows[-1]
    hist = {int(k): v for k, v in main["last_run"]["histogram"].items()}
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    xs = sorted(hist)
    ax.bar(xs, [hist[x] for x in xs], color="#ef6c00")
    for x in xs:
        ax.text(x, hist[x], str(hist[x]), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs)
    ax.set_xlabel("successful writes to one item (table + key)")
    ax.set_ylabel("items")
    ax.set_yscale("log")
    ax.set_title(f"1 → {main['width']} → 1: writes per item (one workflow)")
    fig.tight_layout()
    fig.savefig(img_dir / hist_png, dpi=110)
    plt.close(fig)
    return time_png, hist_png


def render(result: dict[str, Any], img_dir: Path) -> str:
    rows: list[dict[str, Any]] = result["widths"]
    time_png, hist_png = _charts(rows, img_dir)
    main = rows[-1]
    m = main["median"]
    quick = " (quick run: widths reduced)" if result.get("quick") else ""
    out = [
        f"## {TITLE}",
        "",
        "Reproduce: `./scripts/bench --only fanout` (quick: "
        "`./scripts/bench --quick --only fanout`). Full Logic path: `Whimbrel` in this "
        "process, `python` launcher activities running `benchmarks.activities:noop`, "
        "32 activity threads. Each width runs a 1 → 10 → 1 warm-up, then "
        f"{result['repeats']} measured workflows on the same tables; figures are "
        f"medians{quick}.",
        "",
        "**How it is measured.** *Time to completion* is the workflow item's "
        "`ended_epoch - created_epoch` (the engine's clock, so the benchmark's polling "
        "adds nothing); *wall* is from the `start_workflow` call until the benchmark saw "
        "the end. Request units are billed by AWS's rules by `benchmarks/billing.py` (see "
        "*Cost per activity*). The same hook counts every write per item key (table + "
        "primary key): the successful writes an item received, and separately the "
        "attempts including conditional writes that lost. *All N middle activities queued "
        "after* is the latest `QUEUED` time in their items' histories minus the "
        "workflow's `created_epoch` (both the engine's clock): the root's completion "
        "readies and queues them. Request latency and "
        "requests in flight come from the same hook (time from building a request to "
        "its response, summed over the run's wall time). Latency is "
        "of DynamoDB Local on this machine under this load, not of AWS.",
        "",
        "| width | activities | time to completion (s) | wall (s) | all N middle activities "
        "queued after (s) | requests / workflow | request latency p50 / p99 (ms) | requests in "
        "flight (mean) | WRU / activity | RRU / activity | most writes to one item "
        "(attempts) | workflow item writes | conditional writes lost |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        x = r["median"]
        out.append(
            f"| {r['width']} | {r['activities']} | {x['seconds']:.2f} | "
            f"{x['wall_seconds']:.2f} | {x['mids_queued_seconds']:.2f} | "
            f"{x['requests']:.0f} | {x['request_ms_p50']:.1f} / {x['request_ms_p99']:.0f} | "
            f"{x['mean_requests_in_flight']:.1f} | {x['wru_per_activity']:.2f} | "
            f"{x['rru_per_activity']:.2f} | "
            f"{x['max_item_writes']:.0f} ({x['max_item_attempts']:.0f}) | "
            f"{x['workflow_item_writes']:.0f} | {x['failed_writes']:.0f} |")
    last = main["last_run"]
    by_table = last["max_item_writes_by_table"]
    worst = main.get("most_attempts") or {"attempts": int(m["max_item_attempts"]),
                                          "item": last["max_item_attempts_item"],
                                          "failed": []}
    n_max = last["histogram"].get(str(int(m["max_item_writes"])), "?")
    out += [
        "",
        f"**1 → {main['width']} → 1:** {m['seconds']:.2f} s to completion, "
        f"{m['wru_total']:.0f} WRU and {m['rru_total']:.0f} RRU per workflow "
        f"(DynamoDB Local reported {m['reported_wru_total']:.0f} WRU and "
        f"{m['reported_rru_total']:.0f} RRU"
        + ("; Local reports 0 for conditional writes that lost and for Queries that "
           "return nothing, which AWS bills). " if (m["reported_wru_total"], m[
               "reported_rru_total"]) != (m["wru_total"], m["rru_total"]) else "). ")
        +
        f"The most writes any single item received: **{m['max_item_writes']:.0f}** "
        f"({n_max} items had that many in the last run, e.g. `{short_item(last['max_item'])}`;"
        f" counting conditional writes that lost, the most attempts on one item in any "
        f"run: {worst['attempts']} on `{short_item(worst['item'])}`"
        + (", lost by " + "; ".join(f"`{x}`" for x in worst["failed"]) if worst["failed"]
           else "")
        + "). "
        "Per table, the most writes to one item: "
        + ", ".join(f"`{t}` {n}" for t, n in sorted(by_table.items()))
        + f". The workflow item received {m['workflow_item_writes']:.0f} writes"
        + (" at every width measured" if len({r["median"]["workflow_item_writes"]
                                              for r in rows}) == 1 else "")
        + ": no counter is kept on it, nor on the join activity "
        "(fan-in edges are separate items, each written twice)."
        ,
        "",
        f"![Fan-out: time to completion vs width](img/{time_png})",
        "",
        f"![Writes per item, 1 → {main['width']} → 1](img/{hist_png})",
        "",
        "Units by table / index for one 1 → " + str(main["width"]) + " → 1 workflow "
        "(last run): "
        + ", ".join(f"`{k}` {v:.0f} WRU" for k, v in sorted(last["wru"].items()))
        + "; " + ", ".join(f"`{k}` {v:.0f} RRU" for k, v in sorted(last["rru"].items()))
        + ".",
        "",
    ]
    return "\n".join(out)
