"""Peer, side by side (issue #6): DBOS and Whimbrel run the same DAGs of no-op steps in
the same benchmark run, and we compare the orchestration overhead per step.

* DAGs: a chain of ``CHAIN`` sequential no-ops, and a 1 -> ``FAN`` -> 1 fan-out/fan-in.
* DBOS (PyPI ``dbos``, SQLite system database, queue polling 10 ms) runs in a child
  process (``benchmarks._dbos_peer``) because DBOS is a process-wide singleton.
* Whimbrel, on fresh tables in DynamoDB Local:
  - push: ``python`` launcher running ``benchmarks.activities:noop`` in the Full Logic
    client's own thread pool (16 threads, the default);
  - pull: ``external`` activities taken by worker threads that loop ``wb.claim()`` then
    ``with wb.run_activity(id): pass`` (1 worker for the chain, ``FAN_WORKERS`` for the
    fan-out); a worker whose claim finds nothing waits ``IDLE_POLL_SECONDS``.

Overhead per step = wall time from ``start_workflow`` to the write that makes the
workflow COMPLETED, divided by the number of activities (the activities do nothing).

Every DynamoDB call is traced at the same seam the store's CapacityMeter uses (the
PynamoDB connection's ``dispatch``): operation, table, index, thread, start/end, items
returned, and the state the call moves. From the trace:

* *idle claim polls*: the Queries of a ``claim()`` that returned None having seen no
  candidate. They are excluded from the critical path: an idle worker polls while there
  is nothing to do, and the poll that finds the next activity is counted (it returned a
  candidate); the empty shard Queries inside a successful claim are counted too;
* *sequential round trips*: the largest set of traced calls (idle polls excluded) no
  two of which overlap in time. Calls issued in parallel (the start's item creations,
  a read overlapped with a write) count once per wave; in a chain every remaining call
  waits for the one before, so this is the critical path measured in round trips;
* *per-activity cycle*: the calls between the RUNNING write of activity k and that of
  activity k + 1 in the middle of the chain: the exact list of calls one hand-off costs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import shapes
from benchmarks.common import BenchContext, median
from whimbrel import Whimbrel
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.store.meter import CapacityMeter
from whimbrel.store.store import Store

TITLE = "Peer, side by side: DBOS and Whimbrel on the same DAGs"

ROOT = Path(__file__).resolve().parent.parent
CHAIN = 50
FAN = 100
FAN_WORKERS = 8
IDLE_POLL_SECONDS = 0.010
DBOS_POLL_SECONDS = 0.010
RUN_TIMEOUT_SECONDS = 300.0
#: Targets from the issue.
CHAIN_BOUND_FACTOR = 1.25
PULL_RT_TARGET = 4
FANOUT_TARGET_MS = 5.0
#: Reference DBOS figures quoted in the issue (same kind of machine, earlier run).
DBOS_ISSUE_MS = {"chain": 2.3, "fanout": 11.0}

_STATES = frozenset(s.value for s in ActivityState) | frozenset(s.value for s in WorkflowState)
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem",
                     "TransactWriteItems"})
_PLACEHOLDER = re.compile(r":[A-Za-z0-9_]+")


# -- tracing ------------------------------------------------------------------------------


@dataclass
class Call:
    """One DynamoDB request as the store sent it."""

    op: str
    table: str
    index: str | None
    thread: str
    t0: float
    t1: float
    items: int | None  # Count of a Query/Scan
    rru: float
    wru: float
    who: str | None  # activity name (activity_exec) or "workflow"
    key: str | None  # activity_exec_id or workflow_exec_id
    expected: str | None  # state in the condition
    new: str | None  # state written
    failed: bool  # condition failed (or any error)
    attempt: int | None  # the worker's claim attempt, when made inside claim()

    @property
    def ms(self) -> float:
        return (self.t1 - self.t0) * 1000.0

    def label(self) -> str:
        where = self.table + (f".{self.index}" if self.index else "")
        text = f"{self.op} {where}"
        if self.who:
            text += f" [{self.who}]"
        if self.new:
            text += f" {self.expected or '?'} -> {self.new}"
        elif self.expected:
            text += f" if {self.expected}"
        if self.items is not None:
            text += f" ({self.items} item{'s' if self.items != 1 else ''})"
        if self.failed:
            text += " (condition failed)"
        return text


def _state_strings(value: Any) -> list[str]:
    out: list[str] = []
    if isinstance(value, dict):
        if set(value) == {"S"} and value["S"] in _STATES:
            out.append(value["S"])
        else:
            for v in value.values():
                out.extend(_state_strings(v))
    elif isinstance(value, list):
        for v in value:
            out.extend(_state_strings(v))
    return out


def _describe(kw: dict[str, Any]) -> tuple[str | None, str | None, str | None, str | None]:
    """(who, key, expected state, new state) of one request's kwargs."""
    key = kw.get("Key") or kw.get("Item") or {}
    aeid = (key.get("activity_exec_id") or {}).get("S")
    wx = (key.get("workflow_exec_id") or {}).get("S")
    who: str | None = None
    if aeid:
        who = aeid.rsplit(":", 2)[-2] if aeid.count(":") >= 2 else aeid
    elif wx:
        who = "workflow"
    values = kw.get("ExpressionAttributeValues") or {}
    if not key and kw.get("KeyConditionExpression") and not kw.get("IndexName"):
        # A Query of one partition: name it by its hash key value.
        keyed = set(_PLACEHOLDER.findall(kw["KeyConditionExpression"]))
        part = next((v.get("S") for k, v in values.items() if k in keyed and "S" in v), None)
        return "partition", part, None, None
    cond = set(_PLACEHOLDER.findall(kw.get("ConditionExpression") or ""))
    upd = set(_PLACEHOLDER.findall(kw.get("UpdateExpression") or ""))
    conds = [s for k, v in values.items() if k in cond for s in _state_strings(v)]
    expected = "|".join(dict.fromkeys(conds)) or None
    new = next((s for k, v in values.items() if k in upd and k not in cond
                for s in _state_strings(v)), None)
    if new is None and "Item" in kw:
        new = (kw["Item"].get("state") or {}).get("S")
    return who, aeid or wx, expected, new


