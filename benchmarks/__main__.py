"""Run every benchmark on DynamoDB Local and write ``docs/benchmarks.md`` + charts.

    python -m benchmarks                 # everything, full size (tens of minutes)
    python -m benchmarks --quick         # small sizes: checks the code, figures rough
    python -m benchmarks --only cost,latency
    python -m benchmarks --render-only   # re-render from benchmarks/results/*.json

Each benchmark module exposes ``TITLE``, ``run(ctx) -> dict`` (JSON-able) and
``render(result, img_dir) -> str`` (a markdown section; charts go to ``img_dir``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.common import BenchContext, dynamodb, machine, request_latency

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "benchmarks.md"
IMG = ROOT / "docs" / "img"

#: Run order; the report keeps it.
NAMES = ["cost", "throughput", "latency", "sweep", "fanout", "peer"]


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"benchmarks.bench_{name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 repeats")
    parser.add_argument("--only", default="", help=f"comma list of {','.join(NAMES)}")
    parser.add_argument("--repeats", type=int, default=None, help="runs per figure (median)")
    parser.add_argument("--render-only", action="store_true",
                        help="re-render docs/benchmarks.md from saved results")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or NAMES
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    RESULTS.mkdir(parents=True, exist_ok=True)

    if not args.render_only:
        repeats = args.repeats or (2 if args.quick else 5)
        with dynamodb() as ddb:
            ctx = BenchContext(ddb, quick=args.quick, repeats=repeats)
            env = {"machine": machine(), "latency": request_latency(ddb.endpoint_url),
                   "quick": args.quick, "repeats": repeats}
            _save("environment", env)
            for name in names:
                print(f"benchmark {name} ...", file=sys.stderr, flush=True)
                started = time.perf_counter()
                result = _module(name).run(ctx)
                result["_wall_seconds"] = round(time.perf_counter() - started, 1)
                _save(name, result)
                print(f"benchmark {name}: {result['_wall_seconds']} s", file=sys.stderr)
    _render()
    print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


def _save(name: str, result: dict[str, Any]) -> None:
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


MISSES = """## Where the targets are missed

