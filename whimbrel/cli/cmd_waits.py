"""Waits: ``signal``, ``approve``, ``reject``, ``suspend``, ``resume``."""

from __future__ import annotations

import uuid
from typing import Annotated

import typer

from whimbrel import ActivityExec
from whimbrel.cli.app import Cli, app, command
from whimbrel.cli.options import parse_input
from whimbrel.cli.shapes import activity_dict

ByOpt = Annotated[str, typer.Option("--by", help="Who decides (recorded in the output or "
                                                 "the error).", show_default=False)]
CommentOpt = Annotated[str, typer.Option("--comment", "-m", help="Why.")]


@command(app, "signal", example="whimbrel signal 3f1c…e2 paid --payload '{\"eur\": 12}'")
def signal(
    cli: Cli,
    workflow_exec_id: Annotated[str, typer.Argument(help="The run's workflow_exec_id.")],
    name: Annotated[str, typer.Argument(help="The signal's name (what the wait waits for).")],
    payload: Annotated[str | None, typer.Option(
        "--payload", "-p", help="JSON payload, @file.json, or @- for stdin; it becomes "
                                "the waiting activity's output.")] = None,
    signal_id: Annotated[str | None, typer.Option(
        "--signal-id", help="Idempotency key: the same id sent again counts once "
                            "(default: a new one).")] = None,
) -> None:
    """Send a signal to a run: the activity waiting for NAME completes with the payload.

    A signal sent before its activity waits is kept until it does ("kept" in the output).
    A name no activity of the run waits for is invalid input (exit code 4); a run that
    has ended, or whose waits for NAME have all received one, refuses it (exit code 5).
    """
    data = parse_input(payload, "--payload")
    sid = signal_id if signal_id is not None else str(uuid.uuid4())
    cli.wb.signal(workflow_exec_id, name, data, signal_id=sid)
    wf = cli.wb.get_workflow(workflow_exec_id)
    received = next((a for a in wf.activities if any(h.by == f"signal:{sid}"
                                                     for h in a.history)), None)
    out = {"workflow_exec_id": workflow_exec_id, "signal": name, "signal_id": sid,
           "received_by": received.activity_exec_id if received else None,
           "kept": received is None}

    def human() -> None:
        if received is not None:
            cli.out.print(f"{received.activity_exec_id} {received.state.value}")
        else:
            cli.out.print(f"kept: no activity waits for {name!r} yet; the first that does "
                          "receives it")

    cli.emit(out, human)


#: The attempt a decision is about.
DecidedArg = Annotated[str, typer.Argument(
    help="The attempt waiting for approval, <workflow_exec_id>:<activity>:<attempt>.")]


def _decided(cli: Cli, act: ActivityExec) -> None:
    error = f": {act.error}" if act.error else ""
    cli.emit(activity_dict(act, latest=True, now=cli.wb.clock()),
             lambda: cli.out.print(f"{act.activity_exec_id} {act.state.value}{error}"))


@command(app, "approve", example="whimbrel approve 3f1c…e2:review:1 --by alice -m 'ok'")
def approve(cli: Cli, activity_exec_id: DecidedArg, by: ByOpt, comment: CommentOpt = "") -> None:
    """Approve an activity waiting for approval: it completes and its dependents start.

    With approvers in its definition only they may decide (exit code 5 for anyone else,
    and for an approval already decided, timed out or not reached yet).
    """
    _decided(cli, cli.wb.approve(activity_exec_id, by=by, comment=comment))


@command(app, "reject", example="whimbrel reject 3f1c…e2:review:1 --by bob -m 'no stock'")
def reject(cli: Cli, activity_exec_id: DecidedArg, by: ByOpt, comment: CommentOpt = "") -> None:
    """Reject an activity waiting for approval: it fails with an error naming who and
    why, and (a decision is not retried) the run fails.
    """
    _decided(cli, cli.wb.reject(activity_exec_id, by=by, comment=comment))


def _workflow_state(cli: Cli, workflow_exec_id: str) -> None:
    wf = cli.wb.get_workflow(workflow_exec_id)
    cli.emit({"workflow_exec_id": wf.workflow_exec_id, "state": wf.state.value},
             lambda: cli.out.print(f"{wf.workflow_exec_id} {wf.state.value}"))


@command(app, "suspend", example="whimbrel suspend 3f1c…e2")
def suspend(
    cli: Cli,
    workflow_exec_id: Annotated[str, typer.Argument(help="The run's workflow_exec_id.")],
) -> None:
    """Suspend a RUNNING run: nothing new starts or is claimed until `whimbrel resume`;
    running activities run to their end; signals and decisions are still received.

    Idempotent. A run that is neither RUNNING nor SUSPENDED refuses (exit code 5).
    """
    cli.wb.suspend_workflow(workflow_exec_id)
    _workflow_state(cli, workflow_exec_id)


@command(app, "resume", example="whimbrel resume 3f1c…e2")
def resume(
    cli: Cli,
    workflow_exec_id: Annotated[str, typer.Argument(help="The run's workflow_exec_id.")],
) -> None:
    """Resume a SUSPENDED run: what became due while it was suspended starts now.

    Idempotent. A run that is neither SUSPENDED nor RUNNING refuses (exit code 5).
    """
    cli.wb.resume_workflow(workflow_exec_id)
    _workflow_state(cli, workflow_exec_id)
