"""Local development: ``dev`` (DynamoDB Local runtime) and ``demo``."""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer

from whimbrel.cli.app import Cli, CliError, ExitCode, app, command


def _optional(module: str, attr: str, what: str) -> Any:
    """Import a part of Whimbrel that may not be installed in this build."""
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise CliError(f"{what} is not available in this installation ({module}.{attr}: "
                       f"{exc})", ExitCode.UNAVAILABLE) from None


@command(app, "dev", example="whimbrel dev --endpoint-url http://localhost:8000")
def dev(
    cli: Cli,
    heartbeat_rate: Annotated[float, typer.Option(
        "--heartbeat-rate", min=0.1,
        help="Seconds between two sweeps of the heartbeat listener.")] = 5.0,
) -> None:
    """Run the serverless side locally until Ctrl-C: DynamoDB Local streams feed the real
    Lambda handlers, and the heartbeat listener sweeps on a schedule.

    Without --endpoint-url a DynamoDB Local is started for you (needs Java and npm).
    """
    run_dev = _optional("whimbrel.local.runtime", "run_dev", "the local runtime")
    run_dev(cli.endpoint_url, cli.table_prefix or "whimbrel_", heartbeat_rate)


@command(app, "demo", example="whimbrel demo")
def demo(cli: Cli) -> None:
    """Run a small workflow end to end on a throw-away DynamoDB Local and show it."""
    main = _optional("whimbrel.demo", "main", "the demo")
    code = main()
    if isinstance(code, int) and code:
        raise typer.Exit(code)
