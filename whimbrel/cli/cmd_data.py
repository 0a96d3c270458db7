"""Data-driven runs: ``redrive``, and a map's items for ``status --expand``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from whimbrel import WorkflowExec
from whimbrel.cli.app import Cli, CliError, ExitCode, app, command
from whimbrel.cli.datashapes import note
from whimbrel.cli.live import definition_of, exit_for, follow
from whimbrel.cli.options import parse_input
from whimbrel.cli.render import state_text
from whimbrel.cli.shapes import activity_dict, activity_duration, first_line, human_duration


def expanded(wf: WorkflowExec, names: list[str] | None) -> tuple[str, ...]:
    """The maps ``status --expand`` names, checked against the run.

    Raises:
        CliError: (USAGE) a name that is not a map of this run.
    """
    maps = {a.activity_name for a in wf.activities if a.map_size is not None}
    for name in names or ():
        if name not in maps:
            known = ", ".join(sorted(maps)) or "none has expanded yet"
            raise CliError(f"--expand {name!r}: not a map of this run (maps: {known})",
                           ExitCode.USAGE)
    return tuple(dict.fromkeys(names or ()))


def items_table(wf: WorkflowExec, name: str, now: float) -> Table:
    """One row per item of map ``name`` (its latest attempt), in element order."""
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold",
                  title=f"items of {name}", title_justify="left")
    for col in ("item", "state", "attempt", "duration", "error"):
        table.add_column(col, no_wrap=col != "error", overflow="fold")
    for index, act in sorted(wf.map_items(name).items()):
        table.add_row(str(index), state_text(act.state.value), str(act.attempt),
                      human_duration(activity_duration(act, now)),
                      Text(first_line(act.error, 80) or note(act),
                           style="red" if act.error else "dim"))
    return table


def items_list(wf: WorkflowExec, name: str, now: float) -> list[dict[str, Any]]:
    """The items of map ``name`` as ``status --json`` shows them."""
    return [activity_dict(a, latest=True, now=now)
            for _, a in sorted(wf.map_items(name).items())]


#: ``--wait`` of redrive: follow the run to its new end.
FollowOpt = Annotated[bool, typer.Option(
    "--wait", "-w", help="Wait until the run ends again; exit like submit --wait.")]
WaitTimeoutOpt = Annotated[float | None, typer.Option(
    "--timeout", min=0, help="Give up waiting after this many seconds (exit code 12).")]


@command(app, "redrive", example="whimbrel redrive 3f1c…e2 --wait")
def redrive(
    cli: Cli,
    workflow_exec_id: Annotated[str, typer.Argument(help="The run's workflow_exec_id.")],
    wait: FollowOpt = False,
    timeout: WaitTimeoutOpt = None,
) -> None:
    """Run a FAILED, CANCELLED or TIMED_OUT run again from where it broke.

    Every activity that did not complete gets a new attempt; completed ones keep their
    output and never run again, a map keeps its completed items. The run is RUNNING
    again. A run that is not FAILED, CANCELLED or TIMED_OUT, or still has an attempt
    running, is a conflict (exit code 5); of concurrent redrives one takes effect.
    """
    cli.wb.redrive_workflow(workflow_exec_id)
    wf = cli.wb.get_workflow(workflow_exec_id)
    if wait:
        defn = definition_of(cli, wf.workflow_name, wf.version)
        wf = follow(cli, workflow_exec_id, defn, interval=0.5, timeout=timeout)
    data = {"workflow_exec_id": wf.workflow_exec_id, "state": wf.state.value,
            "redrive_count": wf.redrive_count}
    cli.emit(data, lambda: cli.out.print(
        f"{wf.workflow_exec_id} {wf.state.value} (redrive {wf.redrive_count})"))
    if wait:
        raise typer.Exit(int(exit_for(wf.state)))


@command(app, "fork", example="whimbrel fork 3f1c…e2 --from transform --wait")
def fork(
    cli: Cli,
    workflow_exec_id: Annotated[str, typer.Argument(help="The run to fork.")],
    from_activity: Annotated[str, typer.Option(
        "--from", help="The activity to run again, with everything after it (of a code "
        "run: the step NAME#K).")],
    input: Annotated[str | None, typer.Option(
        "--input", "-i", help="A new input, JSON or @file (default: the run's).")] = None,
    version: Annotated[int | None, typer.Option(
        min=1, max=2**31 - 1, help="Run this definition version (default: the run's).")
                       ] = None,
    wait: FollowOpt = False,
    timeout: WaitTimeoutOpt = None,
) -> None:
    """Start a new run that keeps what did not depend on ACTIVITY and runs ACTIVITY and
    everything after it again.

    Activities that do not depend on it keep the run's completed outputs (shown as
    "reused from …"; they never run); the new run's status says "forked from …". An
    activity the definition lacks is refused (exit code 4) and nothing is written.

    A code run is forked from a step NAME#K (a bare NAME is NAME#1): the steps that
    completed before it in the code's order are reused and its code replays over them.
    """
    new = cli.wb.fork_workflow(workflow_exec_id, from_activity=from_activity,
                               input=parse_input(input), version=version)
    wf = cli.wb.get_workflow(new)
    if wait:
        defn = definition_of(cli, wf.workflow_name, wf.version)
        wf = follow(cli, new, defn, interval=0.5, timeout=timeout)
    reused = sorted(a.activity_name for a in wf.activities if a.reused_from)
    data = {"workflow_exec_id": new, "forked_from": workflow_exec_id,
            "state": wf.state.value, "reused": reused}
    cli.emit(data, lambda: cli.out.print(
        f"{new} {wf.state.value} (fork of {workflow_exec_id}; reused: "
        f"{', '.join(reused) or 'nothing'})"))
    if wait:
        raise typer.Exit(int(exit_for(wf.state)))
