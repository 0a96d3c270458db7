"""Events: ``notifications`` reads (and follows) the events file ``whimbrel dev
--events-file`` appends to (docs/events.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from whimbrel.cli.app import Cli, CliError, ExitCode, app, command
from whimbrel.contract.notifications import DetailType
from whimbrel.observe.publishers import read_events
from whimbrel.settings import ENV_EVENTS_FILE

#: ``--type`` accepts the detail-type or a short name (``workflow-ended``).
_TYPES = {t.value.lower().replace(" ", "-"): t for t in DetailType}


@command(app, "notifications",
         example="whimbrel notifications --events-file events.jsonl --follow")
def notifications(
    cli: Cli,
    events_file: Annotated[Path | None, typer.Option(
        "--events-file", envvar=ENV_EVENTS_FILE, show_envvar=True, dir_okay=False,
        help="The file `whimbrel dev --events-file` appends to.")] = None,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Keep printing events as they are appended (Ctrl-C stops); "
                               "waits for the file to appear.")] = False,
    type_: Annotated[list[str] | None, typer.Option(
        "--type", "-t", help="Only this detail-type (repeatable): workflow-ended, "
                             "activity-failed, wait-started.")] = None,
    workflow_exec_id: Annotated[str | None, typer.Option(
        "--workflow-exec-id", "-W", help="Only the events of this run.")] = None,
    timeout: Annotated[float | None, typer.Option(
        min=0, help="With --follow: stop after this many seconds (exit 0).")] = None,
    interval: Annotated[float, typer.Option(
        min=0.05, help="With --follow: seconds between two looks at the file.")] = 0.5,
) -> None:
    """Print the events of a local run: a run ended, an activity failed for good, a wait
    started — one line each, as the notify consumer published them.

    With --json every event is printed as it is in the file: one JSON object (the
    EventBridge envelope) per line, for jq.
    """
    if events_file is None:
        raise CliError(f"no events file: give --events-file or set {ENV_EVENTS_FILE} "
                       "(what `whimbrel dev --events-file` printed)", ExitCode.USAGE)
    wanted = {_detail_type(t) for t in type_ or ()}
    deadline = None if timeout is None else time.monotonic() + timeout
    offset = 0
    while True:
        if events_file.exists() or not follow:
            offset = _print_new(cli, events_file, offset, wanted, workflow_exec_id)
        if not follow or (deadline is not None and time.monotonic() >= deadline):
            return
        time.sleep(interval)


def _detail_type(text: str) -> str:
    key = text.strip().lower().replace(" ", "-")
    if key not in _TYPES:
        raise CliError(f"--type {text!r}: not one of {', '.join(sorted(_TYPES))}",
                       ExitCode.USAGE)
    return _TYPES[key].value


def _print_new(cli: Cli, path: Path, offset: int, wanted: set[str],
               workflow_exec_id: str | None) -> int:
    try:
        found, offset = read_events(path, offset)
    except FileNotFoundError:
        raise CliError(f"events file {str(path)!r} does not exist (start `whimbrel dev "
                       f"--events-file {path}`, or add --follow to wait for it)",
                       ExitCode.USAGE) from None
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read events file {str(path)!r}: {exc}",
                       ExitCode.INVALID) from None
    for event in found:
        raw = event.get("detail")
        detail: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if wanted and event.get("detail-type") not in wanted:
            continue
        if workflow_exec_id and detail.get("workflow_exec_id") != workflow_exec_id:
            continue
        if cli.json:
            typer.echo(json.dumps(event, sort_keys=True))
        else:
            cli.out.print(_line(event, detail), markup=False, highlight=False)
    return offset


def _line(event: dict[str, Any], detail: dict[str, Any]) -> str:
    parts = [str(event.get("time", "")), f"{event.get('detail-type', '?'):<15}",
             str(detail.get("workflow_name", ""))]
    if detail.get("activity_name"):
        parts.append(f"{detail['activity_name']}#{detail.get('attempt', '?')}")
    parts.append(str(detail.get("state", "")))
    if detail.get("waiting_for"):
        parts.append(f"waiting for {detail['waiting_for']}")
    parts.append(str(detail.get("workflow_exec_id", "")))
    if detail.get("error"):
        parts.append(f"— {str(detail['error']).splitlines()[0][:120]}")
    return "  ".join(p for p in parts if p)
