"""Peers side by side: Whimbrel, Temporal (dev server on a SQLite file) and DBOS (on
PostgreSQL) run the same shapes of no-op steps in the same run, one process each with
``INFLIGHT`` steps in flight (details in ``templates/peers.md``)."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from benchmarks.code_shapes import code_chain, code_fan
from benchmarks.common import Ctx, Workers, bars, free_port, median, round_trip, timed, wait_end
from benchmarks.shapes import EXTERNAL, NOOP, Shape, chain, fan

INFLIGHT = 16
POLL_SECONDS = 0.01  # DBOS queue and get_result polling (its default is 1 s)
IDLE_POLL = 0.005
#: The dev server's default for the knob that throttles sequential steps, and ours.
TEMPORAL_DEFAULT = {"history.transferProcessorMaxPollRPS": 20}
TEMPORAL_TUNED = {"history.transferProcessorMaxPollRPS": 1000}
ENGINES = {"whimbrel_push": "Whimbrel push (python launcher)", "whimbrel_pull": "Whimbrel "
           "pull (external workers)", "whimbrel_code": "Whimbrel code workflow (push)",
           "temporal": "Temporal (tuned)", "temporal_default": "Temporal (default config)",
           "dbos": "DBOS on PostgreSQL"}


def whimbrel(ctx: Ctx, mode: str, shapes: list[Shape]) -> dict[str, Any]:
    """ms per step of each shape, pushed (``python`` launcher) or pulled (claims)."""
    if mode == "code":
        return whimbrel_code(ctx, shapes)
    out: dict[str, Any] = {}
    with ctx.client(max_workers=INFLIGHT) as wb:
        for shape in shapes:
            name = f"peer_{mode}_{shape.key}"
            wb.register_workflow(shape.definition(name, NOOP if mode == "push" else EXTERNAL))
            workers = Workers(wb, name, min(INFLIGHT, max(shape.stages)) if mode == "pull"
                              else 0, poll=IDLE_POLL)
            runs = []
            for i in range(ctx.repeats + 1):  # the first run is a warm-up
                t0 = time.time()  # to the end stamp on the workflow item (engine clock)
                end = float(wait_end(wb, wb.start_workflow(name)).ended_epoch or 0)
                runs += [(end - t0) * 1000 / shape.steps] if i else []
            workers.close()
            out[shape.key] = {"ms_per_step": median(runs), "runs": runs}
    return out


def whimbrel_code(ctx: Ctx, shapes: list[Shape]) -> dict[str, Any]:
    """ms per step of each shape written as a code workflow (``code_shapes.py``: the
    chain as ``ctx.step`` in a loop, the fan-out as ``ctx.start`` then each ``result()``),
    ``python`` no-op steps: the same code style as Temporal's and DBOS's below."""
    out: dict[str, Any] = {}
    with ctx.client(max_workers=INFLIGHT) as wb:
        wb.register_workflow(code_chain)
        wb.register_workflow(code_fan)
        for shape in shapes:
            wide = max(shape.stages)
            name, input = (("code_chain", {"steps": shape.steps}) if wide == 1 else
                           ("code_fan", {"width": wide}))
            runs = []
            for i in range(ctx.repeats + 1):  # the first run is a warm-up
                t0 = time.time()
                end = float(wait_end(wb, wb.start_workflow(name, input)).ended_epoch or 0)
                runs += [(end - t0) * 1000 / shape.steps] if i else []
            out[shape.key] = {"ms_per_step": median(runs), "runs": runs}
    return out


@activity.defn
async def noop(i: int) -> int:
    return i


@workflow.defn
class StagesWorkflow:
    @workflow.run
    async def run(self, stages: list[int]) -> int:
        for width in stages:
            await asyncio.gather(*(workflow.execute_activity(
                noop, i, start_to_close_timeout=timedelta(seconds=60)) for i in range(width)))
        return sum(stages)


async def _ms(calls: int, make: Callable[[], Awaitable[Any]], warmup: int) -> list[float]:
    out = []
    for _ in range(warmup + calls):
        t0 = time.perf_counter()
        await make()
        out.append((time.perf_counter() - t0) * 1000)
    return out[warmup:]


async def _temporal(target: str, server: subprocess.Popen[bytes], shapes: list[Shape],
                    repeats: int) -> dict[str, Any]:
    for _ in range(180):  # the dev server takes a few seconds to listen
        try:
            client = await Client.connect(target)
            break
        except RuntimeError:
            if server.poll() is not None:
                raise
            await asyncio.sleep(0.5)
    tq, out = f"bench-{uuid.uuid4().hex[:8]}", {}  # shape key -> ms per step
    async with Worker(client, task_queue=tq, workflows=[StagesWorkflow], activities=[noop],
                      max_concurrent_activities=INFLIGHT,
                      workflow_runner=UnsandboxedWorkflowRunner()):
        for shape in shapes:
            runs = [ms / shape.steps for ms in await _ms(repeats, lambda s=shape: (
                client.execute_workflow(StagesWorkflow.run, list(s.stages),
                                        id=f"bench-{uuid.uuid4()}", task_queue=tq)), 1)]
            out[shape.key] = {"ms_per_step": median(runs), "runs": runs}
    unit = await _ms(300, lambda: client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace="default")), 30)
    return {"shapes": out, "unit": {"name": "DescribeNamespace gRPC to the dev server",
                                    "p50_ms": median(unit)}}


def temporal(shapes: list[Shape], repeats: int, config: dict[str, Any]) -> dict[str, Any]:
    """Start a dev server with ``config`` (dynamic config values), measure, stop it."""
    binary = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    tmp, port = Path(tempfile.mkdtemp(prefix="bench-temporal-")), free_port()
    argv = [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port",
            str(port), "--db-filename", f"{tmp}/temporal.db", *(
                a for k, v in config.items()
                for a in ("--dynamic-config-value", f"{k}={json.dumps(v)}"))]
    with open(tmp / "server.log", "wb") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        result = asyncio.run(_temporal(f"127.0.0.1:{port}", server, shapes, repeats))
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    return {**result, "config": config, "version": version.strip(),
            "command": " ".join(["temporal", *argv[1:]]).replace(str(tmp), "$TMP")}


def dbos(shapes: list[Shape], repeats: int) -> dict[str, Any]:
    """Start a throwaway PostgreSQL cluster (``initdb`` in a temp dir, ``pg_ctl`` on a free
    port, as the ``postgres`` user when run as root: PostgreSQL refuses root), measure
    DBOS in a child process (DBOS is a process singleton), stop the cluster."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(
        p.split("/")[4]))
    if not found:
        raise RuntimeError("no PostgreSQL in /usr/lib/postgresql: ./scripts/bench installs it")
    bin_, tmp, port = Path(found[-1]).parent, Path(tempfile.mkdtemp(prefix="bench-pg-")), \
        free_port()
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(tmp, "postgres")

    def pg(*argv: str) -> str:
        return subprocess.run([*as_user, *argv], check=True, capture_output=True, text=True,
                              cwd=tmp).stdout.strip()

    pg(str(bin_ / "initdb"), "-D", f"{tmp}/data", "-A", "trust", "-U", "postgres")
    pg(str(bin_ / "pg_ctl"), "-D", f"{tmp}/data", "-l", f"{tmp}/log", "-w", "-o",
       f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1", "start")
    try:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_peers", json.dumps(
            [f"postgresql://postgres@127.0.0.1:{port}/dbos_bench", repeats,
             {s.key: list(s.stages) for s in shapes}])],
            cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True)
        version = pg(str(bin_ / "postgres"), "--version")
    finally:
        pg(str(bin_ / "pg_ctl"), "-D", f"{tmp}/data", "-m", "fast", "-w", "stop")
        shutil.rmtree(tmp, ignore_errors=True)
    if proc.returncode:
        raise RuntimeError(f"DBOS child exit {proc.returncode}: {proc.stderr[-1500:]}")
    return {**json.loads(proc.stdout.splitlines()[-1]), "postgres": version}


