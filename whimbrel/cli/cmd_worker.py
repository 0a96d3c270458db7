"""``whimbrel worker``: a long-running worker, for python modules or any command."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from whimbrel.cli.app import Cli, CliError, ExitCode, app, command
from whimbrel.worker.command_worker import POLL_MAX_SECONDS, POLL_MIN_SECONDS, CommandWorker

_BOTH = ("give either --module M (python activities) or --workflow NAME -- COMMAND "
         "(any language), not both")


@command(app, "worker",
         example="whimbrel worker --workflow video --activity render --concurrency 4 "
                 "-- ./render.sh",
         context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def worker(
    cli: Cli,
    argv: Annotated[list[str] | None, typer.Argument(
        metavar="COMMAND [ARGS]", show_default=False,
        help="The command to run for each claimed attempt (after --).")] = None,
    module: Annotated[list[str] | None, typer.Option(
        "--module", "-m", metavar="MODULE", show_default=False,
        help="Run the python activities (and code workflows) of this module; "
             "repeatable.")] = None,
    workflow: Annotated[str | None, typer.Option(
        "--workflow", "-w", metavar="NAME", show_default=False,
        help="With COMMAND: claim the external activities of this workflow.")] = None,
    activity: Annotated[str | None, typer.Option(
        "--activity", "-a", metavar="NAME", show_default=False,
        help="With COMMAND: only this activity of the workflow.")] = None,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", "-c", min=1, max=1024, show_default=False,
        help="Attempts run at once (default 1 for COMMAND).")] = None,
    input_file: Annotated[bool, typer.Option(
        "--input-file",
        help="Hand the input in a file named by WHIMBREL_INPUT_FILE instead of on "
             "stdin.")] = False,
    poll_max: Annotated[float, typer.Option(
        "--poll-max", min=POLL_MIN_SECONDS, max=60,
        help=f"Seconds between two polls at most, once idle (it starts at "
             f"{POLL_MIN_SECONDS:g} and doubles while nothing comes).")] = POLL_MAX_SECONDS,
    stop_grace: Annotated[float, typer.Option(
        "--stop-grace", min=0,
        help="Seconds running commands may go on after SIGTERM before they are handed "
             "back.")] = 25.0,
    kill_grace: Annotated[float, typer.Option(
        "--kill-grace", min=0,
        help="Seconds between SIGTERM and SIGKILL when a command must stop.")] = 5.0,
) -> None:
    """Run attempts until SIGTERM or Ctrl-C, in one long-running process.

    With --module M it runs the python activities of those modules (Whimbrel.run_worker).
    With --workflow NAME -- COMMAND ARGS it claims the workflow's READY external
    activities and runs COMMAND for each (any language): the input as JSON on stdin (or
    in WHIMBREL_INPUT_FILE), the ids in WHIMBREL_ACTIVITY_EXEC_ID, WHIMBREL_ATTEMPT and
    the other WHIMBREL_* variables; it heartbeats while COMMAND runs; exit code 0
    completes the attempt with stdout as its output (JSON, or the text), any other fails
    it with the tail of stderr. Idle, it polls every 0.05 s backing off to --poll-max.
    SIGTERM claims nothing more and lets running commands finish for --stop-grace
    seconds; then, or at a second signal, they are stopped and their attempts failed as
    WorkerStopped, so their retry policy hands them to another worker.
    """
    command_argv = list(argv or [])
    if module:
        if command_argv or workflow or activity or input_file:
            raise CliError(_BOTH, ExitCode.USAGE)
        _run_modules(cli, module, concurrency)
        return
    if not command_argv:
        raise CliError("nothing to run: give --module M (python activities), or "
                       "--workflow NAME -- COMMAND ARGS (any language)", ExitCode.USAGE)
    if not workflow:
        raise CliError(f"which workflow's activities should {command_argv[0]!r} run? "
                       "add --workflow NAME (and --activity NAME to narrow it)",
                       ExitCode.USAGE)
    cli.actor = "worker"
    wb = cli.wb
    loop = CommandWorker(wb.engine, command_argv, workflow_name=workflow,
                         activity_name=activity, concurrency=concurrency or 1,
                         input_file=input_file, table_prefix=wb.table_prefix,
                         endpoint_url=wb.endpoint_url, poll_max=poll_max,
                         stop_grace_seconds=stop_grace, kill_grace_seconds=kill_grace)
    what = f"{workflow}/{activity}" if activity else workflow
    cli.note(f"whimbrel worker: running {command_argv[0]} for {what}, "
             f"{loop.concurrency} at a time; SIGTERM or Ctrl-C stops (a second one hands "
             "back what still runs)")
    stats = loop.run(handle_signals=True)
    summary = {"claimed": stats.claimed, "completed": stats.completed,
               "failed": stats.failed, "handed_back": stats.handed_back}
    cli.emit(summary, lambda: cli.note(
        "whimbrel worker: stopped; " + ", ".join(f"{v} {k.replace('_', ' ')}"
                                                  for k, v in summary.items())))


def _run_modules(cli: Cli, modules: list[str], concurrency: int | None) -> None:
    """``Whimbrel.run_worker(modules=[...], concurrency=N)``: blocks until SIGTERM/SIGINT
    or stop()."""
    cli.actor = "worker"
    cli.worker = True  # the one command whose client is a worker (for those modules)
    wb = cli.wb
    # A console script's sys.path starts at its own folder, not the current one: import
    # the modules from where the worker was started, as `python -m` would (and celery,
    # rq... do), then PYTHONPATH.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    cli.note(f"whimbrel worker: running the python activities of {', '.join(modules)}; "
             "SIGTERM or Ctrl-C stops")
    try:
        wb.run_worker(modules=list(modules), concurrency=concurrency)
    finally:
        wb.close()  # hands back what it claimed and never started
