"""Local development: ``dev`` (DynamoDB Local runtime) and ``demo``."""

from __future__ import annotations

import importlib
import socket
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer

from whimbrel.cli.app import Cli, CliError, ExitCode, app, command
from whimbrel.local.credentials import is_local_endpoint, supply_local_credentials
from whimbrel.local.dev import import_dev_modules, run_dev
from whimbrel.local.dynamodb_local import LOOPBACK, DynamoDBLocalError, PortInUse
from whimbrel.local.runtime import DEV_PORT
from whimbrel.local.s3 import DEV_S3_PORT, S3PortInUse


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
    host: Annotated[str, typer.Option(
        "--host",
        help="Address the DynamoDB Local it starts listens on. The default lets only this "
             "machine in; 0.0.0.0 opens it to every network the machine is on, and anyone "
             "who reaches it can read every run and approve, signal or redrive with raw "
             "rows (see docs/operations.md).")] = LOOPBACK,
    events_file: Annotated[Path | None, typer.Option(
        "--events-file", dir_okay=False, resolve_path=True,
        help="Run the notify consumers and append every event (a run ended, an activity "
             "failed for good, a wait started) to this file as JSON lines; read them with "
             "`whimbrel notifications --follow`.")] = None,
    s3_port: Annotated[int | None, typer.Option(
        "--s3-port", min=0, max=65535, show_default=False,
        help=f"Port of the local S3 it serves for large payloads (moto's server, on "
             f"loopback; default {DEV_S3_PORT}, or any free port with --port; 0: any free "
             "port).")] = None,
    no_s3: Annotated[bool, typer.Option(
        "--no-s3", help="Serve no S3: payloads keep today's limits (128 KB inputs, 64 KB "
                        "outputs).")] = False,
    module: Annotated[list[str] | None, typer.Option(
        "--module", "-m", metavar="MODULE", show_default=False,
        help="Import this module (from the current folder or PYTHONPATH) before anything "
             "starts and register the code workflows (@workflow) it defines, so a request "
             "row can start them; repeatable. Dev runs any python code it can import "
             "either way.")] = None,
) -> None:
    """Run the serverless side locally until Ctrl-C: DynamoDB Local streams feed the real
    Lambda handlers, and the heartbeat listener sweeps on a schedule.

    Without --endpoint-url it starts DynamoDB Local on http://127.0.0.1:8000, reachable
    from this machine only (--port and --host to change; needs a Java 17+ JDK, and npm the
    first time). No AWS account is needed: without
    configured credentials, dummy ones are used for the local endpoint.
    """
    cli.check_settings()
    if events_file is not None:
        _check_writable(events_file)
    modules = import_dev_modules(module or [])
    endpoint = _dev_endpoint(cli, own_server=port is not None or data_dir is not None
                             or host != LOOPBACK)
    port = DEV_PORT if port is None else port
    supply_local_credentials(endpoint or f"http://127.0.0.1:{port}")
    if s3_port is None:
        # Beside dev's own DynamoDB Local on its default port: the stable one. Otherwise
        # (--port, --endpoint-url: another dev beside the default one) any free port.
        s3_port = DEV_S3_PORT if port == DEV_PORT and endpoint is None else 0
    try:
        run_dev(endpoint, cli.table_prefix or "whimbrel_", heartbeat_rate,
                port=port, data_dir=data_dir, events_file=events_file, host=host,
                s3_port=None if no_s3 else s3_port, modules=modules)
    except PortInUse as exc:
        raise CliError(f"{exc}; choose another with `whimbrel dev --port N`, or use the "
                       f"server already there with --endpoint-url http://127.0.0.1:{port}",
                       ExitCode.UNAVAILABLE) from None
    except (DynamoDBLocalError, S3PortInUse) as exc:
        raise CliError(str(exc), ExitCode.UNAVAILABLE) from None


def _check_writable(path: Path) -> None:
    """Refuse an events file dev could not append to, before anything starts.

    Raises:
        CliError: (USAGE) its folder is missing, or it cannot be opened for appending.
    """
    if not path.parent.is_dir():
        raise CliError(f"--events-file {str(path)!r}: folder {str(path.parent)!r} does not "
                       "exist", ExitCode.USAGE)
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise CliError(f"--events-file {str(path)!r}: {exc.strerror or exc}",
                       ExitCode.USAGE) from None


def _dev_endpoint(cli: Cli, *, own_server: bool) -> str | None:
    """The DynamoDB ``dev`` should use, None to start its own.

    The ``export`` lines dev prints end up in shells that later restart dev, so an
    endpoint from WHIMBREL_ENDPOINT_URL gives way to an explicit --port/--data-dir, and
    a local one where nothing listens gets a hint instead of a connection error.

    Raises:
        CliError: --endpoint-url together with --port/--data-dir (USAGE); a local
            endpoint from the environment that nothing answers on (STORE).
    """
    url = cli.endpoint_url
    if url is None:
        return None
    if own_server:
        if not cli.endpoint_from_env:
            raise CliError("--port, --host and --data-dir configure the DynamoDB Local that dev "
                           "starts; with --endpoint-url it uses that server instead",
                           ExitCode.USAGE)
        cli.note(f"ignoring WHIMBREL_ENDPOINT_URL={url}: --port/--host/--data-dir start dev's "
                 "own DynamoDB Local")
        return None
    if cli.endpoint_from_env and is_local_endpoint(url) and not _answers(url):
        raise CliError(f"nothing answers at {url} (WHIMBREL_ENDPOINT_URL): unset it to let "
                       f"dev start DynamoDB Local itself (on port {DEV_PORT}, or --port N)",
                       ExitCode.STORE)
    return url


def _answers(url: str) -> bool:
    """Whether something accepts a TCP connection at ``url``'s host and port."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port out of range: let the connection attempt report it
        return True
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=2):
            return True
    except OSError:
        return False


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