class CallTrace:
    """Records every request of ``store`` (wrapping the PynamoDB connections' dispatch,
    the same seam as the store's CapacityMeter) until :meth:`close`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self._next_attempt = 0
        #: claim attempts: id -> [start, end, found]
        self.attempts: dict[int, list[Any]] = {}
        self.watchers: list[Callable[[Call, dict[str, Any]], None]] = []
        self._restore: list[tuple[Any, Any]] = []
        prefix = store.table_prefix
        for model in store.models.all():
            conn = model._get_connection().connection
            inner = conn.dispatch
            self._restore.append((conn, inner))
            conn.dispatch = self._wrap(inner, prefix)

    def _wrap(self, inner: Callable[[str, dict[str, Any]], dict[str, Any]],
              prefix: str) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
        def dispatch(op: str, kw: dict[str, Any]) -> dict[str, Any]:
            t0 = time.perf_counter()
            failed = False
            data: dict[str, Any] = {}
            try:
                data = inner(op, kw)
                return data
            except Exception:
                failed = True
                raise
            finally:
                t1 = time.perf_counter()
                self._record(op, kw, data, prefix, t0, t1, failed)
        return dispatch

    def _record(self, op: str, kw: dict[str, Any], data: dict[str, Any], prefix: str,
                t0: float, t1: float, failed: bool) -> None:
        meter = CapacityMeter()
        meter.record(op, data)
        table = str(kw.get("TableName") or "")
        if not table and kw.get("RequestItems"):
            table = ",".join(sorted(kw["RequestItems"]))
        if not table and kw.get("TransactItems"):
            table = ",".join(sorted({str(v.get("TableName")) for ti in kw["TransactItems"]
                                     for v in ti.values()}))
        table = ",".join(t.removeprefix(prefix) for t in table.split(","))
        who, key, expected, new = _describe(kw)
        count = data.get("Count") if op in ("Query", "Scan") else None
        call = Call(op=op, table=table, index=kw.get("IndexName"),
                    thread=threading.current_thread().name, t0=t0, t1=t1,
                    items=int(count) if count is not None else None,
                    rru=meter.total_read_units, wru=meter.total_write_units,
                    who=who, key=key, expected=expected, new=new, failed=failed,
                    attempt=getattr(self._local, "attempt", None))
        with self._lock:
            self.calls.append(call)
            watchers = list(self.watchers)
        for watch in watchers:
            watch(call, kw)

    # -- claim attempts (pull workers) --

    def begin_attempt(self) -> int:
        with self._lock:
            self._next_attempt += 1
            attempt = self._next_attempt
            self.attempts[attempt] = [time.perf_counter(), float("inf"), None]
        self._local.attempt = attempt
        return attempt

    def end_attempt(self, attempt: int, found: bool) -> None:
        self._local.attempt = None
        with self._lock:
            entry = self.attempts.get(attempt)
            if entry is not None:
                entry[1], entry[2] = time.perf_counter(), found

    def reset(self) -> None:
        with self._lock:
            self.calls = []
            self.attempts = {a: e for a, e in self.attempts.items() if e[2] is None}

    def snapshot(self) -> tuple[list[Call], dict[int, tuple[float, float, bool]]]:
        with self._lock:
            done = {a: (e[0], e[1], bool(e[2])) for a, e in self.attempts.items()
                    if e[2] is not None}
            return list(self.calls), done

    def close(self) -> None:
        for conn, inner in reversed(self._restore):
            conn.dispatch = inner
        self._restore.clear()


def max_non_overlapping(calls: list[Call]) -> int:
    """Size of the largest set of calls no two of which overlap in time (greedy by end)."""
    count = 0
    last_end = float("-inf")
    for call in sorted(calls, key=lambda c: c.t1):
        if call.t0 >= last_end:
            count += 1
            last_end = call.t1
    return count


def split_idle(calls: list[Call], attempts: dict[int, tuple[float, float, bool]],
               ) -> tuple[list[Call], list[Call], list[Call]]:
    """(work, idle polls, lost claims) among ``calls``.

    A call belongs to a claim attempt when the worker's thread made it, or - for a
    ``claimable`` Query made on another thread (claim may query the shards in parallel)
    - when it ran inside the attempt's time window. Inside attempts that returned None,
    empty ``claimable`` Queries are *idle polls* and anything else (candidates seen but
    taken by another worker) is a *lost claim*. With one worker this is exact; with
    several, a pool-thread Query is idle only if every attempt around it found nothing.
    """
    work: list[Call] = []
    idle: list[Call] = []
    lost: list[Call] = []
    for c in calls:
        in_none = False
        if c.attempt is not None and c.attempt in attempts:
            in_none = not attempts[c.attempt][2]
        elif c.index == "claimable":
            around = [found for (a0, a1, found) in attempts.values() if a0 <= c.t0 and c.t1 <= a1]
            in_none = bool(around) and not any(around)
        if in_none and c.op == "Query" and not c.items:
            idle.append(c)
        elif in_none:
            lost.append(c)
        else:
            work.append(c)
    return work, idle, lost


# -- workflows -------------------------------------------------------------------------


class _Workers:
    """``count`` threads that claim and run ``external`` activities of one workflow name."""

    def __init__(self, wb: Whimbrel, trace: CallTrace, workflow_name: str, count: int) -> None:
        self.wb = wb
        self.trace = trace
        self.workflow_name = workflow_name
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.ran = 0
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._loop, name=f"bench-worker-{i}",
                                         daemon=True) for i in range(count)]

    def __enter__(self) -> _Workers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)

    def _loop(self) -> None:
        while not self.stop.is_set():
            attempt = self.trace.begin_attempt()
            try:
                act = self.wb.claim(workflow_name=self.workflow_name)
            except Exception as exc:
                self.trace.end_attempt(attempt, found=True)
                self.errors.append(f"claim: {type(exc).__name__}: {exc}")
                self.stop.wait(IDLE_POLL_SECONDS)
                continue
            self.trace.end_attempt(attempt, found=act is not None)
            if act is None:
                self.stop.wait(IDLE_POLL_SECONDS)
                continue
            try:
                with self.wb.run_activity(act.activity_exec_id):
                    pass
                with self._lock:
                    self.ran += 1
            except Exception as exc:
                self.errors.append(f"run {act.activity_exec_id}: {type(exc).__name__}: {exc}")


def _watch_end(trace: CallTrace, wx: str) -> tuple[threading.Event, dict[str, Any]]:
    """An event set by the write that moves ``wx`` to a terminal state (and its end time)."""
    done = threading.Event()
    seen: dict[str, Any] = {}
    terminal = {s.value for s in WorkflowState if s.is_terminal}

    def watch(call: Call, kw: dict[str, Any]) -> None:
        if done.is_set() or call.failed or call.op not in _WRITES:
            return
        parts = [kw, *(v for ti in kw.get("TransactItems") or [] for v in ti.values())]
        for part in parts:
            key = part.get("Key") or part.get("Item") or {}
            if (str(part.get("TableName", "")).endswith("workflow_exec")
                    and (key.get("workflow_exec_id") or {}).get("S") == wx):
                _, _, _, new = _describe(part)
                if new in terminal:
                    seen.update(state=new, t_end=call.t1)
                    done.set()
                    return

    trace.watchers.append(watch)
    return done, seen


def _one_run(wb: Whimbrel, trace: CallTrace, name: str, n: int, workers: int) -> dict[str, Any]:
    request_id = f"bench-peer-{uuid.uuid4()}"
    wx = workflow_exec_id_for(request_id)
    done, seen = _watch_end(trace, wx)
    pool = _Workers(wb, trace, name, workers) if workers else None
    try:
        if pool:
            pool.__enter__()
            time.sleep(3 * IDLE_POLL_SECONDS)  # workers are polling before the start
        trace.reset()
        wb.meter.reset()
        t0 = time.perf_counter()
        wb.start_workflow(name, request_id=request_id)
        finished = done.wait(RUN_TIMEOUT_SECONDS)
        meter = wb.meter.snapshot()
    finally:
        if pool:
            pool.__exit__()
        trace.watchers.clear()
    calls, attempts = trace.snapshot()
    if not finished:
        state = wb.get_workflow(wx).state.value
        raise RuntimeError(f"{name}: workflow {wx} still {state} after {RUN_TIMEOUT_SECONDS} s")
    if seen.get("state") != WorkflowState.COMPLETED.value:
        raise RuntimeError(f"{name}: workflow {wx} ended {seen.get('state')}")
    t_end = float(seen["t_end"])
    in_run = [c for c in calls if c.t0 >= t0 and c.t1 <= t_end]
    work, idle, lost = split_idle(in_run, attempts)
    work = sorted(work + lost, key=lambda c: c.t0)  # lost claims are real (contention) cost
    return {
        "wall_ms": (t_end - t0) * 1000.0,
        "per_step_ms": (t_end - t0) * 1000.0 / n,
        "calls": len(in_run),
        "work_calls": len(work),
        "idle_polls": len(idle),
        "lost_race_calls": len(lost),
        "failed_conditions": sum(1 for c in work if c.failed),
        "sequential_round_trips": max_non_overlapping(work),
        "call_p50_ms": median([c.ms for c in work]),
        "meter_calls": sum(meter["calls"].values()),
        "rru": sum(c.rru for c in in_run),
        "wru": sum(c.wru for c in in_run),
        "errors": list(pool.errors) if pool else [],
        "_trace": work,
    }


def _cycle(work: list[Call], n: int) -> dict[str, Any]:
    """The calls of one hand-off in the middle of a chain (RUNNING k .. RUNNING k+1)."""
    starts: dict[str, float] = {}
    for c in work:
        if c.table == "activity_exec" and c.new == ActivityState.RUNNING.value and not c.failed:
            starts.setdefault(c.who or "", c.t0)
    names = [f"a{i}" for i in range(n)]  # benchmarks.shapes.chain
    if not all(nm in starts for nm in names):
        return {"error": "RUNNING write of some activity not found in the trace"}
    windows = []
    spans: list[float] = []
    busy: list[float] = []
    for k in range(2, n - 3):
        lo, hi = starts[names[k]], starts[names[k + 1]]
        windows.append([c for c in work if lo <= c.t0 < hi])
        spans.append((hi - lo) * 1000.0)
        busy.append(_union_ms(windows[-1], hi))
    mid = sorted(windows[len(windows) // 2], key=lambda c: c.t0)
    k_mid = 2 + len(windows) // 2
    rel = {names[k_mid - 1]: "k-1", names[k_mid]: "k", names[k_mid + 1]: "k+1"}
    listing = []
    for c in mid:
        text = c.label()
        if c.who in rel:
            text = text.replace(f"[{c.who}]", f"[{rel[c.who]}]")
        listing.append({"call": text, "thread": re.sub(r"[-_]\d+$", "", c.thread),
                        "start_ms": round((c.t0 - mid[0].t0) * 1000.0, 2) if mid else 0.0,
                        "ms": round(c.ms, 2)})
    return {
        "window_ms_median": median(spans),
        "in_calls_ms_median": median(busy),
        "calls_median": median([float(len(w)) for w in windows]),
        "sequential_median": median([float(max_non_overlapping(w)) for w in windows]),
        "middle_activity": names[k_mid],
        "middle_calls": listing,
    }


def _union_ms(calls: list[Call], until: float) -> float:
    """Milliseconds during which at least one of ``calls`` was in flight (before ``until``)."""
    total = 0.0
    end = float("-inf")
    for c in sorted(calls, key=lambda c: c.t0):
        t1 = min(c.t1, until)
        if t1 <= end:
            continue
        total += t1 - max(c.t0, end)
        end = t1
    return total * 1000.0


def _whimbrel(ctx: BenchContext, mode: str, n_chain: int, n_fan: int) -> dict[str, Any]:
    launcher = shapes.NOOP if mode == "push" else shapes.EXTERNAL
    out: dict[str, Any] = {}
    with ctx.client() as wb:
        trace = CallTrace(wb.store)
        try:
            for shape, n_acts, workers, defn in (
                ("chain", n_chain, 1, shapes.chain(f"bench_peer_{mode}_chain", n_chain, launcher)),
                ("fanout", n_fan + 2, FAN_WORKERS,
                 shapes.fan(f"bench_peer_{mode}_fanout", n_fan, launcher)),
            ):
                wb.register_workflow(defn)
                workers = workers if mode == "pull" else 0
                _one_run(wb, trace, defn.name, n_acts, workers)  # warm-up, not counted
                runs = [_one_run(wb, trace, defn.name, n_acts, workers)
                        for _ in range(ctx.repeats)]
                last_trace: list[Call] = runs[-1]["_trace"]
                for r in runs:
                    r.pop("_trace")
                keys = [k for k in runs[0] if k != "errors"]
                entry: dict[str, Any] = {
                    "activities": n_acts,
                    "workers": workers,
                    "median": {k: median([float(r[k]) for r in runs]) for k in keys},
                    "runs": runs,
                }
                if shape == "chain":
                    entry["cycle"] = _cycle(last_trace, n_acts)
                    entry["call_mix"] = _call_mix(last_trace, n_acts)
                out[shape] = entry
        finally:
            trace.close()
    return out


def _call_mix(work: list[Call], n: int) -> dict[str, float]:
    """Calls per activity by operation and table over a whole run (idle polls excluded)."""
    mix: dict[str, float] = {}
    for c in work:
        key = f"{c.op} {c.table}" + (f".{c.index}" if c.index else "")
        mix[key] = mix.get(key, 0.0) + 1.0 / n
    return {k: round(v, 3) for k, v in sorted(mix.items(), key=lambda kv: -kv[1])}


def _dbos(n_chain: int, n_fan: int, repeats: int) -> dict[str, Any]:
    argv = [sys.executable, "-m", "benchmarks._dbos_peer", "--chain", str(n_chain),
            "--fanout", str(n_fan), "--repeats", str(repeats), "--poll", str(DBOS_POLL_SECONDS)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}: {proc.stderr[-2000:]}"}
    data: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    for shape in ("chain", "fanout"):
        entry = data[shape]
        per_step = [ms / entry["steps"] for ms in entry["wall_ms"]]
        entry["per_step_ms_runs"] = per_step
        entry["median"] = {"wall_ms": median(entry["wall_ms"]), "per_step_ms": median(per_step)}
    return data


def run(ctx: BenchContext) -> dict[str, Any]:
    n_chain = ctx.size(CHAIN, 25)
    n_fan = ctx.size(FAN, 40)
    result: dict[str, Any] = {
        "chain_steps": n_chain,
        "fanout_width": n_fan,
        "fanout_workers": FAN_WORKERS,
        "idle_poll_seconds": IDLE_POLL_SECONDS,
        "dbos": _dbos(n_chain, n_fan, ctx.repeats),
        "push": _whimbrel(ctx, "push", n_chain, n_fan),
        "pull": _whimbrel(ctx, "pull", n_chain, n_fan),
    }
    return result


# -- report -------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None or value != value:  # NaN
        return "-"
    return f"{value:.{digits}f}"


def figures(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per (shape, system): overhead per step, round trips per activity, bound, ratios."""
    p50 = float(result.get("_environment", {}).get("latency", {}).get("p50_ms", float("nan")))
    dbos = result.get("dbos", {})
    out: dict[str, dict[str, Any]] = {}
    for shape in ("chain", "fanout"):
        d_ms = dbos.get(shape, {}).get("median", {}).get("per_step_ms")
        row: dict[str, Any] = {"dbos": {"per_step_ms": d_ms}}
        for mode in ("push", "pull"):
            entry = result.get(mode, {}).get(shape)
            if not entry:
                continue
            med = entry["median"]
            n = entry["activities"]
            # The round-trip bound is defined for the chain only: in the fan-out, calls
            # of different activities overlap on purpose (its target is absolute).
            rt = med["sequential_round_trips"] / n if shape == "chain" else None
            bound = rt * p50 if rt is not None else None
            row[mode] = {
                "per_step_ms": med["per_step_ms"],
                "calls_per_activity": med["work_calls"] / n,
                "idle_polls": med["idle_polls"],
                "rt_per_activity": rt,
                "bound_ms": bound,
                "ratio_to_bound": med["per_step_ms"] / bound if bound else None,
                "ratio_to_dbos": med["per_step_ms"] / d_ms if d_ms else float("nan"),
                "call_p50_ms": med.get("call_p50_ms"),
                "rru_per_activity": med["rru"] / n,
                "wru_per_activity": med["wru"] / n,
                "cycle_calls": entry.get("cycle", {}).get("calls_median"),
                "cycle_sequential": entry.get("cycle", {}).get("sequential_median"),
            }
        out[shape] = row
    return out