**Chain overhead against the 1.25 × bound, and round trips on the pull path.** A
hand-off is 4 sequential round trips on both paths (push: COMPLETED, READY with the
workflow read beside it, QUEUED, RUNNING; pull: COMPLETED, READY, the claim's query,
RUNNING with the workflow read beside it), and no move reads its item first. The
measured round trips per activity also hold the workflow's start and end spread over
the chain, and on the pull path a claim whose query ran just before the READY write
landed, so it found nothing and polled again. The bound counts only DynamoDB's own time; the
rest is client CPU. botocore serializes, signs and parses every request and rebuilds
its User-Agent string each time (about 1.5 ms of CPU per call, profiled with yappi),
PynamoDB builds a model per call, and a push launch crosses two thread pools. On this
2-core machine that CPU competes with DynamoDB Local's JVM, so the run's own calls are
slower than the reference latency ("its calls' p50" in the peer table). What would
close it: a lean path for the four hot moves (prepared UpdateItem requests on one
botocore client instead of PynamoDB's model layer), and running a push activity in the
thread that completed its upstream instead of handing it to a pool.

**Fan-out below 5 ms per step.** The dependents of one completion are readied and
launched in parallel (16 threads, since this benchmark showed them going out one by
one), and DynamoDB has no single-writer lock, so the steps do overlap. But a step is
still 6–9 requests, and on two cores one JVM serves them all while Python spends CPU on
each: the fan-out run is CPU-bound (its median call takes many times the reference
latency). DBOS's steps are a few SQLite statements in the same process. Against
DynamoDB the server side scales out and the fan-out is bounded by round trips; here,
what would help is fewer requests per step (the workflow read after each completion
could be skipped for non-sink activities, at the cost of relying on settle for a
completion that races a failure) and cheaper ones (the lean client path above).
"""


def _targets(lat: dict[str, Any]) -> list[str]:
    """The issue's targets, met or not, from the saved results (details further down)."""
    rows: list[str] = []

    def row(target: str, measured: str, met: bool | None) -> None:
        verdict = "—" if met is None else ("met" if met else "**missed**")
        rows.append(f"| {target} | {measured} | {verdict} |")

    try:
        cost = _load("cost") or {}
        chain = next(s for s in cost.get("scenarios", [])
                     if s["api"] == "Full Logic" and s["shape"] == "chain")["median"]
        row("≤ 6 WRU per activity, Full Logic chain (AWS billing rules)",
            f"{chain['wru_per_activity']:.2f} WRU (floor {chain['floor_per_activity']:.1f}; "
            f"activity-level {chain['wru_activity_level_per_activity']:.2f})",
            chain["wru_per_activity"] <= 6.0)
    except (KeyError, StopIteration):
        pass
    try:
        peer = _load("peer") or {}
        p50 = float(lat["p50_ms"])
        rts = {path: peer[path]["chain"]["median"]["sequential_round_trips"]
               / peer[path]["chain"]["activities"] for path in ("push", "pull")}
        for path in ("push", "pull"):
            m = peer[path]["chain"]["median"]
            bound = rts[path] * p50
            row(f"chain overhead ≤ 1.25 × (round trips × request p50), {path}",
                f"{m['per_step_ms']:.1f} ms per step vs bound {bound:.1f} ms "
                f"({m['per_step_ms'] / bound:.2f}×)", m["per_step_ms"] <= 1.25 * bound)
        row("≤ 4 sequential round trips per activity, pull path",
            f"{rts['pull']:.1f} (push {rts['push']:.1f}; start-up included)",
            rts["pull"] <= 4.25)
        dbos_fan = peer["dbos"]["fanout"]["median"]["per_step_ms"]
        for path in ("push", "pull"):
            m = peer[path]["fanout"]["median"]
            row(f"fan-out 1 → 100 → 1 below 5 ms per step, {path}",
                f"{m['per_step_ms']:.1f} ms (DBOS {dbos_fan:.1f})", m["per_step_ms"] < 5.0)
    except (KeyError, TypeError, ZeroDivisionError):
        pass
    try:
        fan = (_load("fanout") or {})["widths"][-1]
        row(f"1 → {fan['width']} → 1: O(1) writes per item",
            f"at most {fan['median']['max_item_writes']:.0f} writes to any item", None)
    except (KeyError, IndexError, TypeError):
        pass
    if not rows:
        return []
    return ["## Targets", "", "| target (issue #7) | measured | |", "|---|---|---|", *rows, "",
            "Why a target is missed, and what would close the gap: see "
            "[the notes at the end](#where-the-targets-are-missed).", ""]


def _render() -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    env = _load("environment") or {}
    mach = env.get("machine", {})
    lat = env.get("latency", {})
    parts = [
        "# Benchmarks",
        "",
        "Generated by `./scripts/bench` (`python -m benchmarks`); do not edit by hand.",
        "Every figure is a median over repeated runs on DynamoDB Local, and every timing",
        "comparison is a ratio of two things measured in the same run. Benchmarks report;",
        "the test command times nothing.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in mach.items()),
        f"| runs per figure | {env.get('repeats', '?')}"
        + (" (quick run: sizes reduced)" if env.get("quick") else "") + " |",
        "",
        "**Reference latency** — one request to DynamoDB Local through botocore "
        f"(consistent GetItem and conditional UpdateItem, {400} samples each after warm-up): "
        f"p50 **{lat.get('p50_ms', float('nan')):.2f} ms** "
        f"(GetItem {lat.get('get_p50_ms', float('nan')):.2f} ms, "
        f"UpdateItem {lat.get('update_p50_ms', float('nan')):.2f} ms), "
        f"p99 {lat.get('p99_ms', float('nan')):.2f} ms. Bounds below are this latency "
        "times the number of sequential round trips.",
        "",
    ]
    parts += _targets(lat)
    for name in NAMES:
        result = _load(name)
        if result is None:
            parts += [f"## {name}", "", f"_Not run yet: `./scripts/bench --only {name}`._", ""]
            continue
        result["_environment"] = env
        parts.append(_module(name).render(result, IMG).rstrip() + "\n")
    parts.append(MISSES)
    DOC.write_text("\n".join(parts))


if __name__ == "__main__":
    raise SystemExit(main())
