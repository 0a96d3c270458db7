"""Run the benchmarks on DynamoDB Local and write ``docs/benchmarks.md`` and its charts
(``--quick``: small sizes; ``--render-only``: from ``benchmarks/results/*.json``).
With ``--only``, only those sections (and the targets table) of the report are
rewritten; the others, and their charts, stay as they are.

Adding a benchmark: a module with ``run(ctx) -> dict`` (JSON-able results) and
``render(results, img_dir) -> dict`` (the values its template needs; charts go to
``img_dir``), a template ``benchmarks/templates/<name>.md`` holding its prose with
``{placeholders}``, and one line in :data:`BENCHMARKS`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.bench_cost import chain_full
from benchmarks.bench_maps import biggest
from benchmarks.common import Ctx, dynamodb, machine, round_trip

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
TEMPLATES = ROOT / "benchmarks" / "templates"
DOC = ROOT / "docs" / "benchmarks.md"
IMG = ROOT / "docs" / "img"

#: name -> module; the report keeps this order.
BENCHMARKS = {
    "cost": "benchmarks.bench_cost",
    "throughput": "benchmarks.bench_throughput",
    "latency": "benchmarks.bench_latency",
    "sweep": "benchmarks.bench_sweep",
    "fanout": "benchmarks.bench_fanout",
    "waits": "benchmarks.bench_waits",
    "pools": "benchmarks.bench_pools",
    "maps": "benchmarks.bench_maps",
    "payload_map": "benchmarks.bench_payload_map",
    "peers": "benchmarks.bench_peers",
    "code": "benchmarks.bench_code",
    "code_map": "benchmarks.bench_code_map",
    "scale": "benchmarks.bench_scale",
    "stream": "benchmarks.bench_stream",
    "worker": "benchmarks.bench_worker",
}


# -- targets: one row each at the top of the report; edit TARGETS to add, change or drop
# one. ``measure`` returns (what to show, the value compared with ``limit``); ``why``
# says what drives the figure, shown when it is missed.

Results = dict[str, dict[str, Any]]


class Target(NamedTuple):
    text: str
    limit: float
    measure: Callable[[Results], tuple[str, float]]
    why: str


def _vs(engine: str, shape: int) -> Callable[[Results], tuple[str, float]]:
    def measure(r: Results) -> tuple[str, float]:
        from benchmarks.bench_peers import ms_per_step  # temporalio: only when peers ran

        key = r["peers"]["shapes"][shape]["key"]
        push, pull, theirs = (ms_per_step(r["peers"], e, key)
                              for e in ("whimbrel_push", "whimbrel_pull", engine))
        return (f"{push / theirs:.2f}× (push {push:.1f} ms vs {theirs:.1f} ms per step; "
                f"pull {pull:.1f} ms)", push / theirs)
    return measure


def _code_vs(engine: str, shape: int) -> Callable[[Results], tuple[str, float]]:
    def measure(r: Results) -> tuple[str, float]:
        from benchmarks.bench_peers import ms_per_step

        key = r["peers"]["shapes"][shape]["key"]
        code, theirs = (ms_per_step(r["peers"], e, key) for e in ("whimbrel_code", engine))
        return f"{code / theirs:.2f}× (code {code:.1f} ms vs {theirs:.1f} ms per step)", \
            code / theirs
    return measure


def _push(field: str) -> Callable[[Results], tuple[str, float]]:
    return lambda r: (f"{(v := r['latency']['paths']['push'][field]):.1f}", v)


def _wru(r: Results) -> tuple[str, float]:
    m = chain_full(r["cost"])
    return (f"{m['wru_per_activity']:.2f} WRU (activity-level {m['activity_level']:.2f}, "
            f"workflow-level {m['workflow_level']:.0f} per workflow)", m["wru_per_activity"])


def _map(r: Results) -> tuple[str, float]:
    m = biggest(r["maps"])
    if m["items"] < 1000:
        raise KeyError("1,000 items")  # a quick run: not measured
    return (f"{m['writes_per_item']:.2f} writes per item, at most {m['most_row_writes']} to "
            f"one row", max(m["writes_per_item"], m["most_row_writes"]))


def _code_vs_dag(shape: int) -> Callable[[Results], tuple[str, float]]:
    def measure(r: Results) -> tuple[str, float]:
        m = r["code"]["shapes"][shape]
        return (f"{m['ratio']:.2f}× (code {m['code']['ms_per_step']:.1f} ms vs DAG "
                f"{m['dag']['ms_per_step']:.1f} ms per step)", m["ratio"])
    return measure


def _code_flat(r: Results) -> tuple[str, float]:
    sizes = r["code"]["sizes"]
    small, big = sizes[0], sizes[-1]
    return (f"{big['reads_per_step']:.2f} reads and {big['cpu_ms_per_step']:.2f} ms CPU per "
            f"step at {big['steps']:,} steps ({small['reads_per_step']:.2f} and "
            f"{small['cpu_ms_per_step']:.2f} at {small['steps']:,})",
            big["cpu_ms_per_step"] / small["cpu_ms_per_step"])


def _heartbeats(r: Results) -> tuple[str, float]:
    wl = r["scale"]["workloads"]["heartbeats"]
    return (f"{wl['ceiling']:,.0f} activities/s, set by {wl['bound_by']}",
            10_000 / wl["ceiling"])


def _listing(r: Results) -> tuple[str, float]:
    pages = r["scale"]["workloads"]["attributes"]["pages"]
    return (", ".join(f"{label}: {p['requests']}" for label, p in pages.items()),
            max(p["requests"] for p in pages.values()))


TARGETS = [
    Target("Full Logic chain of 10, all-in: ≤ 4.0 WRU per activity (5.70 before issue 12)",
           4.0, _wru, "a write per state move; the workflow item costs ~8 WRU per workflow"),
    Target("In-process push hand-off: ≤ 2 sequential round trips", 2.0,
           _push("sequential_per_handoff"), "READY, QUEUED and RUNNING are separate writes"),
    Target("In-process push hand-off: ≤ 4 requests per activity (all-in)", 4.0,
           _push("requests_per_activity"), "a write per move, a workflow read per completion"),
    Target("Chain of 50: ≤ 0.5× Temporal's ms per step (same run, same machine)", 0.5,
           _vs("temporal", 0), "a step costs several sequential DynamoDB round trips"),
    Target("Fan-out 1→100→1: ≤ 1.0× Temporal's ms per step", 1.0, _vs("temporal", 1),
           "every step is several requests to one DynamoDB Local JVM sharing 2 cores"),
    Target("Fan-out 1→100→1: ≤ 1.0× DBOS's ms per step", 1.0, _vs("dbos", 1),
           "DBOS's steps are a few PostgreSQL statements on a local socket"),
    Target("1→1,000 map (20 lanes): ≤ 4 writes per item and to any one row (issue 14)", 4.0,
           _map, "an item's row is written once per move; a hot row would be a counter"),
    Target("Code chain of 50: ≤ 0.5× Temporal's ms per step (issue 26; same run)", 0.5,
           _code_vs("temporal", 0), "a code step is a DAG step's round trips plus a "
           "decision"),
    Target("Code fan-out 1→100→1: ≤ 1.0× Temporal's ms per step (issue 26)", 1.0,
           _code_vs("temporal", 1), "every step is several requests to one DynamoDB Local "
           "JVM sharing 2 cores"),
    Target("Code fan-out 1→100→1: ≤ 1.0× DBOS's ms per step (issue 26)", 1.0,
           _code_vs("dbos", 1), "DBOS's steps are a few PostgreSQL statements on a local "
           "socket"),
    Target("Code chain of 50: ≤ 1.2× the DAG chain's ms per step (issue 26)", 1.2,
           _code_vs_dag(0), "each code step adds a decision (a hand-off to the function's "
           "thread) to the DAG's follow-up; timings on a loaded machine vary run to run"),
    Target("Code fan-out 1→100→1: ≤ 1.2× the DAG fan-out's ms per step (issue 26)", 1.2,
           _code_vs_dag(1), "the fan-in: the code waits on each handle in turn"),
    Target("Sequential code run: CPU per step flat from the smallest to the largest run "
           "(≤ 1.5× the first; issue 26)", 1.5, _code_flat,
           "a decision would replay the function from its start"),
    Target("Scale workload (c), 1 M heartbeating activities an hour: ≥ 10,000 "
           "activities/s at default quotas (issue 29)", 1.0, _heartbeats,
           "an activity writes its item 4 times (create, claim, one heartbeat, completion): "
           "the 40,000 WCU/s table quota allows 10,000 a second at most"),
    Target("A page of 50 runs by state alone, unfiltered or by attribute, 100 names: ≤ 64 "
           "requests (issue 29)", 64.0, _listing,
           "a listing reads one Query per shard of its index"),
]


#: The benchmarks the targets read: the table is rewritten when one of them ran.
TARGET_SOURCES = {"cost", "latency", "peers", "maps", "code", "scale"}


def targets_table(results: Results) -> str:
    rows = ["| target | measured | |", "|---|---|---|"]
    for t in TARGETS:
        try:
            shown, value = t.measure(results)
        except (KeyError, IndexError, TypeError, ZeroDivisionError, StopIteration):
            shown, value = "not measured in this run", float("nan")
        rows.append(f"| {t.text} | {shown} | " + ("—" if value != value else "met" if value <=
                    t.limit else f"**missed** (limit {t.limit:g}): {t.why}") + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 repeats")
    parser.add_argument("--only", help="comma list of names (default: all); only their "
                        "sections of the report are rewritten")
    parser.add_argument("--repeats", type=int, help="measured runs per figure (median)")
    parser.add_argument("--render-only", action="store_true", help="re-render saved results")
    args = parser.parse_args(argv)
    names = [n.strip() for n in (args.only or ",".join(BENCHMARKS)).split(",") if n.strip()]
    if unknown := sorted(set(names) - set(BENCHMARKS)):
        parser.error(f"unknown {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    RESULTS.mkdir(parents=True, exist_ok=True)
    if not args.render_only:
        repeats = args.repeats or (2 if args.quick else 5)
        # With --only, the report's machine and round trip (other sections' context)
        # stay those of the run that wrote it.
        if not args.only or not (RESULTS / "environment.json").exists():
            with dynamodb() as endpoint:
                _save("environment", {"machine": machine(), "quick": args.quick,
                                      "repeats": repeats, "round_trip": round_trip(endpoint)})
        for name in names:
            # A fresh DynamoDB Local each: nothing one benchmark left behind (tables,
            # streams, SQLite state) can slow the next one's writes.
            with dynamodb() as endpoint:
                print(f"benchmark {name} ...", file=sys.stderr, flush=True)
                started = time.perf_counter()
                result = importlib.import_module(BENCHMARKS[name]).run(
                    Ctx(endpoint, args.quick, repeats))
                result["seconds"] = round(time.perf_counter() - started)
                _save(name, result)
                print(f"benchmark {name}: {result['seconds']} s", file=sys.stderr, flush=True)
    if args.only and DOC.exists():
        render_sections(names)
    else:
        render()
    print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


def _save(name: str, result: dict[str, Any]) -> None:
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


def _load() -> tuple[dict[str, Any], Results]:
    loaded = {p.stem: json.loads(p.read_text()) for p in RESULTS.glob("*.json")}
    env = loaded.get("environment") or {"machine": {}, "repeats": "?", "round_trip": {}}
    return env, {name: loaded[name] for name in BENCHMARKS if name in loaded}


def _section(name: str, env: dict[str, Any], results: Results) -> str:
    if name not in results:
        return f"## {name}\n\n_Not run yet: `./scripts/bench --only {name}`._\n"
    return (TEMPLATES / f"{name}.md").read_text().format_map({
        **importlib.import_module(BENCHMARKS[name]).render(results[name], IMG), "env": env,
        "seconds": results[name].get("seconds", "?")})


def render_sections(names: list[str]) -> None:
    """Rewrite only ``names``' sections of the report (a section runs from its heading to
    the next section's) and its targets table; a section not there yet is added in
    :data:`BENCHMARKS` order."""
    IMG.mkdir(parents=True, exist_ok=True)
    env, results = _load()
    doc = DOC.read_text()
    heads = {n: f"\n{(TEMPLATES / f'{n}.md').read_text().splitlines()[0]}\n"
             for n in BENCHMARKS if n in results}  # headings hold no placeholders
    for name in names:
        new = _section(name, env, results)
        at = doc.find(heads.get(name, "\0"))
        later = [doc.find(heads[n]) for n in list(BENCHMARKS)[list(BENCHMARKS).index(name) + 1:]
                 if n in heads and doc.find(heads[n]) > at]
        end = min(later, default=len(doc))
        if at < 0:  # new: before the next section there, else at the end
            doc = doc[:end].rstrip("\n") + "\n\n" + new + doc[end:]
        else:
            doc = doc[:at + 1] + new + doc[end:]
    start = doc.find("| target |")
    if start >= 0 and TARGET_SOURCES & set(names):
        doc = doc[:start] + targets_table(results) + doc[doc.find("\n\n", start):]
    DOC.write_text(doc)


def render() -> None:
    """Fill the templates from the saved results."""
    IMG.mkdir(parents=True, exist_ok=True)
    env, results = _load()
    sections = [_section(name, env, results) for name in BENCHMARKS]
    DOC.write_text((TEMPLATES / "report.md").read_text().format_map({
        "env": env, "targets": targets_table(results),
        "machine": "\n".join(f"| {k} | {v} |" for k, v in env["machine"].items()),
        "quick": " (quick run: sizes reduced, figures rough)" if env.get("quick") else "",
        "sections": "\n".join(sections)}))


if __name__ == "__main__":
    raise SystemExit(main())
