"""Cost per activity: request units by table and index, Lambda invocations, dollars.

Each (API, shape) runs one warm-up workflow, then ``ctx.repeats`` measured ones, on fresh
tables. :class:`benchmarks.billing.Billing` sees every DynamoDB request of the run and
bills it by AWS's rules; DynamoDB Local's own ``ReturnConsumedCapacity=INDEXES`` figures
are kept beside it for the cross-check.

* **Full Logic**: a ``Whimbrel`` client in this process starts the workflow; activities
  are ``python`` launcher activities running ``benchmarks.activities:noop``.
* **Simple Lambda**: ``LocalRuntime`` pumps DynamoDB Local's streams into the real
  handlers in ``lambdas/``. A raw boto3 ``PutItem`` in ``workflow_request`` starts the
  workflow; activities use the ``lambda`` launcher, emulated here by a function that,
  when "invoked", reports ``RUNNING`` then ``COMPLETED`` with two raw ``PutItem`` rows in
  ``activity_event`` — what an activity deployed as a Lambda function does with the
  Simple API. The heartbeat schedule is off (its cost is per minute, not per activity).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3

from benchmarks.billing import Billing
from benchmarks.common import (
    PRICE_PER_LAMBDA_REQUEST,
    PRICE_PER_RRU,
    PRICE_PER_SFN_TRANSITION,
    PRICE_PER_TEMPORAL_ACTION,
    PRICE_PER_WRU,
    BenchContext,
    median,
)
from whimbrel.contract.definitions import ActivityDefinition, LauncherSpec, WorkflowDefinition
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.states import WorkflowState
from whimbrel.engine.ports import LaunchRequest
from whimbrel.store.models import WorkflowExecModel
from whimbrel.store.store import Store
from whimbrel.testing import fresh_table_prefix

TITLE = "Cost per activity"

PY_NOOP = LauncherSpec.python("benchmarks.activities:noop")
LAMBDA_NOOP = LauncherSpec("lambda", {"function": "bench-noop"})
FULL = "Full Logic"
SIMPLE = "Simple Lambda"
#: Tables whose writes belong to the workflow, not to any one activity.
WORKFLOW_TABLES = ("workflow_request", "workflow_exec")
TARGET_WRU_CHAIN_FULL = 6.0


# -- shapes ------------------------------------------------------------------------------


def chain(n: int, launcher: LauncherSpec, name: str) -> WorkflowDefinition:
    acts = [ActivityDefinition("a00", launcher=launcher)]
    acts += [ActivityDefinition(f"a{i:02d}", (f"a{i - 1:02d}",), launcher=launcher)
             for i in range(1, n)]
    return WorkflowDefinition(name, tuple(acts))


def diamond(width: int, launcher: LauncherSpec, name: str) -> WorkflowDefinition:
    mids = [f"m{i}" for i in range(width)]
    acts = [ActivityDefinition("first", launcher=launcher)]
    acts += [ActivityDefinition(m, ("first",), launcher=launcher) for m in mids]
    acts.append(ActivityDefinition("last", tuple(mids), launcher=launcher))
    return WorkflowDefinition(name, tuple(acts))


def fanout(width: int, launcher: LauncherSpec, name: str) -> WorkflowDefinition:
    mids = [f"m{i:04d}" for i in range(width)]
    acts = [ActivityDefinition("root", launcher=launcher)]
    acts += [ActivityDefinition(m, ("root",), launcher=launcher) for m in mids]
    acts.append(ActivityDefinition("join", tuple(mids), launcher=launcher))
    return WorkflowDefinition(name, tuple(acts))


def shapes(ctx: BenchContext) -> list[tuple[str, str, Callable[[LauncherSpec, str],
                                                                 WorkflowDefinition]]]:
    n_chain = 10
    w_fan = ctx.size(100, 20)
    return [
        ("chain", f"chain of {n_chain}", lambda ln, nm: chain(n_chain, ln, nm)),
        ("diamond", "diamond 1→2→1", lambda ln, nm: diamond(2, ln, nm)),
        ("fanout", f"fan-out 1→{w_fan}→1", lambda ln, nm: fanout(w_fan, ln, nm)),
    ]


def step_functions_transitions(defn: WorkflowDefinition) -> int:
    """States entered in an equivalent Step Functions Standard machine: one Task per
    activity, one Parallel/Map state per parallel stage, plus the start and end."""
    levels: dict[str, int] = {}
    for act in defn.activities:  # definitions are topologically ordered here
        levels[act.name] = 1 + max((levels[d] for d in act.depends_on), default=0)
    parallel_stages = sum(1 for lvl in set(levels.values())
                          if sum(1 for v in levels.values() if v == lvl) > 1)
    return len(defn.activities) + parallel_stages + 2


def temporal_actions(defn: WorkflowDefinition) -> int:
    """Temporal Cloud actions: the workflow start plus one per activity scheduled
    (no heartbeats, signals, timers or retries in these workflows)."""
    return 1 + len(defn.activities)


def floor_writes(defn: WorkflowDefinition) -> int:
    """The contract's minimum: 4 writes per dependency-free activity (create, QUEUED,
    RUNNING, COMPLETED), 5 with dependencies (READY too)."""
    return sum(5 if a.depends_on else 4 for a in defn.activities)


# -- the Simple path's activity: a Lambda function that reports through events -----------


class EventReportingLambda:
    """Stands in for the ``lambda`` launcher (an async ``Invoke``) in the local runtime:
    the 'function' writes ``RUNNING`` and then ``COMPLETED`` as two raw ``PutItem`` rows
    in ``activity_event``, exactly as docs/simple-api.md shows, with no Whimbrel code."""

    def __init__(self) -> None:
        self.client: Any = None
        self.table = ""
        self.invocations = 0
        self.pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="bench-lambda")

    def launch(self, request: LaunchRequest) -> None:
        self.invocations += 1
        self.pool.submit(self._run, request.activity_exec_id)

    def _run(self, aeid: str) -> None:
        for transition in ("RUNNING", "COMPLETED"):
            self.client.put_item(TableName=self.table, Item={
                "activity_event_id": {"S": str(uuid.uuid4())},
                "activity_exec_id": {"S": aeid},
                "transition": {"S": transition},
                "when_epoch": {"N": f"{time.time():.3f}"},
            })

    def close(self) -> None:
        self.pool.shutdown(wait=True)


# -- running -----------------------------------------------------------------------------


def wait_terminal(viewer: Store, wx: str, timeout: float = 300.0) -> WorkflowExecModel:
    """Poll (with a client the billing does not see) until the workflow has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        wf = viewer.get_workflow(wx)
        if wf is not None and WorkflowState(wf.state).is_terminal:
            return wf
        time.sleep(0.01)
    raise TimeoutError(f"workflow {wx} did not end within {timeout} s")