def _dbos_child(url: str, repeats: int, shapes: dict[str, list[int]]) -> None:
    import psycopg
    from dbos import DBOS

    DBOS(config={"name": "whimbrel_bench", "system_database_url": url, "log_level": "WARNING"})

    @DBOS.step()
    def noop(i: int) -> int:
        return i

    @DBOS.workflow()
    def stages(widths: list[int]) -> int:
        for width in widths:
            if width == 1:
                noop(0)
                continue
            for handle in [queue.enqueue(noop, i) for i in range(width)]:
                handle.get_result(polling_interval_sec=POLL_SECONDS)
        return sum(widths)

    DBOS.launch()
    queue = DBOS.register_queue("bench_stage", worker_concurrency=INFLIGHT,
                                polling_interval_sec=POLL_SECONDS)
    out: dict[str, Any] = {"shapes": {}}
    try:
        for key, widths in shapes.items():
            runs = [ms / sum(widths) for ms in timed(lambda w=widths: stages(w), repeats, 1)]
            out["shapes"][key] = {"ms_per_step": median(runs), "runs": runs}
    finally:
        DBOS.destroy()
    with psycopg.connect(url) as conn:
        unit = timed(lambda: conn.execute("SELECT 1").fetchone(), 300)
    print(json.dumps({**out, "unit": {"name": "SELECT 1 through psycopg",
                                      "p50_ms": median(unit)}}))


