"""Runs: ``submit``, ``status``, ``list``, ``events``, ``graph``."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from whimbrel import WorkflowExec
from whimbrel.cli.app import VERSION_RANGE, Cli, CliError, ExitCode, app, command
from whimbrel.cli.cmd_data import expanded, items_list, items_table
from whimbrel.cli.graph import GraphvizMissing, to_dot, to_mermaid, to_svg
from whimbrel.cli.live import definition_of, exit_for, follow
from whimbrel.cli.options import attributes_of, parse_input
from whimbrel.cli.render import status_view, timeline_table, workflows_table
from whimbrel.cli.shapes import timeline, workflow_dict
from whimbrel.client.query import cursor_anchor, parse_time
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.states import WorkflowState

IntervalOpt = Annotated[float, typer.Option(help="Seconds between two reads.", min=0.05)]
TimeoutOpt = Annotated[float | None, typer.Option(
    min=0, help="Give up waiting after this many seconds (exit code 12).")]


class GraphFormat(StrEnum):
    mermaid = "mermaid"
    dot = "dot"
    svg = "svg"


class View(StrEnum):
    table = "table"
    tree = "tree"


@command(app, "submit", example="whimbrel submit etl --input @day.json --wait")
def submit(
    cli: Cli,
    name: Annotated[str, typer.Argument(help="Registered workflow name.")],
    input: Annotated[str | None, typer.Option(
        "--input", "-i", help="JSON input, @file.json, or @- for stdin.")] = None,
    version: Annotated[int | None, typer.Option(
        help="Definition version (default: latest).", **VERSION_RANGE)] = None,
    request_id: Annotated[str | None, typer.Option(
        help="Idempotency key: the same id always means the same single run.")] = None,
    simple: Annotated[bool, typer.Option(
        "--simple", help="Write a request item for the stream Lambda instead of starting "
                         "in-process (Simple Lambda API).")] = False,
    wait: Annotated[bool, typer.Option(
        "--wait", "-w", help="Show live progress; exit 0 only if the run COMPLETED.")] = False,
    timeout: TimeoutOpt = None,
    interval: IntervalOpt = 0.5,
    priority: Annotated[int | None, typer.Option(
        help="0 (first) to 9 (default 5): orders the run among QUEUED ones "
             "(max_running) and its attempts among those waiting for a pool or a claim.",
        min=0, max=9)] = None,
    attr: Annotated[list[str] | None, typer.Option(
        "--attr", "-a", help="An attribute of the run, KEY=VALUE (repeatable; a value "
                             "of digits is a number): `whimbrel runs --attr` finds it.")
                    ] = None,
    run_here: Annotated[bool, typer.Option(
        "--run-here", help="Run the run's python activities in this process while it "
                           "waits (with --wait); by default a worker runs them "
                           "(`whimbrel dev`, `whimbrel worker --module`).")] = False,
) -> None:
    """Start a workflow run and print its workflow_exec_id.

    By default the run starts in this process (Full Logic API); its python activities
    are left for a worker (`whimbrel dev`, `whimbrel worker --module M`), unless
    --run-here asks this process to run them while it waits. Activities with the
    command launcher run here. --simple only writes the request item; a
    workflow_request stream Lambda (or `whimbrel dev`) starts the run. A run of a
    definition whose max_running runs are all RUNNING is accepted QUEUED and starts
    when one ends.
    """
    if run_here and not wait:
        raise CliError("--run-here runs the python activities while the command waits: "
                       "give --wait too", ExitCode.USAGE)
    cli.worker = run_here
    payload = parse_input(input)
    attributes = attributes_of(attr)
    if request_id is not None and not request_id.strip():
        raise CliError("--request-id must not be empty: it names the one run it stands for",
                       ExitCode.INVALID)
    if simple:
        request_id = cli.wb.request_workflow(name, payload, version=version, source="cli",
                                             request_id=request_id, priority=priority,
                                             attributes=attributes)
        wx = workflow_exec_id_for(request_id)
    else:
        wx = cli.wb.start_workflow(name, payload, version=version, request_id=request_id,
                                   source="cli", priority=priority, attributes=attributes)
        item = cli.wb.find_workflow(wx)
        request_id = item.workflow_request_id if item is not None else request_id
    if not wait:
        cli.emit({"workflow_exec_id": wx, "workflow_request_id": request_id,
                  "workflow_name": name, "mode": "simple" if simple else "full"},
                 lambda: cli.out.print(wx))
        return
    if not cli.json:
        cli.note(f"workflow_exec_id {wx}")
    if simple:
        _wait_exists(cli, wx, timeout)
    wf = cli.wb.get_workflow(wx)
    defn = definition_of(cli, wf.workflow_name, wf.version)
    wf = follow(cli, wx, defn, interval=interval, timeout=timeout)
    now = cli.wb.clock()
    if cli.json:
        cli.emit(workflow_dict(wf, now=now, defn=defn))
    elif not cli.interactive:
        cli.out.print(status_view(wf, defn, now))
    raise typer.Exit(int(exit_for(wf.state)))


def _wait_exists(cli: Cli, wx: str, timeout: float | None) -> None:
    deadline = time.monotonic() + (timeout if timeout is not None else 60.0)
    while cli.wb.find_workflow(wx) is None:
        if time.monotonic() >= deadline:
            raise CliError(f"request written, but no run {wx} appeared: is the "
                           "workflow_request Lambda (or `whimbrel dev`) running?",
                           ExitCode.WAIT_TIMEOUT)
        time.sleep(0.2)


@command(app, "status", example="whimbrel status --request-id nightly-2026-11-21 --json")
def status(
    cli: Cli,
    workflow_exec_id: Annotated[str | None, typer.Argument(
        help="The run's workflow_exec_id (or give --request-id).", show_default=False)
                                ] = None,
    request_id: Annotated[str | None, typer.Option(
        "--request-id", help="Show the run this workflow_request_id started instead.")
                          ] = None,
    watch: Annotated[bool, typer.Option(
        "--watch", "-w", help="Refresh until the run ends; then exit like submit --wait.")
                     ] = False,
    view: Annotated[View, typer.Option(help="Show the DAG as a table or a tree.")
                    ] = View.table,
    all_attempts: Annotated[bool, typer.Option(
        "--all-attempts", help="One row per attempt instead of the latest only.")] = False,
    expand: Annotated[list[str] | None, typer.Option(
        "--expand", "-x", help="List the items of this map (repeatable).")] = None,
    interval: IntervalOpt = 1.0,
    timeout: TimeoutOpt = None,
) -> None:
    """Show a run: every activity's state, attempts, duration, last heartbeat and error.

    The run is named by its workflow_exec_id, or by the workflow_request_id that started
    it (--request-id): the id given to `submit --request-id`, or written in a
    workflow_request item through the Simple Lambda API.
    """
    workflow_exec_id = _run_id(cli, workflow_exec_id, request_id)
    wf = cli.wb.get_workflow(workflow_exec_id)
    defn = definition_of(cli, wf.workflow_name, wf.version)
    if watch:
        wf = follow(cli, workflow_exec_id, defn, interval=interval, timeout=timeout,
                    view=view.value)
    now = cli.wb.clock()
    maps = expanded(wf, expand)
    if cli.json:
        cli.emit({**workflow_dict(wf, now=now, defn=defn),
                  **({"items": {m: items_list(wf, m, now) for m in maps}} if maps else {})})
    elif not (watch and cli.interactive):
        cli.out.print(status_view(wf, defn, now, view=view.value, all_attempts=all_attempts,
                                  more=tuple(items_table(wf, m, now) for m in maps)))
    if watch:
        raise typer.Exit(int(exit_for(wf.state)))


def _run_id(cli: Cli, workflow_exec_id: str | None, request_id: str | None) -> str:
    """The execution id given, or the one derived from ``request_id``.

    Raises:
        CliError: both or neither given (USAGE); the request's run does not exist
            (NOT_FOUND, saying whether the request itself was written).
    """
    if (workflow_exec_id is None) == (request_id is None):
        raise CliError("give either a WORKFLOW_EXEC_ID or --request-id ID", ExitCode.USAGE)
    if request_id is None:
        assert workflow_exec_id is not None
        return workflow_exec_id
    wx = workflow_exec_id_for(request_id)
    if cli.wb.find_workflow(wx) is None:
        if cli.wb.get_request(request_id) is None:
            raise CliError(f"no workflow request {request_id!r} (and no run {wx})",
                           ExitCode.NOT_FOUND)
        raise CliError(f"request {request_id!r} was written but has not started run {wx} "
                       "yet: is the workflow_request Lambda (or `whimbrel dev`) running? "
                       "`whimbrel rejections` lists requests it refused", ExitCode.NOT_FOUND)
    return wx


@command(app, "list", example="whimbrel list --workflow etl --state FAILED --since 7d")
def list_runs(
    cli: Cli,
    workflow: Annotated[str | None, typer.Option(
        "--workflow", "-W", help="Only runs of this workflow.")] = None,
    state: Annotated[list[WorkflowState] | None, typer.Option(
        "--state", "-s", help="Only runs in this state (repeatable).",
        case_sensitive=False)] = None,
    since: Annotated[str | None, typer.Option(
        help="Only runs created at or after: epoch seconds, ISO date/time (UTC unless "
             "it has a zone) or an age such as 2h or 7d.")] = None,
    until: Annotated[str | None, typer.Option(
        help="Only runs created before this time (same forms as --since).")] = None,
    days: Annotated[int | None, typer.Option(
        min=1, max=400, help="Shortcut for --since: today and the D - 1 UTC days "
                             "before.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Runs per page.")] = 20,
    cursor: Annotated[str | None, typer.Option(
        help="Continue after a previous page (its cursor), with the same filters.")] = None,
) -> None:
    """List runs, newest first, one page at a time, through indexes (never a Scan).

    Without --since, --days, --workflow or --state it looks back 30 UTC days. When more
    runs match, the next page's cursor is printed (on stderr; in "cursor" with --json).
    """
    if days is not None and since is not None:
        raise CliError("give --since or --days, not both", ExitCode.USAGE)
    # Ages ("2h") go as they are: list_workflows counts them from the first page's time.
    low: str | float | None = _time_option(since, "--since")
    if days is not None:
        # Today as of the first page, so that paging across midnight keeps the window.
        now = cursor_anchor(cursor) or cli.wb.clock()
        today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0,
                                                         microsecond=0)
        low = (today - timedelta(days=days - 1)).timestamp()
    page = cli.wb.list_workflows(name=workflow, state=state or None, since=low,
                                 until=_time_option(until, "--until"), limit=limit,
                                 cursor=cursor)
    rows = [_row(wf, cli.wb.clock()) for wf in page.items]

    def human() -> None:
        if not rows:
            cli.out.print("no runs found")
        else:
            cli.out.print(workflows_table(rows))
        if page.cursor:
            cli.note(f"more runs: add --cursor {page.cursor}")

    cli.emit({"items": rows, "cursor": page.cursor}, human)


def _time_option(text: str | None, option: str) -> str | None:
    """Check an option's time now, so that its error names the option."""
    if text is not None:
        parse_time(text, 0.0, option)
    return text