def _per(d: dict[str, float], n: float) -> dict[str, float]:
    return {k: v / n for k, v in d.items()}


def derive(summary: dict[str, Any], defn: WorkflowDefinition,
           invocations: dict[str, float] | None = None) -> dict[str, Any]:
    """Per-run figures from one workflow's billing summary."""
    n = len(defn.activities)
    wru: dict[str, float] = summary["wru"]
    rru: dict[str, float] = summary["rru"]
    wf_wru = sum(v for k, v in wru.items() if k.split(".")[0] in WORKFLOW_TABLES)
    wf_rru = sum(v for k, v in rru.items() if k.split(".")[0] in WORKFLOW_TABLES)
    total_wru = float(summary["wru_total"])
    total_rru = float(summary["rru_total"])
    floor = floor_writes(defn)
    flat: dict[str, float] = {
        "wru_total": total_wru,
        "rru_total": total_rru,
        "reported_wru_total": float(summary["reported_wru_total"]),
        "reported_rru_total": float(summary["reported_rru_total"]),
        "wru_workflow_level": wf_wru,
        "rru_workflow_level": wf_rru,
        "wru_per_activity": total_wru / n,
        "wru_activity_level_per_activity": (total_wru - wf_wru) / n,
        "rru_per_activity": total_rru / n,
        "rru_activity_level_per_activity": (total_rru - wf_rru) / n,
        "floor_per_activity": floor / n,
        "ratio_to_floor": total_wru / floor,
        "ratio_to_floor_activity_level": (total_wru - wf_wru) / floor,
        "failed_writes": float(summary["failed_writes"]),
        "max_item_writes": float(summary["max_item_writes"]),
        "unknown_before_images": float(summary["unknown_before_images"]),
        "requests": float(sum(summary["calls"].values())),
    }
    for table, size in summary.get("max_item_size", {}).items():
        flat[f"max_item_bytes_{table}"] = float(size)
    lam = 0.0
    lam_worst = 0.0
    if invocations is not None:
        flat.update({f"lambda_{k}": float(v) for k, v in invocations.items()})
        lam = invocations["invocations"] / n
        lam_worst = invocations["records"] / n
        flat["lambda_invocations_per_activity"] = lam
        flat["lambda_worst_case_per_activity"] = lam_worst
    flat["usd_per_million_dynamodb"] = (flat["wru_per_activity"] * PRICE_PER_WRU
                                        + flat["rru_per_activity"] * PRICE_PER_RRU) * 1e6
    flat["usd_per_million_lambda"] = lam * PRICE_PER_LAMBDA_REQUEST * 1e6
    flat["usd_per_million_lambda_worst"] = lam_worst * PRICE_PER_LAMBDA_REQUEST * 1e6
    flat["usd_per_million"] = flat["usd_per_million_dynamodb"] + flat["usd_per_million_lambda"]
    flat["usd_per_million_worst"] = (flat["usd_per_million_dynamodb"]
                                     + flat["usd_per_million_lambda_worst"])
    return {
        "flat": flat,
        "wru_per_activity_by_category": _per(wru, n),
        "rru_per_activity_by_category": _per(rru, n),
        "wru_by_category": dict(wru),
        "rru_by_category": dict(rru),
        "reported_wru_by_category": dict(summary["reported_wru"]),
        "reported_rru_by_category": dict(summary["reported_rru"]),
        "by_label": summary["by_label"],
        "max_item": summary["max_item"],
    }