def run(ctx: Ctx) -> dict[str, Any]:
    shapes = [chain(ctx.size(50, 20)), fan(ctx.size(100, 30))]
    engines: dict[str, Any] = {}
    for key, job in {
        **{f"whimbrel_{m}": lambda m=m: {"shapes": whimbrel(ctx, m, shapes), "unit": {
            "name": "DynamoDB Local GetItem/UpdateItem through botocore",
            "p50_ms": round_trip(ctx.endpoint, 200)["p50_ms"]}}
           for m in ("push", "pull", "code")},
        "temporal": lambda: temporal(shapes, ctx.repeats, TEMPORAL_TUNED),
        "temporal_default": lambda: temporal(shapes, ctx.repeats, TEMPORAL_DEFAULT),
        "dbos": lambda: dbos(shapes, ctx.repeats),
    }.items():
        try:
            engines[key] = job()
        except Exception as exc:  # a peer that cannot run is reported, not fatal
            traceback.print_exc()
            engines[key] = {"error": f"{type(exc).__name__}: {exc}"[:600]}
    return {"shapes": [{"key": s.key, "label": s.label} for s in shapes],
            "inflight": INFLIGHT, "engines": engines}


def ms_per_step(result: dict[str, Any], engine: str, shape_key: str) -> float:
    return float(result["engines"].get(engine, {}).get("shapes", {}).get(shape_key, {}).get(
        "ms_per_step", "nan"))


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    shapes, engines = result["shapes"], result["engines"]
    head = " | ".join(f"{s['label']}: ms / step | in round trips" for s in shapes)
    rows = [f"| engine | store round trip (p50) | {head} |", "|---|---|" + "---:|" * 2 * len(
        shapes)]
    for key, label in ENGINES.items():
        e = engines.get(key) or {"error": "not run"}
        cells = [f"{ms:.2f} | {ms / e['unit']['p50_ms']:.1f}" for s in shapes
                 if "unit" in e for ms in [ms_per_step(result, key, s["key"])]]
        rows.append(f"| {label} | **failed**: {e['error']} |" if "error" in e else
                    f"| {label} | {e['unit']['p50_ms']:.3f} ms ({e['unit']['name']}) | "
                    + " | ".join(cells) + " |")
    chart = bars(img / "bench_peers.png", [s["label"] for s in shapes],
                 {ENGINES[k]: [ms_per_step(result, k, s["key"]) for s in shapes]
                  for k in ENGINES if "unit" in engines.get(k, {})},
                 "ms per no-op step (median)", "Same shapes, same run, same machine")
    t = engines.get("temporal", {})
    return {"table": "\n".join(rows), "chart": chart, "inflight": result["inflight"],
            "temporal_command": t.get("command", "(not run)"),
            "temporal_version": t.get("version", "?"), "temporal_default": TEMPORAL_DEFAULT,
            "temporal_tuned": TEMPORAL_TUNED, "dbos_poll": POLL_SECONDS, "idle_poll": IDLE_POLL,
            "postgres": engines.get("dbos", {}).get("postgres", "?")}


if __name__ == "__main__":  # the DBOS child process
    _dbos_child(*json.loads(sys.argv[1]))