def _chart(result: dict[str, Any], figs: dict[str, dict[str, Any]], img_dir: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = [("dbos", "DBOS (SQLite)", "#888888"), ("push", "Whimbrel push", "#1f77b4"),
               ("pull", "Whimbrel pull", "#ff7f0e")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, shape, title in ((axes[0], "chain", f"chain of {result['chain_steps']}"),
                             (axes[1], "fanout", f"1 → {result['fanout_width']} → 1")):
        row = figs.get(shape, {})
        top = 0.0
        for i, (key, _label, color) in enumerate(systems):
            value = (row.get(key) or {}).get("per_step_ms")
            if value is None or value != value:
                continue
            ax.bar(i, value, color=color, width=0.6)
            top = max(top, value, 1.25 * float((row.get(key) or {}).get("bound_ms") or 0.0))
            ax.text(i, value, f"{value:.1f}", ha="center", va="bottom", fontsize=9)
            bound = (row.get(key) or {}).get("bound_ms")
            if shape == "chain" and bound:
                ax.hlines(bound, i - 0.38, i + 0.38, colors="black", linewidth=2)
                ax.hlines(bound * CHAIN_BOUND_FACTOR, i - 0.38, i + 0.38, colors="black",
                          linestyles="dotted", linewidth=1.5)
        if shape == "fanout":
            ax.axhline(FANOUT_TARGET_MS, color="green", linestyle="--", linewidth=1,
                       label=f"target {FANOUT_TARGET_MS:.0f} ms")
            ax.legend(loc="upper left", fontsize=8)
        else:
            ax.plot([], [], color="black", linewidth=2,
                    label="bound: round trips x p50 latency")
            ax.plot([], [], color="black", linestyle="dotted", label="1.25 x bound")
            ax.legend(loc="upper left", fontsize=8)
        ax.set_ylim(0, max(top, FANOUT_TARGET_MS) * 1.35)
        ax.set_xticks(range(len(systems)), [s[1] for s in systems], fontsize=9)
        ax.set_ylabel("overhead per step (ms)")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Orchestration overhead per no-op step (median)", fontsize=11)
    fig.tight_layout()
    name = "bench_peer_overhead.png"
    fig.savefig(img_dir / name, dpi=110)
    plt.close(fig)
    return name


def render(result: dict[str, Any], img_dir: Path) -> str:
    env = result.get("_environment", {})
    lat = env.get("latency", {})
    p50 = float(lat.get("p50_ms", float("nan")))
    figs = figures(result)
    chart = _chart(result, figs, img_dir)
    dbos = result.get("dbos", {})
    n_chain, n_fan = result["chain_steps"], result["fanout_width"]
    lines = [
        f"## {TITLE}",
        "",
        f"The same two DAGs of no-op steps, in the same run: a chain of {n_chain} and a "
        f"1 → {n_fan} → 1 fan-out ({n_fan + 2} steps). **Overhead per step** = wall time "
        "of one workflow ÷ its number of steps (the steps do nothing). Medians over "
        f"{env.get('repeats', '?')} runs after one warm-up run each.",
        "",
        f"- **DBOS** {dbos.get('dbos_version', '?')} in a child process "
        "(`benchmarks/_dbos_peer.py`; DBOS is a process singleton), SQLite system database "
        "in a temp dir. Chain: a `@DBOS.workflow` calling the `@DBOS.step`s in turn. "
        "Fan-out: one step, then the steps enqueued on a queue registered with "
        f"`DBOS.register_queue(..., polling_interval_sec={DBOS_POLL_SECONDS})` and no "
        "concurrency limit (each enqueued step runs as its own child workflow), awaited "
        f"with `handle.get_result(polling_interval_sec={DBOS_POLL_SECONDS})` (DBOS polls "
        "for a result every 1 s by default), then one step.",
        "- The DAGs are `benchmarks.shapes.chain` and `benchmarks.shapes.fan`.",
        "- **Whimbrel push**: `python` launcher, `benchmarks.activities:noop`, run by the "
        "Full Logic client's thread pool (16 threads); the same process writes every "
        "transition.",
        "- **Whimbrel pull**: `external` activities; worker threads loop `wb.claim()` → "
        "`with wb.run_activity(id): pass` (1 worker for the chain, "
        f"{result.get('fanout_workers')} for the fan-out); a worker whose claim found "
        f"nothing waits {IDLE_POLL_SECONDS * 1000:.0f} ms.",
        "- Whimbrel's wall time runs from `start_workflow` to the end of the write that "
        "makes the workflow COMPLETED (seen in the call trace, no polling). No heartbeat "
        "timeout is set, so no heartbeat thread runs.",
        "- **Round trips**: every DynamoDB call is traced at the store's metering seam. "
        "*Sequential round trips* = the largest set of calls no two of which overlap in "
        "time, idle claim polls excluded (a worker's claim that returned nothing: it "
        "polls while there is no work, so it is off the critical path; the empty shard "
        "Queries inside a claim that then finds work *are* counted). Parallel calls (the "
        "start's item creations, a read overlapped with a write) count once per wave. "
        f"**Bound** = sequential round trips per activity x p50 request latency "
        f"({_fmt(p50)} ms, measured above); the chain target is overhead ≤ "
        f"{CHAIN_BOUND_FACTOR} x bound with ≤ {PULL_RT_TARGET} round trips per activity on "
        f"the pull path, and the fan-out target is < {FANOUT_TARGET_MS:.0f} ms per step.",
        "",
        f"![overhead per step](img/{chart})",
        "",
        "| DAG | system | overhead / step (ms) | x DBOS | calls / activity | sequential "
        "round trips / activity | bound (ms) | overhead ÷ bound | its calls' p50 (ms) | "
        "RRU / act. | WRU / act. |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for shape, label in (("chain", f"chain {n_chain}"), ("fanout", f"1→{n_fan}→1")):
        row = figs.get(shape, {})
        d = row.get("dbos", {}).get("per_step_ms")
        lines.append(f"| {label} | DBOS | {_fmt(d)} | 1.00 | - | - | - | - | - | - | - |")
        for mode in ("push", "pull"):
            f = row.get(mode)
            if not f:
                continue
            lines.append(
                f"| {label} | Whimbrel {mode} | {_fmt(f['per_step_ms'])} | "
                f"{_fmt(f['ratio_to_dbos'])} | {_fmt(f['calls_per_activity'], 1)} | "
                f"{_fmt(f['rt_per_activity'], 1)} | {_fmt(f['bound_ms'])} | "
                f"{_fmt(f['ratio_to_bound'])} | {_fmt(f.get('call_p50_ms'))} | "
                f"{_fmt(f['rru_per_activity'], 1)} | "
                f"{_fmt(f['wru_per_activity'], 1)} |")
    lines += [
        "",
        f"DBOS figures quoted in the issue for this kind of machine: about "
        f"{DBOS_ISSUE_MS['chain']} ms per step (chain) and {DBOS_ISSUE_MS['fanout']} ms "
        "per step (fan-out); the table's DBOS column is this run's own measurement. "
        "*Its calls' p50* is the median duration of the DynamoDB calls of that run itself: "
        "when it is well above the reference p50, the machine was busier during the run "
        "than while the reference was measured. Calls / activity excludes idle claim "
        "polls. Calls, round trips and units count "
        "start-up (request row, execution row, item creation) too, spread over the "
        "activities; RRU/WRU are the units DynamoDB Local reports, as the store's "
        "CapacityMeter counts them (AWS-billed units: see the cost section). Fan-out "
        "bounds are not shown: its steps are meant to overlap, so its target is absolute.",
        "",
    ]
    for mode in ("push", "pull"):
        entry = result.get(mode, {}).get("chain", {})
        cyc = entry.get("cycle") or {}
        if not cyc.get("middle_calls"):
            continue
        lines += [
            f"**One chain hand-off, {mode} path** — the calls between the RUNNING write of "
            f"activity k ({cyc['middle_activity']}) and that of k+1, from the last run's "
            f"trace: {_fmt(cyc['calls_median'], 0)} calls, "
            f"{_fmt(cyc['sequential_median'], 0)} sequential. A hand-off took "
            f"{_fmt(cyc.get('window_ms_median'), 1)} ms, of which "
            f"{_fmt(cyc.get('in_calls_ms_median'), 1)} ms with a DynamoDB call in flight; "
            "the rest is spent in this process between calls (serialization, thread "
            "hand-offs, the launch). Medians over the chain's middle activities.",
            "",
            "| # | start (ms) | call | thread | ms |",
            "|---:|---:|---|---|---:|",
        ]
        for i, c in enumerate(cyc["middle_calls"], 1):
            lines.append(f"| {i} | {c['start_ms']:.2f} | {c['call']} | {c['thread']} | "
                         f"{c['ms']:.2f} |")
        mix = entry.get("call_mix") or {}
        if mix:
            lines += ["", f"Calls per activity over the whole {mode} chain run: "
                      + ", ".join(f"{k} {v:g}" for k, v in mix.items()) + "."]
        lines.append("")
    fan_pull = result.get("pull", {}).get("fanout", {}).get("median", {})
    if fan_pull:
        lines += [
            f"Pull fan-out with {result.get('fanout_workers')} workers: "
            f"{_fmt(fan_pull.get('idle_polls'), 0)} idle claim polls (not in the figures "
            f"above) and {_fmt(fan_pull.get('lost_race_calls'), 0)} calls in claims that "
            "found candidates but lost every one to another worker, "
            f"{_fmt(fan_pull.get('failed_conditions'), 0)} failed conditional writes in all "
            "(medians per run; contention, counted in calls / activity).",
            "",
        ]
    lines += [
        "Reproduce: `./scripts/bench --only peer` (add `--quick` for a smoke run: "
        "chain 25, fan-out 40).",
        "",
    ]
    return "\n".join(lines)
