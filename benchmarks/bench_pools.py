"""What a pool, a rate and ``max_running`` add to a run, and the ceiling of one pool
(issue 22): the cases of ``tests/integration/test_pool_costs.py`` (which pins the write
units with DynamoDB Local's own figures), every request billed by
:class:`benchmarks.billing.Meter` by AWS's rules — a conditional write that fails costs
its unit here, a start that probes a full pool pays for it — and charged to the
partition-key value it lands on."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.billing import Meter, summarize
from benchmarks.common import PRICES, Ctx, md_table, medians
from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.testing import StepClock, fresh_table_prefix

EXT = LauncherSpec.external()
#: key, label, definition, runs of one case (the measured units are per case).
CASES: list[tuple[str, str, str, int]] = [
    ("base", "one external activity (no limit)", "plain", 1),
    ("slot", "pool slot, free", "slotted", 1),
    ("rate", "pool rate, token there", "rated", 1),
    ("waited", "pool of one slot: a run, and one that waits for it", "single", 2),
    ("capped", "max_running, free slot", "capped", 1),
    ("queued", "max_running 1: a run, and one QUEUED behind it", "queue", 2),
]
#: The ceiling run: this many starts at once through a pool of this many slots.
CEILING_RUNS, CEILING_SLOTS = 160, 8


def _definitions() -> list[WorkflowDefinition]:
    def one(name: str, pool: str | None = None,
            max_running: int | None = None) -> WorkflowDefinition:
        return WorkflowDefinition(name, (ActivityDefinition("a", launcher=EXT, pool=pool),),
                                  max_running=max_running)
    return [one("plain"), one("slotted", "slots"), one("rated", "rate"),
            one("single", "one"), one("capped", max_running=10),
            one("queue", max_running=1), one("wide", "wide")]


def _drive(wb: Whimbrel, name: str, runs: int) -> None:
    """Start ``runs`` runs of ``name`` at once, then claim and complete each in turn."""
    wxs = [wb.start_workflow(name) for _ in range(runs)]
    for _ in wxs:
        got = wb.claim(workflow_name=name)
        if got is None:
            raise RuntimeError(f"{name}: nothing to claim")
        wb.transition_activity(got.activity_exec_id, "COMPLETED")
    for wx in wxs:
        if (state := wb.engine.reads.workflow(wx).state.value) != "COMPLETED":
            raise RuntimeError(f"{name} ended {state}")


def _once(meter: Meter, fn: Callable[[], None]) -> dict[str, float]:
    meter.settle()
    meter.drain()
    fn()
    meter.settle()
    s = summarize(meter.drain())
    return {**{k: s[f"{k}_total"] for k in ("wru", "rru", "reported_wru", "reported_rru")},
            **{f"wru {c}": u for c, u in s["wru"].items()},
            **{f"rru {c}": u for c, u in s["rru"].items()}}


def _ceiling(meter: Meter, wb: Whimbrel) -> dict[str, Any]:
    meter.settle()
    meter.drain()
    _drive(wb, "wide", CEILING_RUNS)
    meter.settle()
    per_key: dict[tuple[str, str], float] = defaultdict(float)
    for req in meter.drain():
        for key, units in req.wkeys.items():
            per_key[key] += units
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for (where, value), units in per_key.items():
        if where.endswith("pool") and value.startswith("pool#") and "#rate#" not in value:
            groups["slot item"][value] = units
        elif where.endswith("pool") and value.startswith("wait#"):
            groups["waiter shard"][value] = units
        elif where.endswith("pool.pool_checks"):
            groups["pool_checks index shard"][value] = units
    return {what: {"keys": len(units), "total": sum(units.values()) / CEILING_RUNS,
                   "hottest": max(units.values()) / CEILING_RUNS}
            for what, units in groups.items()}


def run(ctx: Ctx) -> dict[str, Any]:
    prefix = fresh_table_prefix()
    with ExitStack() as stack:
        meter = Meter(ctx.endpoint, prefix)
        stack.callback(meter.close)
        wb = stack.enter_context(ctx.client(prefix, endpoint=meter.url, clock=StepClock()))
        wb.set_pool("slots", slots=10, per_second=None)
        wb.set_pool("rate", slots=None, per_second=100.0)
        wb.set_pool("one", slots=1, per_second=None)
        wb.set_pool("wide", slots=CEILING_SLOTS, per_second=None)
        for defn in _definitions():
            wb.register_workflow(defn)
        units = {key: medians([_once(meter, lambda n=name, r=runs: _drive(wb, n, r))
                               for _ in range(ctx.repeats + 1)][1:])  # after a warm-up
                 for key, _, name, runs in CASES}
        ceiling = _ceiling(meter, wb)
    base = units["base"]
    cases = []
    for key, label, _, runs in CASES[1:]:
        case = {k: d for k in sorted({*base, *units[key]})
                if (d := units[key].get(k, 0.0) - runs * base.get(k, 0.0)) or " " not in k}
        cases.append({"key": key, "label": label, "runs": runs, **case})
    return {"base": base, "prices": PRICES, "cases": cases, "ceiling": ceiling,
            "ceiling_runs": CEILING_RUNS, "ceiling_slots": CEILING_SLOTS}


def _by(case: dict[str, Any], kind: str) -> str:
    return ", ".join(f"`{k.split(' ')[1]}` {v:+g}" for k, v in sorted(case.items())
                     if k.startswith(kind + " ") and abs(v) > 1e-9) or "—"


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    p = result["prices"]
    rows = [[c["label"], f"**{c['wru']:g}**", f"{c['rru']:g}",
             f"{c['reported_wru']:g} / {c['reported_rru']:g}", _by(c, "wru"),
             f"{(c['wru'] * p['wru'] + c['rru'] * p['rru']) / c['runs']:.2f}"]
            for c in result["cases"]]
    ceil = result["ceiling"]
    crow = [[what, f"{v['keys']}", f"{v['total']:.2f}", f"{v['hottest']:.3f}",
             f"{1000 / v['hottest']:,.0f}"] for what, v in sorted(ceil.items())]
    slot = ceil.get("slot item", {"hottest": 1.0})
    return {"prices": p, "base": result["base"], "runs": result["ceiling_runs"],
            "slots": result["ceiling_slots"], "table": md_table(
                ["admission", "WRU added", "RRU added", "Local reports WRU / RRU",
                 "WRU by table / index", "$ / million runs"], rows),
            "ceiling": md_table(["key", "keys written", "WCU per admission, all keys",
                                 "hottest key", "admissions/s at 1,000 WCU/s per key"],
                                crow),
            "slot_ceiling": f"{1000 / slot['hottest']:,.0f}"}
