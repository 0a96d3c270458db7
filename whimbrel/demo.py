"""The README demo: a diamond workflow through the Simple Lambda API on ``whimbrel dev``.

One ``workflow_request`` item goes in (a raw boto3 ``PutItem``, as any language would
write it); the stream-triggered handlers start the workflow and drive the DAG; the
``python`` activities run in this process and heartbeat; progress is shown live; the
run ends with a table of states, durations and the DynamoDB units consumed.

    whimbrel demo [--endpoint-url URL] [--seconds 1.5]
    python -m whimbrel.demo [--endpoint-url URL] [--seconds 1.5]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from typing import Any

import boto3
from rich.console import Console
from rich.live import Live
from rich.table import Table

from whimbrel import WorkflowExec
from whimbrel.cli.shapes import ordered_attempts
from whimbrel.client.whimbrel import Whimbrel
from whimbrel.contract.definitions import ActivityDefinition, LauncherSpec, WorkflowDefinition
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.local.credentials import supply_local_credentials
from whimbrel.local.runtime import LocalRuntime
from whimbrel.worker.run import ActivityRun

#: How long each demo activity works (seconds) unless the run's input says otherwise.
WORK_SECONDS = float(os.environ.get("WHIMBREL_DEMO_SECONDS", "1.0"))

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
    return {"activity": run.activity_name, "upstream": sorted(run.upstream),
            "input": run.input}


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
    with console.status("starting the local runtime (DynamoDB Local, streams, schedule)"), \
            LocalRuntime(endpoint_url, prefix, heartbeat_rate_seconds=1.0,
                         lambda_log_level="ERROR") as rt:
        wb = rt.client
        wb.register_workflow(defn)
        wb.meter.reset()
        request_id = str(uuid.uuid4())
        raw = boto3.client("dynamodb", endpoint_url=rt.endpoint_url, region_name=rt.region)
        raw.put_item(TableName=f"{prefix}workflow_request", Item={
            "workflow_request_id": {"S": request_id},
            "workflow_name": {"S": "demo_diamond"},
            "input": {"S": json.dumps({"day": "2025-01-01", "seconds": work_seconds})},
            "when_epoch": {"N": str(time.time())},
        })
        console.print(f"[bold]PutItem[/] {prefix}workflow_request "
                      f"workflow_request_id={request_id}")
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
    colour = "green" if wf.state is WorkflowState.COMPLETED else "red"
    console.print(f"[{colour}]{wf.state.value}[/] — output of load: "
                  f"{wf.output.get('load')}")


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