def _median_dicts(dicts: list[dict[str, float]]) -> dict[str, float]:
    keys = sorted({k for d in dicts for k in d})
    return {k: median([float(d.get(k, 0.0)) for d in dicts]) for k in keys}


def _median_labels(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    labels = sorted({lbl for r in runs for lbl in r})
    out: dict[str, dict[str, float]] = {}
    for lbl in labels:
        rows = [r.get(lbl, {}) for r in runs]
        fields = sorted({f for row in rows for f in row})
        out[lbl] = {f: median([float(row.get(f, 0.0)) for row in rows]) for f in fields}
        out[lbl]["runs_seen"] = float(sum(1 for row in rows if row.get("calls")))
        out[lbl]["runs"] = float(len(runs))
    return out


def aggregate(api: str, shape: str, label: str, defn: WorkflowDefinition,
              runs: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    n = len(defn.activities)
    return {
        "api": api, "shape": shape, "label": label,
        "activities": n,
        "dependency_free": sum(1 for a in defn.activities if not a.depends_on),
        "with_dependencies": sum(1 for a in defn.activities if a.depends_on),
        "floor": floor_writes(defn),
        "sfn_transitions": step_functions_transitions(defn),
        "temporal_actions": temporal_actions(defn),
        "sfn_usd_per_million": step_functions_transitions(defn) / n
        * PRICE_PER_SFN_TRANSITION * 1e6,
        "temporal_usd_per_million": temporal_actions(defn) / n
        * PRICE_PER_TEMPORAL_ACTION * 1e6,
        "median": _median_dicts([r["flat"] for r in runs]),
        "wru_per_activity_by_category": _median_dicts(
            [r["wru_per_activity_by_category"] for r in runs]),
        "rru_per_activity_by_category": _median_dicts(
            [r["rru_per_activity_by_category"] for r in runs]),
        "wru_by_category": _median_dicts([r["wru_by_category"] for r in runs]),
        "rru_by_category": _median_dicts([r["rru_by_category"] for r in runs]),
        "reported_wru_by_category": _median_dicts(
            [r["reported_wru_by_category"] for r in runs]),
        "reported_rru_by_category": _median_dicts(
            [r["reported_rru_by_category"] for r in runs]),
        "by_label": _median_labels([r["by_label"] for r in runs]),
        "runs": [r["flat"] for r in runs],
        **extra,
    }


def run_full(ctx: BenchContext, shape: str, label: str,
             make: Callable[[LauncherSpec, str], WorkflowDefinition]) -> dict[str, Any]:
    defn = make(PY_NOOP, f"bench_cost_full_{shape}")
    runs: list[dict[str, Any]] = []
    with ctx.client() as wb:
        wb.register_workflow(defn)
        viewer = Store(table_prefix=wb.table_prefix, endpoint_url=ctx.endpoint_url)
        bill = Billing(wb.table_prefix)
        bill.attach_store(wb.store)
        try:
            for i in range(ctx.repeats + 1):  # the first run warms caches and pools
                bill.wait_quiet()
                bill.reset()
                wx = wb.start_workflow(defn.name, None)
                wf = wait_terminal(viewer, wx)
                bill.wait_quiet()
                if wf.state != WorkflowState.COMPLETED.value:
                    raise RuntimeError(f"{label}: workflow ended {wf.state}: {wf.error}")
                if i:
                    runs.append(derive(bill.summary(), defn))
        finally:
            bill.detach()
    return aggregate(FULL, shape, label, defn, runs, {})


def run_simple(ctx: BenchContext, shape: str, label: str,
               make: Callable[[LauncherSpec, str], WorkflowDefinition]) -> dict[str, Any]:
    from whimbrel.local.runtime import LocalRuntime

    defn = make(LAMBDA_NOOP, f"bench_cost_simple_{shape}")
    prefix = fresh_table_prefix()
    fn = EventReportingLambda()
    runs: list[dict[str, Any]] = []
    activity_invocations: list[float] = []
    try:
        with LocalRuntime(ctx.endpoint_url, prefix, heartbeat_rate_seconds=0,
                          launchers={"lambda": fn}, lambda_log_level="ERROR") as rt:
            rt.client.register_workflow(defn)
            viewer = Store(table_prefix=prefix, endpoint_url=ctx.endpoint_url)
            bill = Billing(prefix)
            bill.attach_store(rt.client.store)
            raw = bill.attach(boto3.client("dynamodb", endpoint_url=ctx.endpoint_url,
                                           region_name=rt.region))
            fn.client, fn.table = raw, f"{prefix}activity_event"
            try:
                for i in range(ctx.repeats + 1):
                    rt.wait_idle(timeout=60)
                    bill.wait_quiet()
                    bill.reset()
                    before = {name: (p.stats.invocations, p.stats.records)
                              for name, p in rt.pumps.items()}
                    fn_before = fn.invocations
                    request_id = str(uuid.uuid4())
                    raw.put_item(TableName=f"{prefix}workflow_request", Item={
                        "workflow_request_id": {"S": request_id},
                        "workflow_name": {"S": defn.name},
                        "when_epoch": {"N": f"{time.time():.3f}"},
                    })
                    wf = wait_terminal(viewer, workflow_exec_id_for(request_id))
                    rt.wait_idle(timeout=60)
                    bill.wait_quiet()
                    if wf.state != WorkflowState.COMPLETED.value:
                        raise RuntimeError(f"{label}: workflow ended {wf.state}: {wf.error}")
                    inv: dict[str, float] = {"invocations": 0.0, "records": 0.0}
                    for name, p in rt.pumps.items():
                        d_inv = p.stats.invocations - before[name][0]
                        d_rec = p.stats.records - before[name][1]
                        inv[f"{name}_invocations"] = float(d_inv)
                        inv[f"{name}_records"] = float(d_rec)
                        inv["invocations"] += d_inv
                        inv["records"] += d_rec
                    if i:
                        runs.append(derive(bill.summary(), defn, inv))
                        activity_invocations.append(float(fn.invocations - fn_before))
            finally:
                bill.detach()
    finally:
        fn.close()
        Store(table_prefix=prefix, endpoint_url=ctx.endpoint_url).delete_tables()
    return aggregate(SIMPLE, shape, label, defn, runs, {
        "activity_function_invocations": median(activity_invocations),
    })


def run(ctx: BenchContext) -> dict[str, Any]:
    scenarios: list[dict[str, Any]] = []
    for runner in (run_full, run_simple):
        for shape, label, make in shapes(ctx):
            scenarios.append(runner(ctx, shape, label, make))
    return {
        "scenarios": scenarios,
        "repeats": ctx.repeats,
        "quick": ctx.quick,
        "prices": {"wru": PRICE_PER_WRU * 1e6, "rru": PRICE_PER_RRU * 1e6,
                   "lambda_request": PRICE_PER_LAMBDA_REQUEST * 1e6,
                   "sfn_transition": PRICE_PER_SFN_TRANSITION * 1e6,
                   "temporal_action": PRICE_PER_TEMPORAL_ACTION * 1e6},
    }


# -- report ------------------------------------------------------------------------------

_COLORS = {
    "workflow_request": "#9e9e9e",
    "workflow_exec": "#607d8b",
    "workflow_exec.by_name": "#90a4ae",
    "workflow_exec.by_day": "#b0bec5",
    "workflow_exec.reconcile": "#cfd8dc",
    "activity_exec": "#1976d2",
    "activity_exec.timers": "#64b5f6",
    "activity_exec.claimable": "#bbdefb",
    "activity_exec_dependency": "#ef6c00",
    "activity_event": "#43a047",
    "rejection": "#e53935",
}


def _chart(scenarios: list[dict[str, Any]], img_dir: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = "bench_cost_wru_per_activity.png"
    cats = sorted({c for s in scenarios for c in s["wru_per_activity_by_category"]},
                  key=lambda c: (list(_COLORS).index(c) if c in _COLORS else 99, c))
    fig, ax = plt.subplots(figsize=(10, 5.2))
    xs = list(range(len(scenarios)))
    bottoms = [0.0] * len(scenarios)
    for cat in cats:
        vals = [s["wru_per_activity_by_category"].get(cat, 0.0) for s in scenarios]
        if not any(vals):
            continue
        ax.bar(xs, vals, bottom=bottoms, label=cat, color=_COLORS.get(cat), width=0.6,
               edgecolor="white", linewidth=0.5)
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    for x, s in zip(xs, scenarios, strict=True):
        floor = s["floor"] / s["activities"]
        ax.plot([x - 0.33, x + 0.33], [floor, floor], color="black", linestyle="--",
                linewidth=1)
        ax.text(x, bottoms[x] + 0.1, f"{bottoms[x]:.2f}", ha="center", va="bottom",
                fontsize=8)
    ax.axhline(TARGET_WRU_CHAIN_FULL, color="#c62828", linewidth=0.8, linestyle=":")
    ax.text(-0.45, TARGET_WRU_CHAIN_FULL + 0.05, "target: 6 WRU (chain, Full Logic)",
            ha="left", va="bottom", fontsize=7, color="#c62828")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{s['api']}\n{s['label']}" for s in scenarios], fontsize=8)
    ax.set_ylabel("WRU per activity (AWS billing rules)")
    ax.set_title("Write request units per activity by table / index "
                 "(dashed: the contract's floor)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(img_dir / name, dpi=110)
    plt.close(fig)
    return name


def _dollar_chart(scenarios: list[dict[str, Any]], img_dir: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = "bench_cost_dollars.png"
    shapes_ = []
    for s in scenarios:
        if s["label"] not in shapes_:
            shapes_.append(s["label"])
    series = [
        ("Whimbrel Full Logic", "#1976d2",
         lambda lbl: _find(scenarios, FULL, lbl)["median"]["usd_per_million"]),
        ("Whimbrel Simple Lambda", "#43a047",
         lambda lbl: _find(scenarios, SIMPLE, lbl)["median"]["usd_per_million"]),
        ("Step Functions Standard", "#ef6c00",
         lambda lbl: _find(scenarios, FULL, lbl)["sfn_usd_per_million"]),
        ("Temporal Cloud", "#6a1b9a",
         lambda lbl: _find(scenarios, FULL, lbl)["temporal_usd_per_million"]),
    ]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.2
    for i, (title, color, get) in enumerate(series):
        xs = [j + (i - 1.5) * width for j in range(len(shapes_))]
        vals = [get(lbl) for lbl in shapes_]
        ax.bar(xs, vals, width=width, label=title, color=color)
        for x, v in zip(xs, vals, strict=True):
            ax.text(x, v + 0.6, f"${v:.2f}" if v < 10 else f"${v:.0f}", ha="center",
                    fontsize=7)
    ax.set_xticks(range(len(shapes_)))
    ax.set_xticklabels(shapes_)
    ax.set_ylabel("US$ per million activities")
    ax.set_title("Orchestration cost per million activities, on-demand us-east-1")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(img_dir / name, dpi=110)
    plt.close(fig)
    return name


def _find(scenarios: list[dict[str, Any]], api: str, label: str) -> dict[str, Any]:
    for s in scenarios:
        if s["api"] == api and s["label"] == label:
            return s
    raise KeyError((api, label))


def _explain(label: str, calc: float, reported: float) -> str:
    if "condition failed" in label:
        return ("a conditional write that lost: DynamoDB Local returns no ConsumedCapacity "
                "with ConditionalCheckFailedException; AWS bills it (size of the existing "
                "item, at least 1 WRU)")
    if "Query" in label and reported < calc:
        return ("a Query that returned nothing: Local reports 0; AWS bills the minimum "
                "(1 RRU strongly consistent, 0.5 eventually consistent)")
    if "Transact" in label:
        return "transactional: AWS bills table items at 2x"
    return "unexplained: item sizes near a 1 KB / 4 KB boundary, or a shadow image out of date"


def _fmt(v: float, nd: int = 2) -> str:
    return f"{v:.{nd}f}"


def render(result: dict[str, Any], img_dir: Path) -> str:
    scenarios: list[dict[str, Any]] = result["scenarios"]
    chart = _chart(scenarios, img_dir)
    dollars = _dollar_chart(scenarios, img_dir)
    quick = " (quick run: the fan-out is 1→20→1)" if result.get("quick") else ""
    out = [
        f"## {TITLE}",
        "",
        "Reproduce: `./scripts/bench --only cost` (quick smoke run: "
        "`./scripts/bench --quick --only cost`). Every figure is the median over "
        f"{result['repeats']} workflows per row{quick}, each after one warm-up workflow "
        "on the same tables.",
        "",
        "**How it is measured.** `benchmarks/billing.py` hooks the botocore clients of the "
        "run (the store's PynamoDB connections and the raw boto3 clients) and bills each "
        "request by AWS's on-demand rules from item sizes it computes itself: "
        "ceil(size/1 KB) WRU per write, size being the larger of the before and after "
        "images; a conditional write that loses still costs ceil(existing item/1 KB); "
        "1 WRU per KEYS_ONLY index entry added or removed, 2 when its key changes, 0 when "
        "the write leaves the index key attributes alone; ceil(size/4 KB) RRU per "
        "consistent read (half when eventually consistent), Query sizes summed before "
        "rounding, at least one unit per request; transactions 2x. The same requests "
        "carry `ReturnConsumedCapacity=INDEXES`, and DynamoDB Local's answer is kept for "
        "the cross-check below. Reads made only to watch the benchmark (polling for the "
        "end) go through a client the billing does not see. Stream reads by Lambda "
        "(GetRecords) are free on AWS and are not counted.",
        "",
        "* **Full Logic**: `Whimbrel.start_workflow` in this process; `python` launcher "
        "activities running `benchmarks.activities:noop`. The `manual` request row is "
        "written (and ignored by the stream filter, which AWS does not bill).",
        "* **Simple Lambda**: `LocalRuntime` feeds DynamoDB Local's real streams to the "
        "real handlers in `lambdas/`. A raw `PutItem` in `workflow_request` starts the "
        "workflow; each activity uses the `lambda` launcher, emulated by a function that, "
        "once 'invoked', writes `RUNNING` then `COMPLETED` as raw `PutItem` rows in "
        "`activity_event` (docs/simple-api.md) — an activity deployed as a Lambda "
        "function that reports through the Simple API. Lambda invocations are the stream "
        "pumps' handler invocations (batches of up to 10 records); the worst case is one "
        "invocation per record. The activity's own function invocation (1 per activity) "
        "is the work itself and is excluded here, as it would be for Step Functions or "
        "Temporal. The heartbeat schedule is off: it costs per minute, not per activity.",
        "",
        "Workflow-level writes (request row, `workflow_exec` item and its indexes) are "
        "amortized over the workflow's activities in *WRU / activity* and shown separately "
        "per workflow. The floor is the contract's minimum: 4 writes for a "
        "dependency-free activity (create, QUEUED, RUNNING, COMPLETED), 5 with "
        "dependencies (READY too).",
        "",
        "| API | workflow | activities | WRU / activity | activity-level WRU / activity "
        "| workflow-level WRU / workflow | floor / activity | ratio to floor (all-in / "
        "activity-level) | RRU / activity | Lambda invocations / activity (measured / "
        "worst case) | $ / million activities |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in scenarios:
        m = s["median"]
        lam = (f"{_fmt(m['lambda_invocations_per_activity'])} / "
               f"{_fmt(m['lambda_worst_case_per_activity'])}"
               if "lambda_invocations_per_activity" in m else "0 (in-process)")
        usd = _fmt(m["usd_per_million"])
        if "lambda_invocations_per_activity" in m:
            usd += f" (worst case {_fmt(m['usd_per_million_worst'])})"
        out.append(
            f"| {s['api']} | {s['label']} | {s['activities']} | "
            f"**{_fmt(m['wru_per_activity'])}** | "
            f"{_fmt(m['wru_activity_level_per_activity'])} | "
            f"{_fmt(m['wru_workflow_level'], 1)} | {_fmt(m['floor_per_activity'])} | "
            f"{_fmt(m['ratio_to_floor'])} / {_fmt(m['ratio_to_floor_activity_level'])} | "
            f"{_fmt(m['rru_per_activity'])} | {lam} | {usd} |")
    chain_full = _find(scenarios, FULL, scenarios[0]["label"])
    got = chain_full["median"]["wru_per_activity"]
    verdict = "meets" if got <= TARGET_WRU_CHAIN_FULL else "misses"
    out += [
        "",
        f"**Target** (at most {TARGET_WRU_CHAIN_FULL:g} WRU per activity in a chain on the "
        f"Full Logic path, all-in): {_fmt(got)} WRU — {verdict} it.",
        "",
        _sizes_line(scenarios),
        "",
        f"![WRU per activity by table and index](img/{chart})",
        "",
        "### Dollars per million activities, beside Step Functions and Temporal",
        "",
        f"Prices: ${result['prices']['wru']:.3f} per million WRU, "
        f"${result['prices']['rru']:.3f} per million RRU, "
        f"${result['prices']['lambda_request']:.2f} per million Lambda requests "
        "(Lambda duration is not included), Step Functions Standard "
        f"${result['prices']['sfn_transition']:.0f} per million state transitions, "
        f"Temporal Cloud ${result['prices']['temporal_action']:.0f} per million actions.",
        "",
        "Counting assumptions. *Step Functions Standard*: the same DAG as one Task state "
        "per activity, one Parallel (or inline Map) state per stage that runs more than "
        "one activity, every state entered inside each branch counted, plus one "
        "transition for the start and one for the end (drop 2 per workflow if they are "
        "not billed). *Temporal Cloud*: one action for the workflow start and one per "
        "activity scheduled; no heartbeats, signals, timers or retries in these "
        "workflows; completing the workflow is not an action.",
        "",
        "| workflow | activities | Whimbrel Full Logic $/M | Whimbrel Simple Lambda $/M "
        "(worst case) | Step Functions transitions / workflow | Step Functions $/M "
        "| Temporal actions / workflow | Temporal $/M |",
        "|---|---|---|---|---|---|---|---|",
    ]
    labels: list[str] = []
    for s in scenarios:
        if s["label"] not in labels:
            labels.append(s["label"])
    for lbl in labels:
        f, sm = _find(scenarios, FULL, lbl), _find(scenarios, SIMPLE, lbl)
        out.append(
            f"| {lbl} | {f['activities']} | {_fmt(f['median']['usd_per_million'])} | "
            f"{_fmt(sm['median']['usd_per_million'])} "
            f"({_fmt(sm['median']['usd_per_million_worst'])}) | {f['sfn_transitions']} | "
            f"{_fmt(f['sfn_usd_per_million'])} | {f['temporal_actions']} | "
            f"{_fmt(f['temporal_usd_per_million'])} |")
    out += ["", f"![Dollars per million activities](img/{dollars})", ""]

    out += [
        "### Workflow-level writes, per workflow",
        "",
        "| API | workflow | " + " | ".join(f"`{t}`" for t in _workflow_cats(scenarios))
        + " | total |",
        "|---|---|" + "---|" * (len(_workflow_cats(scenarios)) + 1),
    ]
    for s in scenarios:
        cats = _workflow_cats(scenarios)
        vals = [s["wru_by_category"].get(c, 0.0) for c in cats]
        out.append(f"| {s['api']} | {s['label']} | "
                   + " | ".join(_fmt(v, 1) for v in vals) + f" | {_fmt(sum(vals), 1)} |")

    out += [
        "",
        "### Where the units go",
        "",
        "Every request of one workflow, grouped by what it did (median per workflow). "
        "`A→B` is a state change of that item; *set …* names the attributes an update "
        "wrote without changing the state.",
        "",
    ]
    for s in scenarios:
        out += [f"<details><summary>{s['api']}, {s['label']}: "
                f"{_fmt(s['median']['wru_total'], 1)} WRU, "
                f"{_fmt(s['median']['rru_total'], 1)} RRU, "
                f"{_fmt(s['median']['requests'], 0)} requests per workflow</summary>",
                "",
                "| request | calls | WRU | RRU | Local reported WRU | Local reported RRU |",
                "|---|---|---|---|---|---|"]
        rows = sorted(s["by_label"].items(), key=lambda kv: (-kv[1].get("wru", 0.0),
                                                              -kv[1].get("rru", 0.0)))
        for lbl, row in rows:
            calls = _fmt(row["calls"], 0 if float(row["calls"]).is_integer() else 1)
            if row.get("runs_seen", 0) < row.get("runs", 0):
                calls += f" (in {row['runs_seen']:.0f} of {row['runs']:.0f} runs)"
            out.append(f"| {lbl} | {calls} | {_fmt(row['wru'], 1)} | "
                       f"{_fmt(row['rru'], 1)} | {_fmt(row['reported_wru'], 1)} | "
                       f"{_fmt(row['reported_rru'], 1)} |")
        out += ["", "</details>", ""]

    out += [
        "### Cross-check with DynamoDB Local's ConsumedCapacity",
        "",
        "Totals per workflow, this calculator vs DynamoDB Local "
        "(`ReturnConsumedCapacity=INDEXES`, per table and per index):",
        "",
        "| API | workflow | WRU (calc / Local) | RRU (calc / Local) |",
        "|---|---|---|---|",
    ]
    for s in scenarios:
        m = s["median"]
        out.append(f"| {s['api']} | {s['label']} | {_fmt(m['wru_total'], 1)} / "
                   f"{_fmt(m['reported_wru_total'], 1)} | {_fmt(m['rru_total'], 1)} / "
                   f"{_fmt(m['reported_rru_total'], 1)} |")
    diffs: list[str] = []
    for s in scenarios:
        for lbl, row in sorted(s["by_label"].items()):
            for kind in ("wru", "rru"):
                calc, rep = row.get(kind, 0.0), row.get(f"reported_{kind}", 0.0)
                if abs(calc - rep) > 1e-9:
                    diffs.append(f"| {s['api']} | {s['label']} | {lbl} | {kind.upper()} | "
                                 f"{_fmt(calc, 1)} | {_fmt(rep, 1)} | "
                                 f"{_explain(lbl, calc, rep)} |")
        for kind in ("wru", "rru"):
            calc_c = s[f"{kind}_by_category"]
            rep_c = s[f"reported_{kind}_by_category"]
            for cat in sorted(set(calc_c) | set(rep_c)):
                if "." in cat and abs(calc_c.get(cat, 0.0) - rep_c.get(cat, 0.0)) > 1e-9:
                    diffs.append(f"| {s['api']} | {s['label']} | index `{cat}` | "
                                 f"{kind.upper()} | {_fmt(calc_c.get(cat, 0.0), 1)} | "
                                 f"{_fmt(rep_c.get(cat, 0.0), 1)} | index units differ |")
    if diffs:
        out += ["", "Where they disagree (per workflow):", "",
                "| API | workflow | request | units | calc | Local | why |",
                "|---|---|---|---|---|---|---|", *diffs]
    else:
        out += ["", "They agree on every request."]
    out.append("")
    return "\n".join(out)


def _sizes_line(scenarios: list[dict[str, Any]]) -> str:
    best: dict[str, tuple[float, str]] = {}
    for s in scenarios:
        for key, v in s["median"].items():
            if key.startswith("max_item_bytes_"):
                table = key.removeprefix("max_item_bytes_")
                if v > best.get(table, (0.0, ""))[0]:
                    best[table] = (v, f"{s['api']}, {s['label']}")
    parts = [f"`{t}` {v:.0f} B ({where})" for t, (v, where) in sorted(best.items())]
    return ("Largest item images written (bytes by AWS's size rules; a write costs 2 WRU "
            "once the larger of its before/after images passes 1,024 B): "
            + ", ".join(parts) + ".")


def _workflow_cats(scenarios: list[dict[str, Any]]) -> list[str]:
    cats = {c for s in scenarios for c in s["wru_by_category"]
            if c.split(".")[0] in WORKFLOW_TABLES}
    return sorted(cats, key=lambda c: (list(_COLORS).index(c) if c in _COLORS else 99, c))