def _row(wf: WorkflowExec, now: float) -> dict[str, Any]:
    return workflow_dict(wf, now=now, with_activities=False)


@command(app, "events", example="whimbrel events 3f1c…e2 --activity load")
def events(
    cli: Cli,
    workflow_exec_id: Annotated[str, typer.Argument(help="The run's workflow_exec_id.")],
    activity: Annotated[str | None, typer.Option(
        "--activity", "-a", help="Only this activity (and the workflow's own changes).")
                        ] = None,
) -> None:
    """The timeline of a run: every state change of the workflow and of each attempt,
    with who made it and the error of failed attempts."""
    wf = cli.wb.get_workflow(workflow_exec_id)
    entries = [e for e in timeline(wf)
               if activity is None or e.activity_name in (None, activity)]
    start = wf.created_epoch
    data = {"workflow_exec_id": wf.workflow_exec_id, "workflow_name": wf.workflow_name,
            "state": wf.state.value, "events": [e.to_dict(start) for e in entries]}
    cli.emit(data, lambda: cli.out.print(timeline_table(entries, start)))


@command(app, "graph", example="whimbrel graph 3f1c…e2 --format svg --output run.svg")
def graph(
    cli: Cli,
    target: Annotated[str, typer.Argument(
        help="A workflow_exec_id (or, with --definition, a workflow name).")],
    format: Annotated[GraphFormat, typer.Option(
        "--format", "-f", help="mermaid or dot (text, always available) or svg (needs "
                               "Graphviz).")] = GraphFormat.mermaid,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write to this file instead of stdout.")] = None,
    definition: Annotated[bool, typer.Option(
        "--definition", help="Draw a registered definition instead of a run.")] = False,
    version: Annotated[int | None, typer.Option(
        help="With --definition: the version.", **VERSION_RANGE)] = None,
) -> None:
    """Draw a run as a graph with its activities coloured by state."""
    if definition:
        defn = cli.wb.get_definition(target, version)
        wf = None
        wx = None
    else:
        wf = cli.wb.get_workflow(target)
        defn = cli.wb.get_definition(wf.workflow_name, wf.version)
        wx = wf.workflow_exec_id
    now = cli.wb.clock()
    if format == "mermaid":
        text = to_mermaid(defn, wf, now)
    else:
        text = to_dot(defn, wf, now)
        if format == "svg":
            try:
                text = to_svg(text)
            except GraphvizMissing as exc:
                raise CliError(str(exc), ExitCode.UNAVAILABLE) from None
    if output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {str(output)!r}: {exc.strerror}",
                           ExitCode.USAGE) from None
    if cli.json:
        cli.emit({"workflow_exec_id": wx, "workflow_name": defn.name, "format": format.value,
                  "output": str(output) if output else None,
                  "graph": None if output else text})
    elif output is not None:
        cli.note(f"wrote {output}")
    else:
        typer.echo(text, nl=False)

