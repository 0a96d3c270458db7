"""Waiting for a run: live refresh in a terminal, quiet polling elsewhere."""

from __future__ import annotations

import time
from collections.abc import Iterator

from rich.live import Live

from whimbrel import WorkflowExec
from whimbrel.cli.app import Cli, CliError, ExitCode
from whimbrel.cli.render import status_view
from whimbrel.contract.code.definition import CodeDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.states import WorkflowState


def definition_of(cli: Cli, name: str, version: int) -> WorkflowDefinition | None:
    """The definition a run started with, to show its activities in the DAG's order;
    None when it cannot be read, or for a code workflow, whose steps come as they ran
    (their specs are on their rows): the views then fall back on creation order."""
    try:
        defn = cli.wb.get_definition(name, version)
    except Exception:  # a display aid only: the run itself was read fine
        return None
    return None if isinstance(defn, CodeDefinition) else defn


def poll(cli: Cli, wx: str, *, interval: float,
         timeout: float | None) -> Iterator[WorkflowExec]:
    """Yield the run every ``interval`` seconds until it is terminal, last as
    ``Whimbrel.wait`` returns it (settled: what its end left unstarted is SKIPPED).

    Raises:
        CliError: (WAIT_TIMEOUT) still not terminal after ``timeout`` seconds.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        wf = cli.wb.get_workflow(wx)
        if wf.state.is_terminal:
            yield cli.wb.wait(wx)
            return
        yield wf
        if deadline is not None and time.monotonic() >= deadline:
            raise CliError(f"workflow {wx} is still {wf.state.value} after {timeout:g} s",
                           ExitCode.WAIT_TIMEOUT)
        time.sleep(interval)


def follow(cli: Cli, wx: str, defn: WorkflowDefinition | None, *, interval: float,
           timeout: float | None, view: str = "table") -> WorkflowExec:
    """Wait for the run to end, refreshing a live view when stdout is a terminal."""
    last: WorkflowExec | None = None
    if cli.interactive:
        with Live(console=cli.out, refresh_per_second=4, transient=False) as live:
            for wf in poll(cli, wx, interval=interval, timeout=timeout):
                live.update(status_view(wf, defn, cli.wb.clock(), view=view))
                last = wf
    else:
        for wf in poll(cli, wx, interval=interval, timeout=timeout):
            last = wf
    assert last is not None
    return last


def exit_for(state: WorkflowState) -> ExitCode:
    """The exit code of a command that waited for a run to end."""
    if state is WorkflowState.COMPLETED:
        return ExitCode.OK
    if state is WorkflowState.CANCELLED:
        return ExitCode.WORKFLOW_CANCELLED
    return ExitCode.WORKFLOW_FAILED
