"""What one timer, signal or approval adds to a run: the units of ``before → wait →
after`` minus those of ``before → after``, driven the same way, every request billed by
:class:`benchmarks.billing.Meter` (the cases of ``tests/integration/test_wait_costs.py``,
which pins the write units)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.billing import Meter, summarize
from benchmarks.common import PRICES, Ctx, md_table, medians
from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.testing import StepClock, fresh_table_prefix

#: key, label, the wait (None: the chain without it), how its event comes.
CASES: list[tuple[str, str, LauncherSpec | None, str]] = [
    ("base", "before → after", None, ""),
    ("timer", "timer (Wait state)", LauncherSpec.timer(60), "timer"),
    ("signal", "signal, wait READY first (task token)", LauncherSpec.signal("go"), "signal"),
    ("signal_timeout", "signal with timeout_seconds", LauncherSpec.signal(
        "go", timeout_seconds=3600), "signal"),
    ("early", "signal sent before the wait is READY", LauncherSpec.signal("go"), "early"),
    ("approval", "approval (task token)", LauncherSpec.approval(), "approve"),
    ("approval_timeout", "approval with timeout_seconds", LauncherSpec.approval(
        timeout_seconds=3600), "approve"),
]
#: Step Functions Standard: a Wait state, or a Task state waiting for its task token.
SFN_TRANSITIONS = 1


def definition(name: str, wait: LauncherSpec | None) -> WorkflowDefinition:
    """``before → wait → after``, or ``before → after`` without a wait."""
    acts = [ActivityDefinition("before")]  # external: moved by ``drive``, as a worker would
    if wait is not None:
        acts.append(ActivityDefinition("w", ("before",), launcher=wait))
    acts.append(ActivityDefinition("after", ("w" if wait else "before",)))
    return WorkflowDefinition(name, tuple(acts))


def drive(wb: Whimbrel, view: Whimbrel, clock: StepClock, name: str, event: str) -> str:
    """One run of ``name`` from its start to its end; returns its id. The activity ids are
    read through ``view``, a client whose requests are not counted."""
    wx = wb.start_workflow(name)
    if event == "early":
        wb.signal(wx, "go", {"paid": 1})
    for act in ("before", "after"):
        aeid = view.get_workflow(wx).activity(act).activity_exec_id
        wb.transition_activity(aeid, "RUNNING")
        wb.transition_activity(aeid, "COMPLETED")
        if act == "before":
            if event == "signal":
                wb.signal(wx, "go", {"paid": 1})
            elif event == "approve":
                wb.approve(view.get_workflow(wx).activity("w").activity_exec_id, by="alice")
            # The sweep (a timer's time comes) runs in every case, so its reads cancel out.
            wb.sweep(clock.advance(61))
    return wx


def _once(wb: Whimbrel, view: Whimbrel, meter: Meter, clock: StepClock, name: str,
          event: str) -> dict[str, float]:
    """The billed units of one run of ``name``, from its start to its end, by category."""
    wb.sweep(clock.advance(1000))  # nothing of earlier runs is due during this one
    meter.settle()
    meter.drain()
    wx = drive(wb, view, clock, name, event)
    meter.settle()
    # The sweep's lease writes (2 per pass and shard with something due, shared by all
    # that is due there: docs/operations.md, "Several sweepers") are the pass's, not the
    # wait's: left out, as the sweep's own reads cancel out.
    s = summarize([r for r in meter.drain() if "lease" not in r.wru and "lease" not in r.rru])
    if (state := view.get_workflow(wx).state.value) != "COMPLETED":
        raise RuntimeError(f"{name} ended {state}")
    return {**{k: s[f"{k}_total"] for k in ("wru", "rru", "reported_wru", "reported_rru")},
            **{f"wru {c}": u for c, u in s["wru"].items()},
            **{f"rru {c}": u for c, u in s["rru"].items()}}


def run(ctx: Ctx) -> dict[str, Any]:
    prefix, clock = fresh_table_prefix(), StepClock()
    with ExitStack() as stack:
        meter = Meter(ctx.endpoint, prefix)
        stack.callback(meter.close)
        wb = stack.enter_context(ctx.client(prefix, endpoint=meter.url, clock=clock))
        view = stack.enter_context(Whimbrel(ctx.endpoint, prefix))
        runs = {}
        for key, _, wait, event in CASES:
            wb.register_workflow(definition(f"wait_{key}", wait))
            runs[key] = medians([_once(wb, view, meter, clock, f"wait_{key}", event)
                                 for _ in range(ctx.repeats + 1)][1:])  # after a warm-up
    base = runs["base"]
    return {"base": base, "prices": PRICES, "cases": [  # what the wait adds; nonzero only
        {"key": key, "label": label, **{k: d for k in sorted({*base, *runs[key]}) if (
            d := runs[key].get(k, 0.0) - base.get(k, 0.0)) or " " not in k}}
        for key, label, _, _ in CASES[1:]]}


def _by(case: dict[str, Any], kind: str) -> str:
    return ", ".join(f"`{k.split(' ')[1]}` {v:+g}" for k, v in sorted(case.items())
                     if k.startswith(kind + " ") and abs(v) > 1e-9) or "—"


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    cases, p = {c["key"]: c for c in result["cases"]}, result["prices"]
    rows = [[c["label"], f"**{c['wru']:g}**", f"{c['rru']:g}",
             f"{c['reported_wru']:g} / {c['reported_rru']:g}", _by(c, "wru"), _by(c, "rru"),
             f"{c['wru'] * p['wru'] + c['rru'] * p['rru']:.2f}", SFN_TRANSITIONS,
             f"{SFN_TRANSITIONS * p['sfn_transition']:.2f}"] for c in cases.values()]
    return {"prices": p, "base": result["base"], "table": md_table(
        ["wait", "WRU", "RRU", "Local reports WRU / RRU", "WRU by table / index",
         "RRU by table / index", "Whimbrel $ / million waits", "Step Functions transitions",
         "Step Functions $ / million"], rows),
        "item": cases["approval"].get("wru activity_exec", 0.0),
        "timers": cases["timer"].get("wru activity_exec.timers", 0.0),
        "kept": cases["early"]["wru"] - cases["signal"]["wru"],
        "kept_signal": cases["early"].get("wru signal", 0.0)}
