"""Operator actions: ``cancel``, ``retry``, ``sweep``, ``nudge``, ``rejections``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from whimbrel.cli.app import Cli, CliError, ExitCode, app, command
from whimbrel.cli.live import definition_of, exit_for, follow
from whimbrel.cli.shapes import activity_dict, first_line, iso, ordered_latest
from whimbrel.contract.states import WorkflowState

W = WorkflowState


@command(app, "cancel", example="whimbrel cancel 3f1c…e2 --wait")
def cancel(
    cli: Cli,
    workflow_exec_id: Annotated[str, typer.Argument(help="The run's workflow_exec_id.")],
    wait: Annotated[bool, typer.Option(
        "--wait", "-w", help="Wait until running activities stopped and the run ended.")
                    ] = False,
    timeout: Annotated[float | None, typer.Option(min=0, help="Give up waiting after this "
                                                       "many seconds (exit code 12).")] = None,
) -> None:
    """Cancel a run: nothing new starts and running activities are asked to stop.

    Idempotent. Cancelling a run that already ended COMPLETED, FAILED or TIMED_OUT is a
    conflict (exit code 5, the API's WorkflowAlreadyEnded); cancelling a CANCELLED run
    again succeeds.
    """
    cli.wb.cancel_workflow(workflow_exec_id)
    wf = cli.wb.get_workflow(workflow_exec_id)
    defn = definition_of(cli, wf.workflow_name, wf.version)
    if wait:
        wf = follow(cli, workflow_exec_id, defn, interval=0.5, timeout=timeout)
    running = [a.activity_name for a in ordered_latest(wf, defn) if a.state.is_active]
    data = {"workflow_exec_id": wf.workflow_exec_id, "state": wf.state.value,
            "still_running": running}

    def human() -> None:
        cli.out.print(f"{wf.workflow_exec_id} {wf.state.value}")
        if running:
            cli.note(f"asked to stop: {', '.join(running)} (they end as CANCELLED when they "
                     "report, or TIMED_OUT when they stop heartbeating)")

    cli.emit(data, human)
    if wait and wf.state is not W.CANCELLED:
        raise typer.Exit(int(exit_for(wf.state)))


@command(app, "retry", example="whimbrel retry 3f1c…e2:load:1")
def retry(
    cli: Cli,
    activity_exec_id: Annotated[str, typer.Argument(
        help="The FAILED or TIMED_OUT attempt, <workflow_exec_id>:<activity>:<attempt>.")],
) -> None:
    """Run a failed activity again, as a new attempt, while its workflow is RUNNING.

    If the next attempt is already scheduled (waiting for its retry back-off), it is
    launched now instead. Once the workflow is FAILED_WAITING or has ended, its
    failure is decided: the command refuses (exit code 5) and you start a new run.
    """
    act = cli.wb.retry_activity(activity_exec_id)
    now = cli.wb.clock()
    cli.emit(activity_dict(act, latest=True, now=now),
             lambda: cli.out.print(f"{act.activity_exec_id} {act.state.value}"))


@command(app, "sweep", example="whimbrel sweep --json")
def sweep(cli: Cli) -> None:
    """One pass of the heartbeat listener and reconciler, by hand.

    Times out activities past a deadline (heartbeat, start-to-close, schedule-to-start,
    a signal's or approval's timeout), launches retries whose back-off has passed, fires
    timers that are due, ends runs past their own timeout, and
    visits runs due for a check: "reconciled" lists those it had to repair, "checked"
    those it found in order. The scheduled Lambda does the same on a schedule; running it
    by hand is always safe. An item that fails is listed under "errors" (its id and the
error) and the pass goes on with every other item; the exit code stays 0 (the pass
ran), and the next pass visits the item again.
    """
    report = cli.wb.sweep()
    data = report.to_dict()

    def human() -> None:
        for key in ("timed_out", "retries_launched", "timers_fired", "cancelled",
                    "workflows_timed_out", "reconciled"):
            items = data[key]
            assert isinstance(items, list)
            cli.out.print(f"{key.replace('_', ' ')}: {len(items)}")
            for item in items:
                cli.out.print(f"  {item}", style="dim")
        checked = data["checked"]
        assert isinstance(checked, list)
        cli.out.print(f"checked, nothing to repair: {len(checked)}", style="dim")
        for err in report.errors:
            cli.err.print(Text(f"error: {err}", style="red"))

    cli.emit(data, human)


@command(app, "nudge", example="whimbrel nudge 3f1c…e2")
def nudge(
    cli: Cli,
    workflow_exec_id: Annotated[str, typer.Argument(help="The run's workflow_exec_id.")],
) -> None:
    """Reconcile one run now instead of at its next sweep visit.

    Gives back pool slots its ended attempts still hold, times out attempts past a
    deadline, launches retries whose back-off passed, fires due timers, records a lost
    attempt row LOST (its retry policy decides next) and redoes any follow-up a crash
    left half done. Costs what the run holds, never a sweep of everything; always safe
    (idempotent, and safe beside the scheduled sweep).
    """
    report = cli.wb.nudge(workflow_exec_id)
    data = report.to_dict()

    def human() -> None:
        what = {"repaired": "repaired", "timed_out": "timed out (past its own deadline)",
                "checked": "in order"}.get(report.outcome, report.outcome)
        cli.out.print(f"{report.workflow_exec_id} {report.state}: {what}")
        for key in ("timed_out", "retries_launched", "timers_fired", "cancelled", "released"):
            items = data[key]
            assert isinstance(items, list)
            if items:
                cli.out.print(f"{key.replace('_', ' ')}: {', '.join(items)}")
        if not report.changed:
            cli.note("nothing was due")

    cli.emit(data, human)


@command(app, "rejections", example="whimbrel rejections --days 3 --json")
def rejections(
    cli: Cli,
    day: Annotated[str | None, typer.Option(help="UTC day YYYY-MM-DD (default: today).")
                   ] = None,
    days: Annotated[int, typer.Option(min=1, max=400,
                                      help="Also look this many days back.")] = 1,
    limit: Annotated[int, typer.Option(min=1, max=10000, help="At most this many.")] = 100,
) -> None:
    """Records the stream Lambdas rejected (they can never succeed), newest first.

    Each names its source (workflow_request, activity_event or dead_letter), the
    reason, the error type and the offending record (docs/operations.md).
    """
    try:
        first = (datetime.strptime(day, "%Y-%m-%d").date() if day
                 else datetime.fromtimestamp(cli.wb.clock(), UTC).date())
    except ValueError:
        raise CliError(f"--day {day!r} is not YYYY-MM-DD", ExitCode.INVALID) from None
    rows: list[dict[str, Any]] = []
    for back in range(days):
        if len(rows) >= limit:
            break
        d = (first - timedelta(days=back)).isoformat()
        items = cli.wb.list_rejections(d, limit=limit - len(rows))
        rows.extend(_rejection(item) for item in items)

    def human() -> None:
        if not rows:
            cli.out.print("no rejections")
            return
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("when (UTC)", "source", "error", "reason"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(iso(r["when_epoch"]) or "", r["source"], r["error_type"],
                          Text(first_line(r["reason"], 100)))
        cli.out.print(table)

    cli.emit(rows, human)


def _rejection(item: Any) -> dict[str, Any]:
    record: Any = item.record
    try:
        record = json.loads(record)
    except (TypeError, ValueError):
        pass  # keep the raw text
    return {
        "rejection_day": item.day,
        "rejection_id": item.rejection_id,
        "when_epoch": float(item.when_epoch),
        "source": item.source,
        "error_type": item.error_type,
        "reason": item.reason,
        "record": record,
    }
