"""``whimbrel ui``: the web console (docs/console.md)."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from whimbrel.cli.app import Cli, CliError, ExitCode, app, command

ENV_UI_TOKEN = "WHIMBREL_UI_TOKEN"


@command(app, "ui", example="whimbrel ui --port 8080")
def ui(
    cli: Cli,
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port to listen on.")
                    ] = 8080,
    host: Annotated[str, typer.Option(
        help="Interface to bind. Anything but loopback makes every page need the "
             "token, not only actions.")] = "127.0.0.1",
    refresh: Annotated[float, typer.Option(
        min=0.5, max=300, help="Seconds between two live refreshes of a page.")] = 2.0,
) -> None:
    """Serve the web console: runs (filters, counts by state, live), each run's DAG,
    activities and timeline, definitions and rejections, and actions (cancel, retry).

    It prints a URL with a token: open it to enable actions in that browser (the token
    is random per start, or WHIMBREL_UI_TOKEN). Reads are open on loopback; actions
    always need the token. Stop it with Ctrl-C.
    """
    try:
        from whimbrel.ui import ConsoleServer, create_app, is_loopback, new_token
    except ImportError as exc:
        raise CliError(f"the console needs the ui extra: pip install 'whimbrel[ui]' "
                       f"({exc})", ExitCode.UNAVAILABLE) from None
    token = os.environ.get(ENV_UI_TOKEN) or new_token()
    if len(token) < 16:
        raise CliError(f"{ENV_UI_TOKEN} must hold at least 16 characters", ExitCode.USAGE)
    loopback = is_loopback(host)
    allowed: tuple[str, ...] | None = ("localhost", "127.0.0.1", "::1") if loopback else (
        None if host in ("0.0.0.0", "::") else (host,))
    cli.actor = "console"
    wb = cli.wb
    wb.list_definitions()  # fail now, with the store's message, if the tables are missing
    server = ConsoleServer(create_app(wb, token=token, open_reads=loopback,
                                      allowed_hosts=allowed, refresh_seconds=refresh),
                           host=host, port=port)
    url = server.url
    info = {"url": f"{url}/", "sign_in_url": f"{url}/?token={token}",
            "endpoint_url": wb.endpoint_url, "table_prefix": wb.table_prefix,
            "reads_need_token": not loopback}

    def human() -> None:
        cli.out.print(f"Whimbrel console on {url}/  (DynamoDB {wb.endpoint_url or 'AWS'}, "
                      f"prefix {wb.table_prefix})", markup=False)
        cli.out.print("Open this URL to sign in; actions need it:", markup=False)
        cli.out.print(f"    {url}/?token={token}", markup=False, soft_wrap=True)
        if not loopback:
            cli.note(f"bound to {host}: every page needs the token; serve it behind TLS")

    cli.emit(info, human)
    sys.stdout.flush()  # the server runs until Ctrl-C: show the URL now, even in a pipe
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn shut down cleanly, then passed Ctrl-C on
        cli.note("console stopped")
