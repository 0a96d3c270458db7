"""``whimbrel runs``: list runs by name, state, time and attributes, and act on every run
a filter selects (``runs cancel|redrive|signal|suspend|resume``: ``Whimbrel.batch``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

# Typer ships its own copy of Click (app.py): its context, not click's.
from typer._click.globals import get_current_context

from whimbrel.cli.app import Cli, CliError, ExitCode, JsonErrorsGroup, app, command
from whimbrel.cli.options import attributes_of, parse_input
from whimbrel.cli.render import workflows_table
from whimbrel.cli.shapes import workflow_dict
from whimbrel.client.batch import BatchReport, plan
from whimbrel.client.query import parse_time
from whimbrel.contract.states import WorkflowState

runs = typer.Typer(cls=JsonErrorsGroup, help="Runs by name, state, time and attributes, "
                   "and batch actions on them.")
app.add_typer(runs, name="runs")

NameOpt = Annotated[str | None, typer.Option(
    "--name", "--workflow", "-W", help="Only runs of this workflow.")]
StateOpt = Annotated[list[WorkflowState] | None, typer.Option(
    "--state", "-s", help="Only runs in this state (repeatable).", case_sensitive=False)]
SinceOpt = Annotated[str | None, typer.Option(
    help="Only runs created at or after: epoch seconds, ISO date/time or an age (2h, 7d).")]
UntilOpt = Annotated[str | None, typer.Option(
    help="Only runs created before this time (same forms as --since).")]
AttrOpt = Annotated[list[str] | None, typer.Option(
    "--attr", "-a", help="Only runs with this attribute, KEY=VALUE (repeatable: all of "
                         "them).")]
DryOpt = Annotated[bool, typer.Option("--dry-run", help="Change nothing: list what would "
                                                        "be acted on.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask; needed to act with "
                                                          "no filter at all.")]
RateOpt = Annotated[float | None, typer.Option(
    "--per-second", min=0.001, max=1000, help="At most this many runs a second.")]
BatchIdOpt = Annotated[str | None, typer.Option(
    "--batch-id", help="The batch's id, to finish an interrupted batch (default: derived "
                       "from the action and the filters, times to the hour, else the "
                       "UTC day).")]


def _time(text: str | None, option: str) -> str | None:
    if text is not None:
        parse_time(text, 0.0, option)  # its error names the option
    return text


@command(runs, "runs", example="whimbrel runs --attr customer=c-17 --state FAILED",
         callback=True)
def runs_list(
    cli: Cli, name: NameOpt = None, state: StateOpt = None, since: SinceOpt = None,
    until: UntilOpt = None, attr: AttrOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Runs per page.")] = 20,
    cursor: Annotated[str | None, typer.Option(
        help="Continue after a previous page (its cursor), with the same filters.")] = None,
) -> None:
    """List runs, newest first, one page at a time (as `whimbrel list`), also by
    attribute; or act on every run a filter selects (the commands below)."""
    if get_current_context().invoked_subcommand is not None:
        return
    filters = _filters(name, state, since, until, attr)
    page = cli.wb.list_workflows(**filters, limit=limit, cursor=cursor)
    now = cli.wb.clock()
    rows = [workflow_dict(wf, now=now, with_activities=False) for wf in page.items]

    def human() -> None:
        cli.out.print(workflows_table(rows) if rows else "no runs found")
        if page.cursor:
            cli.note(f"more runs: add --cursor {page.cursor}")

    cli.emit({"items": rows, "cursor": page.cursor}, human)


def _filters(name: str | None, state: list[WorkflowState] | None, since: str | None,
             until: str | None, attr: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "state": state or None,
                           "since": _time(since, "--since"), "until": _time(until, "--until")}
    attributes = attributes_of(attr)
    if attributes:
        out["attributes"] = attributes
    return out


def _batch(cli: Cli, action: str, filters: dict[str, Any], *, dry_run: bool, yes: bool,
           per_second: float | None, batch_id: str | None, **extra: Any) -> None:
    """Count, confirm, act with a progress bar, sum up."""
    unfiltered = not any(v for v in filters.values())
    if unfiltered and not yes:
        raise CliError(f"`runs {action}` with no filter would act on every run: give "
                       "--name, --state, --since, --until or --attr, or --yes to mean it",
                       ExitCode.INVALID)
    wb = cli.wb
    # Checked before anything is read or written (a bad filter, rate or id).
    checked = plan(action, **{"attributes": None, **filters}, per_second=per_second,
         batch_id=batch_id, all_runs=yes, now=wb.clock(), signal=extra.get("signal"),
         payload=extra.get("payload"))
    total = wb.count_workflows(**filters)
    if not cli.json:
        shown = f"{total:,}{' or more' if total >= 1000 else ''}"
        cli.err.print(f"{shown} runs match (batch {checked.batch_id}: run it again with "
                      f"--batch-id {checked.batch_id} to finish it if interrupted)")
    if not (dry_run or yes or cli.json) and not typer.confirm(f"{action} them?"):
        raise typer.Abort()
    kwargs = dict(filters, per_second=per_second, dry_run=dry_run, batch_id=checked.batch_id,
                  all_runs=yes, **extra)
    if cli.json:
        report = wb.batch(action, **kwargs)
    else:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      console=cli.err, transient=True) as bar:
            task = bar.add_task(f"{action}", total=total)
            report = wb.batch(action, **kwargs,
                              progress=lambda _wx, _outcome: bar.advance(task))
    _summary(cli, report)
    if report.refused:
        raise typer.Exit(int(ExitCode.CONFLICT))


def _summary(cli: Cli, report: BatchReport) -> None:
    def human() -> None:
        verb = "would" if report.dry_run else "done"
        acted = report.would if report.dry_run else report.done
        cli.out.print(f"{report.action}: {report.matched} matched, {len(acted)} {verb}, "
                      f"{len(report.skipped)} skipped, {len(report.refused)} refused "
                      f"(batch {report.batch_id})")
        for wx in acted:
            cli.out.print(f"  {verb} {wx}", style="dim")
        for wx, why in report.refused.items():
            cli.out.print(f"  refused {wx}: {why}", style="red", markup=False)
        if report.refused:
            cli.note(f"run it again with --batch-id {report.batch_id} to retry what was "
                     "refused; what was done is not done twice")

    cli.emit(report.to_dict(), human)


def _action(action: str, example: str, doc: str) -> None:
    def act(cli: Cli, name: NameOpt = None, state: StateOpt = None, since: SinceOpt = None,
            until: UntilOpt = None, attr: AttrOpt = None, per_second: RateOpt = None,
            dry_run: DryOpt = False, yes: YesOpt = False,
            batch_id: BatchIdOpt = None) -> None:
        _batch(cli, action, _filters(name, state, since, until, attr), dry_run=dry_run,
               yes=yes, per_second=per_second, batch_id=batch_id)
    act.__doc__ = doc
    act.__name__ = f"runs_{action}"
    command(runs, action, example=example)(act)


_COMMON_DOC = """

    Counts the matching runs first and asks before acting (--yes does not ask; --dry-run
    changes nothing), then acts on each with a progress bar, at most --per-second a
    second, and sums up what was done, skipped (not in a state for it, or done before by
    this batch) and refused. Resumable: run it again (same filters within the hour, or
    --batch-id) and it acts on what is left, never twice on one run. Exit code 5 if any
    run was refused."""

_action("cancel", "whimbrel runs cancel --name etl --state RUNNING --since 2h",
        "Cancel every run the filters select." + _COMMON_DOC)
_action("redrive", "whimbrel runs redrive --name etl --state FAILED --since 1d --yes",
        "Redrive every FAILED, CANCELLED or TIMED_OUT run the filters select." + _COMMON_DOC)
_action("suspend", "whimbrel runs suspend --attr customer=c-17 --state RUNNING",
        "Suspend every RUNNING run the filters select." + _COMMON_DOC)
_action("resume", "whimbrel runs resume --attr customer=c-17 --state SUSPENDED",
        "Resume every SUSPENDED run the filters select." + _COMMON_DOC)


@command(runs, "signal", example="whimbrel runs signal paid --payload '{\"ok\": true}' "
                                 "--name orders --state RUNNING")
def runs_signal(
    cli: Cli,
    signal: Annotated[str, typer.Argument(help="The signal's name.")],
    payload: Annotated[str | None, typer.Option(help="Its payload, JSON.")] = None,
    name: NameOpt = None, state: StateOpt = None, since: SinceOpt = None,
    until: UntilOpt = None, attr: AttrOpt = None, per_second: RateOpt = None,
    dry_run: DryOpt = False, yes: YesOpt = False, batch_id: BatchIdOpt = None,
) -> None:
    """Send a signal to every run the filters select (a run that does not wait for it
    is refused; the signal's id is the batch's, so a run gets it once)."""
    _batch(cli, "signal", _filters(name, state, since, until, attr), dry_run=dry_run,
           yes=yes, per_second=per_second, batch_id=batch_id, signal=signal,
           payload=parse_input(payload, "--payload"))
