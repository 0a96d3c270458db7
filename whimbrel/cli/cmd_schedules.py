"""``whimbrel schedules …``: create, apply (a YAML file), list, pause, resume, delete,
backfill (docs/schedules.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table

from whimbrel.cli.app import Cli, JsonErrorsGroup, app, command
from whimbrel.cli.shapes import iso
from whimbrel.client.query_input import parse_time
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.schedule_info import ScheduleInfo
from whimbrel.contract.schedules import DEFAULT_CATCHUP_SECONDS, Schedule

schedules = typer.Typer(help="Start workflows on a cron or a rate.\n\nExample:\n\n"
                             "    whimbrel schedules create nightly report --cron '0 2 * * *'",
                        no_args_is_help=True, cls=JsonErrorsGroup)
app.add_typer(schedules, name="schedules")

IdArg = Annotated[str, typer.Argument(help="The schedule id.")]


def _row(info: ScheduleInfo) -> dict[str, Any]:
    out = info.to_dict()
    out["next_fire"] = iso(info.next_fire_epoch)
    out["last_fire"] = iso(info.last_fire_epoch)
    return out


def _show(cli: Cli, info: ScheduleInfo, verb: str) -> None:
    cli.emit(_row(info), lambda: cli.out.print(
        f"{verb} schedule {info.schedule_id} ({info.status}); next fire "
        f"{iso(info.next_fire_epoch) or '-'}"))


@command(schedules, "create",
         example="whimbrel schedules create nightly report --cron '0 2 * * *' "
                 "--timezone Europe/Berlin")
def schedules_create(
    cli: Cli,
    schedule_id: IdArg,
    workflow_name: Annotated[str, typer.Argument(help="The registered workflow to start.")],
    cron: Annotated[str | None, typer.Option(help="5-field cron (or @daily, ...).")] = None,
    every_seconds: Annotated[int | None, typer.Option(help="A rate instead of a cron.")] = None,
    input: Annotated[str | None, typer.Option(help="Run input (JSON).")] = None,
    timezone: Annotated[str, typer.Option(help="IANA zone the cron is read in.")] = "UTC",
    overlap: Annotated[str, typer.Option(help="skip, buffer_one or allow.")] = "skip",
    catchup_seconds: Annotated[float, typer.Option(
        help="How old a missed firing may be and still start.")] = DEFAULT_CATCHUP_SECONDS,
    start_at: Annotated[str | None, typer.Option(help="No firing before (ISO or epoch).")] = None,
    end_at: Annotated[str | None, typer.Option(help="No firing after (ISO or epoch).")] = None,
) -> None:
    """Create a schedule (the same spec again changes nothing; another one is refused)."""
    now = time.time()
    info = cli.wb.create_schedule(
        schedule_id, workflow_name, cron=cron, every_seconds=every_seconds,
        input=_json(input), timezone=timezone, overlap=overlap,
        catchup_seconds=catchup_seconds,
        start_at=None if start_at is None else parse_time(start_at, now, "--start-at"),
        end_at=None if end_at is None else parse_time(end_at, now, "--end-at"))
    _show(cli, info, "created")


def _json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"--input is not JSON: {exc}", field="input") from None


@command(schedules, "apply", example="whimbrel schedules apply schedules.yaml")
def schedules_apply(
    cli: Cli,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True,
                                         help="YAML (or JSON) with a `schedules:` list.")],
) -> None:
    """Create every schedule of a file (``schedules:`` a list of mappings with the
    fields of ``create_schedule``). All are checked before any is created."""
    try:
        data = yaml.safe_load(file.read_text())
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{file}: not YAML: {exc}"[:300], field="file") from None
    entries = data.get("schedules") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InvalidInput(f"{file}: expected a non-empty `schedules:` list", field="file")
    parsed = [Schedule.from_dict(e) for e in entries]
    for s in parsed:  # refuse an unknown workflow before creating anything
        cli.wb.get_definition(s.workflow_name)
    done = [cli.wb.apply_schedule(s) for s in parsed]

    def human() -> None:
        for i in done:
            cli.out.print(f"applied schedule {i.schedule_id} ({i.status}); next fire "
                          f"{iso(i.next_fire_epoch) or '-'}")

    cli.emit([_row(i) for i in done], human)


@command(schedules, "list", example="whimbrel schedules list --json")
def schedules_list(cli: Cli) -> None:
    """List every schedule with its status and next fire time."""
    rows = [_row(i) for i in cli.wb.list_schedules()]

    def human() -> None:
        if not rows:
            cli.out.print("no schedules (whimbrel schedules create ...)")
            return
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("SCHEDULE", "WORKFLOW", "WHEN", "STATUS", "NEXT FIRE", "LAST RUN"):
            table.add_column(col)
        for r in rows:
            when = r.get("cron") or f"every {r.get('every_seconds')} s"
            # A stored item this version cannot act on is listed, flagged (issue 31).
            status = r["status"] if r["problem"] is None else f"{r['status']} (odd)"
            table.add_row(str(r["schedule_id"]), str(r["workflow_name"]), str(when),
                          str(status), r["next_fire"] or "-", r["last_run"] or "-")
        cli.out.print(table)
        for r in rows:
            if r["problem"] is not None:
                cli.out.print(f"schedule {r['schedule_id']} is skipped by the sweep: "
                              f"{r['problem']}", markup=False)

    cli.emit(rows, human)


@command(schedules, "pause", example="whimbrel schedules pause nightly")
def schedules_pause(cli: Cli, schedule_id: IdArg) -> None:
    """Stop firing (idempotent)."""
    _show(cli, cli.wb.pause_schedule(schedule_id), "paused")


@command(schedules, "resume", example="whimbrel schedules resume nightly")
def schedules_resume(cli: Cli, schedule_id: IdArg) -> None:
    """Fire again from the next fire time after now (the paused time is not fired for)."""
    _show(cli, cli.wb.resume_schedule(schedule_id), "resumed")


@command(schedules, "delete", example="whimbrel schedules delete nightly")
def schedules_delete(cli: Cli, schedule_id: IdArg) -> None:
    """Delete a schedule; the runs it started go on."""
    cli.wb.delete_schedule(schedule_id)
    cli.emit({"schedule_id": schedule_id, "deleted": True},
             lambda: cli.out.print(f"deleted schedule {schedule_id}"))


@command(schedules, "backfill",
         example="whimbrel schedules backfill nightly --start 2026-11-01 --end 2026-11-07")
def schedules_backfill(
    cli: Cli,
    schedule_id: IdArg,
    start: Annotated[str, typer.Option(help="First fire time to start (ISO, epoch, age).")],
    end: Annotated[str, typer.Option(help="Last fire time to start (not after now).")],
) -> None:
    """Start the firings of a past range, once each (one already started is not started
    again: a firing's request id is ``<schedule_id>@<fire time>``)."""
    now = time.time()
    runs = cli.wb.backfill_schedule(schedule_id, parse_time(start, now, "--start"),
                                    parse_time(end, now, "--end"))
    cli.emit({"schedule_id": schedule_id, "workflow_exec_ids": runs},
             lambda: cli.out.print(f"backfilled {len(runs)} firing(s) of {schedule_id}"))
