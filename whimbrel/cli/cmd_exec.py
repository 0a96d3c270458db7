"""``whimbrel exec -- CMD ARGS…``: wrap any command as an activity."""

from __future__ import annotations

import os
import signal
from typing import Annotated

import typer

from whimbrel.cli.app import Cli, CliError, ExitCode, app, command
from whimbrel.contract.states import ACTIVITY_STOPPING
from whimbrel.settings import ENV_ACTIVITY_EXEC_ID, activity_environment

#: Exit code when the activity was cancelled or timed out and the child was stopped
#: (128 + SIGTERM, what a shell reports for a terminated child).
STOPPED = 128 + int(signal.SIGTERM)
STOP_STATES = ACTIVITY_STOPPING


@command(app, "exec", example="WHIMBREL_ACTIVITY_EXEC_ID=… whimbrel exec -- ./load.sh --day 1",
         context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def exec_(
    cli: Cli,
    argv: Annotated[list[str], typer.Argument(
        metavar="CMD [ARGS]...", help="The command to run as the activity.")],
    activity_exec_id: Annotated[str | None, typer.Option(
        "--activity-exec-id", envvar=ENV_ACTIVITY_EXEC_ID, show_envvar=True,
        help="The activity execution to run as.")] = None,
    claim: Annotated[str | None, typer.Option(
        "--claim", metavar="WORKFLOW[/ACTIVITY]",
        help="Instead of an id: claim one READY external activity of this workflow "
             "(and activity); exit 0 quietly when none waits.")] = None,
    kill_grace: Annotated[float, typer.Option(
        min=0, help="Seconds between SIGTERM and SIGKILL when the activity must stop.")] = 5.0,
) -> None:
    """Run CMD as an activity: mark it RUNNING, heartbeat while CMD runs, record
    COMPLETED (exit code 0) or FAILED with the tail of stderr, and stop CMD (SIGTERM,
    then SIGKILL) when the activity is cancelled or timed out.

    The activity comes from WHIMBREL_ACTIVITY_EXEC_ID (set by Whimbrel's launchers) or
    --claim. CMD inherits the environment plus the WHIMBREL_* activity variables. The
    exit code is CMD's own; 143 when CMD was stopped; 125 when whimbrel could not run
    it as the activity (e.g. the activity is not runnable).
    """
    if not argv:
        raise CliError("no command given: whimbrel exec -- CMD [ARGS]...", ExitCode.USAGE)
    wb = cli.wb
    env: dict[str, str] = {}
    if claim:
        workflow, _, activity = claim.partition("/")
        act = wb.claim(workflow_name=workflow, activity_name=activity or None)
        if act is None:
            cli.emit({"activity_exec_id": None, "claimed": False},
                     lambda: cli.note(f"nothing READY to claim for {claim}"))
            return
        aeid = act.activity_exec_id
        env = activity_environment(
            activity_exec_id=aeid, activity_name=act.activity_name,
            workflow_exec_id=act.workflow_exec_id, workflow_name=act.workflow_name,
            table_prefix=wb.table_prefix, endpoint_url=wb.endpoint_url)
    elif activity_exec_id:
        aeid = activity_exec_id
        env = {ENV_ACTIVITY_EXEC_ID: aeid}
    else:
        raise CliError(f"no activity: set {ENV_ACTIVITY_EXEC_ID}, or pass "
                       "--activity-exec-id or --claim", ExitCode.USAGE)
    try:
        code = wb.run_command(aeid, argv, env={**os.environ, **env},
                              kill_grace_seconds=kill_grace)
    except FileNotFoundError as exc:
        raise CliError(f"cannot run {argv[0]!r}: {exc.strerror}", ExitCode.EXEC_ERROR) from exc
    except Exception as exc:  # reported as one line; 125 tells it apart from CMD's codes
        raise CliError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                       ExitCode.EXEC_ERROR) from exc
    state = wb.get_activity(aeid).state
    if state in STOP_STATES:
        # We stopped the child: report that, whatever run_command returned for it.
        code = STOPPED
    elif code < 0:  # killed by a signal from elsewhere: report it the way a shell does
        code = 128 - code
    cli.emit({"activity_exec_id": aeid, "exit_code": code, "state": state.value},
             lambda: cli.note(f"{aeid} {state} (exit code {code})"))
    if code:
        raise typer.Exit(code)
