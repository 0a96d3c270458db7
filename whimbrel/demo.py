"""The README demo: a diamond workflow through the Simple Lambda API on ``whimbrel dev``.

One ``workflow_request`` item goes in (a raw boto3 ``PutItem``, as any language would
write it); the stream-triggered handlers start the workflow and drive the DAG; the
``python`` activities run in this process and heartbeat; progress is shown live; the
run ends with a table of states, durations and the DynamoDB units consumed.

With moto installed (the ``local`` extra), ``extract`` also lists ~170 KB of keys —
more than an item may hold without a payload bucket — which go through a local S3
bucket (moto's server, started while DynamoDB Local starts); the summary shows the
object. Without moto the demo says how to enable it (moto's server adds ~215 MB to the
~61 MB demo install, so ``./scripts/demo`` leaves it out).

    whimbrel demo [--endpoint-url URL] [--seconds 1.5]
    python -m whimbrel.demo [--endpoint-url URL] [--seconds 1.5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import threading
import time
import uuid
from typing import Any

import boto3
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from whimbrel import WorkflowExec
from whimbrel.cli.shapes import ordered_attempts
from whimbrel.client.whimbrel import Whimbrel
from whimbrel.contract.definitions import ActivityDefinition, LauncherSpec, WorkflowDefinition
from whimbrel.contract.errors import WhimbrelError
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.local.credentials import supply_local_credentials
from whimbrel.local.runtime import LocalRuntime
from whimbrel.local.s3 import LocalS3
from whimbrel.settings import ENV_PAYLOAD_BUCKET
from whimbrel.worker.run import ActivityRun

#: How long each demo activity works (seconds) unless the run's input says otherwise.
WORK_SECONDS = float(os.environ.get("WHIMBREL_DEMO_SECONDS", "1.0"))
#: The demo's local payload bucket (on moto's S3 server).
DEMO_BUCKET = "whimbrel-demo-payloads"
#: Keys ``extract`` lists with a bucket: ~170 KB of JSON (64,000 bytes without one).
LISTING_KEYS = 4_000

_STYLE = {
    ActivityState.COMPLETED: "green", ActivityState.RUNNING: "yellow",
    ActivityState.FAILED: "red", ActivityState.TIMED_OUT: "red",
    ActivityState.CANCELLED: "dim", ActivityState.QUEUED: "cyan",
    ActivityState.READY: "cyan",
}


def work(run: ActivityRun) -> Any:
    """A demo activity: works for ``input["seconds"]``, then reports what it saw. The
    background heartbeat (every third of the timeout) keeps it alive; ``check`` stops it
    early if it was cancelled or timed out.

    The duration travels in the input, not in a module global: ``python -m whimbrel.demo``
    runs ``main`` in ``__main__``, while the launcher imports ``whimbrel.demo`` afresh.
    """
    seconds = float(run.input.get("seconds", WORK_SECONDS))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run.check()
        run.stop_event.wait(0.1)
    out = {"activity": run.activity_name, "upstream": sorted(run.upstream),
           "input": run.input}
    if run.activity_name == "extract" and run.input.get("listing"):
        out["listing"] = [f"raw/{run.input.get('day')}/events-{i:06d}.json.gz"
                          for i in range(int(run.input["listing"]))]
    return out


class DemoS3:
    """Where the demo keeps large payloads: the bucket ``WHIMBREL_PAYLOAD_BUCKET`` names
    (with its ``AWS_ENDPOINT_URL_S3``), else moto's S3 server, started on a thread while
    DynamoDB Local starts (both take seconds), else none."""

    def __init__(self) -> None:
        self.bucket: str | None = os.environ.get(ENV_PAYLOAD_BUCKET) or None
        self.server: LocalS3 | None = None
        self.note = ""
        self._error: str | None = None
        self._thread: threading.Thread | None = None
        self._endpoint_before = os.environ.get("AWS_ENDPOINT_URL_S3")

    def start(self) -> DemoS3:
        if self.bucket is not None:
            return self
        if importlib.util.find_spec("moto") is None:
            self.note = ("large payloads: off (moto is not installed; pip install "
                         "'whimbrel[local]' to see a 170 KB output go through a local S3)")
            return self
        with socket.socket() as sock:  # the port now, so the clients know the endpoint
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.server = LocalS3(port)
        os.environ["AWS_ENDPOINT_URL_S3"] = self.server.url
        self.bucket = DEMO_BUCKET
        self._thread = threading.Thread(target=self._serve, name="whimbrel-demo-s3",
                                        daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        assert self.server is not None
        try:
            self.server.start().create_bucket(DEMO_BUCKET)
        except (WhimbrelError, OSError) as exc:
            self._error = str(exc)

    def ready(self) -> bool:
        """True once the bucket can be written (waits for the server)."""
        if self._thread is not None:
            self._thread.join()
            if self._error is not None:
                self.note = f"large payloads: off (the local S3 did not start: {self._error})"
                self.bucket = None
        return self.bucket is not None

    def close(self) -> None:
        if self.server is not None:
            if self._thread is not None:
                self._thread.join()
            self.server.stop()
            if self._endpoint_before is None:
                os.environ.pop("AWS_ENDPOINT_URL_S3", None)
            else:
                os.environ["AWS_ENDPOINT_URL_S3"] = self._endpoint_before


def diamond() -> WorkflowDefinition:
    py = LauncherSpec.python("whimbrel.demo:work")
    return WorkflowDefinition("demo_diamond", (
        ActivityDefinition("extract", launcher=py, heartbeat_timeout_seconds=3),
        ActivityDefinition("clean", ("extract",), launcher=py, heartbeat_timeout_seconds=3),
        ActivityDefinition("enrich", ("extract",), launcher=py, heartbeat_timeout_seconds=3),
        ActivityDefinition("load", ("clean", "enrich"), launcher=py,
                           heartbeat_timeout_seconds=3),
    ), description="Whimbrel demo: a diamond DAG")


def _table(wf: WorkflowExec | None, title: str,
           defn: WorkflowDefinition | None = None) -> Table:
    table = Table(title=title)
    for col in ("activity", "attempt", "state", "duration (s)", "last heartbeat"):
        table.add_column(col)
    if wf is None:
        table.add_row("(waiting for the request's stream record)", "", "", "", "")
        return table
    now = time.time()
    for act in ordered_attempts(wf, defn):  # the DAG's order, not the ids' alphabet
        dur = act.duration_seconds
        hb = f"{now - act.heartbeat_epoch:.1f} s ago" if (
            act.heartbeat_epoch and act.state.is_active) else ""
        table.add_row(act.activity_name, str(act.attempt),
                      f"[{_STYLE.get(act.state, 'white')}]{act.state.value}[/]",
                      f"{dur:.2f}" if dur is not None else "", hb)
    return table


def run(endpoint_url: str | None = None, console: Console | None = None,
        timeout: float = 120.0, seconds: float | None = None) -> WorkflowExec:
    """Run the demo once; returns the finished execution.

    Raises:
        DynamoDBLocalError: DynamoDB Local could not be fetched or started.
        TimeoutError: the workflow did not finish within ``timeout`` seconds.
    """
    console = console or Console()
    defn = diamond()
    work_seconds = WORK_SECONDS if seconds is None else seconds
    prefix = f"demo_{uuid.uuid4().hex[:6]}_"
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    s3 = DemoS3().start()
    try:
        return _run(endpoint_url, console, timeout, work_seconds, defn, prefix, s3)
    finally:
        s3.close()


def _run(endpoint_url: str | None, console: Console, timeout: float, work_seconds: float,
         defn: WorkflowDefinition, prefix: str, s3: DemoS3) -> WorkflowExec:
    with console.status("starting the local runtime (DynamoDB Local, streams, schedule"
                        + (", S3)" if s3.server else ")")), \
            LocalRuntime(endpoint_url, prefix, heartbeat_rate_seconds=1.0,
                         lambda_log_level="ERROR", payload_bucket=s3.bucket) as rt:
        wb = rt.client
        wb.register_workflow(defn)
        large = s3.ready()
        wb.meter.reset()
        request_id = str(uuid.uuid4())
        raw = boto3.client("dynamodb", endpoint_url=rt.endpoint_url, region_name=rt.region)
        given = {"day": "2025-01-01", "seconds": work_seconds,
                 **({"listing": LISTING_KEYS} if large else {})}
        raw.put_item(TableName=f"{prefix}workflow_request", Item={
            "workflow_request_id": {"S": request_id},
            "workflow_name": {"S": "demo_diamond"},
            "input": {"S": json.dumps(given)},
            "when_epoch": {"N": str(time.time())},
        })
        console.print(f"[bold]PutItem[/] {prefix}workflow_request "
                      f"workflow_request_id={request_id}")
        console.print(f"payloads over 16 KB: s3://{s3.bucket}" + (
            f" (moto's S3 server, {s3.server.url})" if s3.server else "")
            if large else escape(s3.note))  # its "[local]" is no markup
        wx = workflow_exec_id_for(request_id)
        # The display polls with its own client, so the meter counts only the workflow.
        viewer = Whimbrel(endpoint_url=rt.endpoint_url, table_prefix=prefix,
                          region=rt.region)
        started = time.monotonic()
        wf: WorkflowExec | None = None
        # transient: the last frame is cleared, and the summary prints the table once.
        with Live(_table(None, "demo_diamond"), console=console, refresh_per_second=8,
                  transient=True) as live:
            while time.monotonic() - started < timeout:
                if viewer.find_workflow(wx) is not None:
                    wf = viewer.get_workflow(wx)
                title = f"demo_diamond {wf.state.value if wf else 'REQUESTED'}"
                live.update(_table(wf, title, defn))
                if wf is not None and wf.state.is_terminal:
                    break
                time.sleep(0.1)
        if wf is None or not wf.state.is_terminal:
            raise TimeoutError(f"demo workflow {wx} did not finish in {timeout} s")
        viewer.close()
        _summary(console, wf, defn, rt, time.monotonic() - started)
        return wf


def _summary(console: Console, wf: WorkflowExec, defn: WorkflowDefinition, rt: LocalRuntime,
             elapsed: float) -> None:
    meter = rt.client.meter
    table = Table(title=f"workflow {wf.workflow_exec_id}: {wf.state.value} in {elapsed:.1f} s")
    for col in ("table", "read units", "write units"):
        table.add_column(col, justify="right")
    names = sorted(set(meter.read_units) | set(meter.write_units))
    for name in names:
        table.add_row(name.removeprefix(rt.table_prefix), f"{meter.read_units[name]:.1f}",
                      f"{meter.write_units[name]:.1f}")
    table.add_row("[bold]total[/]", f"[bold]{meter.total_read_units:.1f}[/]",
                  f"[bold]{meter.total_write_units:.1f}[/]")
    console.print(_table(wf, "activities", defn))
    console.print(table)
    stats = {name: pump.stats for name, pump in rt.pumps.items()}
    console.print("stream deliveries: " + ", ".join(
        f"{n}: {s.records} record(s) in {s.invocations} invocation(s)"
        for n, s in stats.items()) + f"; heartbeat runs: {rt.heartbeat_runs}")
    if rt.payload_bucket is not None:
        _payloads(console, wf, rt)
    colour = "green" if wf.state is WorkflowState.COMPLETED else "red"
    console.print(f"[{colour}]{wf.state.value}[/] — output of load: "
                  f"{wf.output.get('load')}")


def _payloads(console: Console, wf: WorkflowExec, rt: LocalRuntime) -> None:
    """Where extract's large output went: its object in the bucket, and the requests."""
    blobs = rt.client.store.blobs
    s3 = blobs.client
    prefix = blobs.run_prefix(wf.workflow_exec_id)
    listed = s3.list_objects_v2(Bucket=rt.payload_bucket, Prefix=prefix).get("Contents", ())
    extract = wf.activity("extract").output
    size = len(json.dumps(extract)) if extract is not None else 0
    for obj in listed:
        console.print(f"extract's output, {size / 1000:.0f} KB of JSON: kept as "
                      f"s3://{rt.payload_bucket}/{obj['Key']} ({obj['Size'] / 1000:.0f} KB"
                      f"{', gzip' if obj['Key'].endswith('.gz') else ''}); its item holds "
                      "the reference")
    requests = rt.client.meter.s3_requests
    console.print("S3 requests: " + (", ".join(f"{op} {n}" for op, n in sorted(
        requests.items())) or "none") + " (clean and enrich read it from this process's "
        "cache: it wrote it)")


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    """Run the demo with command-line arguments ``argv`` (default: ``sys.argv[1:]``).

    Returns:
        0 when the workflow COMPLETED, else 1.

    Raises:
        DynamoDBLocalError: DynamoDB Local could not be fetched or started.
    """
    parser = argparse.ArgumentParser(prog="python -m whimbrel.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint-url", default=os.environ.get("WHIMBREL_ENDPOINT_URL"),
                        help="use this DynamoDB (Local) instead of starting one")
    parser.add_argument("--seconds", type=float, default=WORK_SECONDS,
                        help="how long each activity works")
    args = parser.parse_args(argv)
    # No endpoint: the demo starts its own DynamoDB Local, on this machine.
    supply_local_credentials(args.endpoint_url or "http://127.0.0.1")
    wf = run(args.endpoint_url, console, seconds=args.seconds)
    return 0 if wf.state is WorkflowState.COMPLETED else 1


if __name__ == "__main__":
    raise SystemExit(main())
