"""The Typer application, the options every command shares, and the exit codes.

Every command is declared through :func:`command`, which adds ``--endpoint-url``,
``--table-prefix``, ``--json`` and ``--debug``, builds the :class:`Cli` handed to the
command, turns errors into one line on stderr with a documented exit code, and, when
this process launched ``python``/``command`` activities, stays until they are done.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from enum import IntEnum
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from botocore.exceptions import BotoCoreError
from rich.console import Console
from rich.text import Text

# Typer ships its own copy of Click; its parser raises these (not click's) classes.
from typer._click.core import Command, Context, Parameter, ParameterSource
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer._click.globals import get_current_context
from typer.core import TyperCommand, TyperGroup

from whimbrel.client.whimbrel import Whimbrel
from whimbrel.contract.errors import (
    IllegalTransition,
    InvalidDefinition,
    InvalidInput,
    NotAllowedNow,
    NotFound,
    StateConflict,
    StoreError,
    WhimbrelError,
)
from whimbrel.local.credentials import supply_local_credentials
from whimbrel.settings import ENV_ENDPOINT_URL, ENV_TABLE_PREFIX


class ExitCode(IntEnum):
    """Exit codes of every command (docs/cli.md, "Exit codes")."""

    OK = 0
    ERROR = 1  #: unexpected error (a bug): rerun with --debug for the traceback
    USAGE = 2  #: bad option or argument (Click's own code)
    NOT_FOUND = 3  #: no such workflow, activity or definition
    INVALID = 4  #: invalid input, definition or file
    CONFLICT = 5  #: the current state does not allow the operation
    STORE = 6  #: DynamoDB/AWS refused or failed (missing tables, no endpoint, throttling)
    UNAVAILABLE = 7  #: an optional part is missing (Graphviz, the dev runtime, ...)
    WORKFLOW_FAILED = 10  #: the awaited workflow ended FAILED
    WORKFLOW_CANCELLED = 11  #: the awaited workflow ended CANCELLED
    WAIT_TIMEOUT = 12  #: gave up waiting (--timeout) while the workflow still runs
    EXEC_ERROR = 125  #: `whimbrel exec` itself failed (the child did not run or finish)


class CliError(Exception):
    """A failure the CLI reports as one line with ``code``."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.code = code


def exit_code_for(exc: BaseException) -> ExitCode:
    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, NotFound):
        return ExitCode.NOT_FOUND
    if isinstance(exc, InvalidDefinition | InvalidInput):
        return ExitCode.INVALID
    if isinstance(exc, StateConflict | IllegalTransition | NotAllowedNow):
        return ExitCode.CONFLICT
    if isinstance(exc, StoreError | BotoCoreError):
        return ExitCode.STORE
    if isinstance(exc, WhimbrelError):
        return ExitCode.ERROR
    return ExitCode.ERROR


# -- shared options ----------------------------------------------------------------------

EndpointOpt = Annotated[str | None, typer.Option(
    "--endpoint-url", envvar=ENV_ENDPOINT_URL, show_envvar=True,
    help="DynamoDB endpoint (e.g. http://localhost:8000); unset means AWS.")]
PrefixOpt = Annotated[str | None, typer.Option(
    "--table-prefix", envvar=ENV_TABLE_PREFIX, show_envvar=True,
    help="Prefix of every table name (default whimbrel_).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")]
#: Bounds of every --version option; the upper one keeps a typo from reaching DynamoDB
#: (which refuses numbers of more than 38 digits).
VERSION_RANGE: dict[str, int] = {"min": 1, "max": 2**31 - 1}

_COMMON = ("endpoint_url", "table_prefix", "json_output", "debug")
_URL = re.compile(r"^https?://[^\s/?#]+(/\S*)?$")
_PREFIX = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


class TrackingExecutor(Executor):
    """Wraps the executor of in-process launchers to know when their work is done.

    A follow-up launch is submitted from inside a running task, before that task ends,
    so the count only reaches zero when no in-process activity of this process remains.
    """

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.launched = 0
        self._running = 0
        self._cond = threading.Condition()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._cond:
            self._running += 1
            self.launched += 1

        def run() -> Any:
            try:
                return fn(*args, **kwargs)
            finally:
                with self._cond:
                    self._running -= 1
                    self._cond.notify_all()

        try:
            return self.inner.submit(run)
        except BaseException:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()
            raise

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._running == 0, timeout)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.inner.shutdown(wait=wait, cancel_futures=cancel_futures)


class Cli:
    """What a command gets: settings, the console and a lazily built client."""

    def __init__(self, *, endpoint_url: str | None, table_prefix: str | None,
                 json_output: bool, debug: bool, endpoint_from_env: bool = False) -> None:
        self.endpoint_url = endpoint_url or None
        #: The endpoint came from WHIMBREL_ENDPOINT_URL, not from --endpoint-url.
        self.endpoint_from_env = endpoint_from_env
        self.table_prefix = table_prefix or None
        self.json = json_output
        self.debug = debug
        # Piped output is for reading later or for grep: do not cut it at 80 columns.
        wide = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200
        # emoji=False: ids like "…:smile:1" must print as written, not as "…😄1".
        self.out = Console(highlight=False, soft_wrap=False, width=wide, emoji=False)
        self.err = Console(stderr=True, highlight=False, emoji=False)
        self._wb: Whimbrel | None = None
        self.tracker: TrackingExecutor | None = None
        #: Who the client's writes name in histories (``by``); set before using ``wb``.
        self.actor = "cli"
        #: A one-shot command is never a worker (docs/contract.md, "Who runs code"): its
        #: client runs no python activity, it leaves them for a worker. Only a command
        #: asked to (``submit --run-here``, ``worker``) sets this before using ``wb``.
        self.worker = False

    @property
    def wb(self) -> Whimbrel:
        if self._wb is None:
            self.check_settings()
            overrides: dict[str, Any] = {}
            if self.endpoint_url:
                overrides["endpoint_url"] = self.endpoint_url
            if self.table_prefix:
                overrides["table_prefix"] = self.table_prefix
            # A newcomer's laptop has no AWS credentials, and DynamoDB Local needs none
            # that are real (never supplied for any other endpoint).
            supply_local_credentials(self.endpoint_url or os.environ.get(ENV_ENDPOINT_URL))
            self.tracker = TrackingExecutor(ThreadPoolExecutor(
                max_workers=16, thread_name_prefix="whimbrel-activity"))
            self._wb = Whimbrel.from_env(actor=self.actor, executor=self.tracker, **overrides)
            if not self.worker:
                self._wb.worker_scope.close()
        return self._wb

    def check_settings(self) -> None:
        """Refuse settings boto3 would fail on with an obscure error (exit code 2)."""
        url = self.endpoint_url or os.environ.get(ENV_ENDPOINT_URL)
        if url and not _URL.match(url):
            raise CliError(f"--endpoint-url {url!r} is not an http(s):// URL", ExitCode.USAGE)
        prefix = self.table_prefix or os.environ.get(ENV_TABLE_PREFIX)
        if prefix and not _PREFIX.match(prefix):
            raise CliError(f"--table-prefix {prefix!r} may only hold the letters a-z A-Z, "
                           "digits, '_', '-' and '.', at most 200 of them", ExitCode.USAGE)

    @property
    def interactive(self) -> bool:
        return not self.json and self.out.is_terminal

    def emit(self, data: Any, human: Callable[[], None] | None = None) -> None:
        """Print ``data`` as JSON in ``--json`` mode, else call ``human``."""
        if self.json or human is None:
            typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
        else:
            human()

    def note(self, message: str) -> None:
        """A remark on stderr (never mixed into --json output on stdout)."""
        self.err.print(message, style="dim", markup=False)

    def finish(self) -> None:
        """Stay until activities this process launched are done, then release the client."""
        if self._wb is None:
            return
        tracker = self.tracker
        if tracker is not None and tracker.launched and not tracker.wait_idle(0):
            self.note("waiting for the python/command activities this process runs "
                      "(Ctrl-C leaves them to time out)")
            tracker.wait_idle()
        self._wb.close()
        self._wb = None


def _wants_json(args: Sequence[str]) -> bool:
    """``--json`` among the options (not in the argv of ``exec -- CMD``)."""
    head = list(args)
    return "--json" in (head[:head.index("--")] if "--" in head else head)


def _json_usage_error(exc: UsageError) -> NoReturn:
    """A usage error as the one JSON object ``--json`` promises on stderr (exit code 2)."""
    body: dict[str, Any] = {"error": "UsageError", "message": exc.format_message(),
                            "exit_code": int(ExitCode.USAGE)}
    if exc.ctx is not None:
        body["usage"] = exc.ctx.get_usage()
    typer.echo(json.dumps(body), err=True)
    raise typer.Exit(int(ExitCode.USAGE))


def _usage_error(exc: UsageError) -> NoReturn:
    """A usage error in the style of every other error: what was wrong on one line, then
    the usage and where to read more (exit code 2)."""
    err = Console(stderr=True, highlight=False, emoji=False)
    err.print(Text.assemble(("error:", "bold red"), " ", exc.format_message()))
    if exc.ctx is not None:
        err.print(exc.ctx.get_usage(), markup=False)
        helps = exc.ctx.help_option_names or ["--help"]
        err.print(f"Run '{exc.ctx.command_path} {helps[0]}' for its options and an example.",
                  markup=False)
    raise typer.Exit(int(ExitCode.USAGE))


def _reported_usage_error(exc: UsageError, wants_json: bool) -> None:
    """Report ``exc`` (as JSON with ``--json``) and exit; return only for the help a
    bare group shows (no_args_is_help), which Typer prints."""
    if isinstance(exc, NoArgsIsHelpError):
        return
    if wants_json:
        _json_usage_error(exc)
    _usage_error(exc)


def _json_usage_errors(make: Callable[[], Context], args: list[str]) -> Context:
    """Run ``make``; a usage error is reported as every error is (one JSON error object
    when ``--json`` is on)."""
    wants = _wants_json(args)
    try:
        return make()
    except UsageError as exc:
        _reported_usage_error(exc, wants)
        raise


def _no_flag_metavars(params: list[Parameter]) -> list[Parameter]:
    """Flags take no value: Typer's help would show ``<bool>`` for each; show nothing."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class JsonErrorsCommand(TyperCommand):
    """A command whose usage errors honour ``--json`` like every other error."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        return _no_flag_metavars(super().get_params(ctx))

    def make_context(self, info_name: str | None, args: list[str],
                     parent: Context | None = None, **extra: Any) -> Context:
        make = super().make_context
        return _json_usage_errors(lambda: make(info_name, args, parent=parent, **extra), args)


class JsonErrorsGroup(TyperGroup):
    """The same for command groups (unknown or missing command)."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        return _no_flag_metavars(super().get_params(ctx))

    def make_context(self, info_name: str | None, args: list[str],
                     parent: Context | None = None, **extra: Any) -> Context:
        make = super().make_context
        return _json_usage_errors(lambda: make(info_name, args, parent=parent, **extra), args)

    def resolve_command(self, ctx: Context, args: list[str]
                        ) -> tuple[str | None, Command | None, list[str]]:
        wants = _wants_json(args)
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            _reported_usage_error(exc, wants)
            raise


app = typer.Typer(
    name="whimbrel",
    cls=JsonErrorsGroup,
    help="Whimbrel: a serverless workflow engine on DynamoDB.\n\n"
         "Example: whimbrel submit etl --input '{\"day\": \"2024-06-01\"}' --wait",
    no_args_is_help=True,
    # Typer's --install-completion / --show-completion (bash, zsh, fish, PowerShell):
    # docs/cli.md, "Shell completion".
    add_completion=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def installed_version() -> str:
    """The version of the installed ``whimbrel`` distribution."""
    try:
        return importlib.metadata.version("whimbrel")
    except importlib.metadata.PackageNotFoundError:  # imported from a bare source tree
        return "unknown (not installed)"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"whimbrel {installed_version()}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", callback=_show_version, is_eager=True,
        help="Print the installed version and exit.")] = False) -> None:
    # Options of the whimbrel command itself (before the subcommand); the help text is
    # the app's.
    pass

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def reported(cli: Cli) -> Iterator[None]:
    """Turn an exception into one line on stderr and an exit code."""
    try:
        yield
    except (typer.Exit, typer.Abort, ClickException):
        raise
    except KeyboardInterrupt:
        cli.err.print("interrupted")
        raise typer.Exit(130) from None
    except Exception as exc:
        code = exit_code_for(exc)
        if cli.debug:
            cli.err.print_exception(show_locals=False)
        message = str(exc).strip() or type(exc).__name__
        first, *rest = message.splitlines()
        if isinstance(exc, InvalidDefinition):
            first = f"invalid workflow definition {exc.workflow_name!r}"
            rest = [f"  - {p}" for p in exc.problems]
        elif code is ExitCode.ERROR and not isinstance(exc, WhimbrelError | CliError):
            first = f"{type(exc).__name__}: {first} (rerun with --debug for the traceback)"
            rest = []
        if cli.json:
            body = exc.to_dict() if isinstance(exc, WhimbrelError) else {
                "error": type(exc).__name__, "message": message}
            typer.echo(json.dumps({**body, "exit_code": int(code)}, default=str), err=True)
        else:
            # The message may quote user input ("[/x]"): never read it as markup.
            cli.err.print(Text.assemble(("error:", "bold red"), " ", first), highlight=False)
            for line in rest[:20]:
                cli.err.print(line, markup=False, highlight=False)
        raise typer.Exit(int(code)) from None


def command(group: typer.Typer, name: str, *, example: str, callback: bool = False,
            **settings: Any) -> Callable[[F], F]:
    """Register ``fn(cli, ...)`` as ``name`` on ``group`` with the shared options.

    ``example`` is appended to the help text, so every command shows one. ``callback``:
    ``fn`` is the group's own command instead (``whimbrel runs`` as well as ``whimbrel
    runs cancel``), run also before a subcommand (``get_current_context()
    .invoked_subcommand`` says which).
    """
    def deco(fn: F) -> F:
        sig = inspect.signature(fn, eval_str=True)
        own = list(sig.parameters.values())[1:]  # drop `cli`
        common = [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a)
            for n, d, a in (("endpoint_url", None, EndpointOpt),
                            ("table_prefix", None, PrefixOpt),
                            ("json_output", False, JsonOpt),
                            ("debug", False, DebugOpt))
        ]

        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> None:
            opts = {k: kwargs.pop(k) for k in _COMMON}
            ctx = get_current_context(silent=True)
            cli = Cli(**opts, endpoint_from_env=ctx is not None and ctx.get_parameter_source(
                "endpoint_url") is ParameterSource.ENVIRONMENT)
            try:
                with reported(cli):
                    fn(cli, **kwargs)
                    cli.finish()
            finally:
                if cli._wb is not None:
                    cli._wb.close()

        params = own + common
        setattr(wrapper, "__signature__", sig.replace(parameters=params))  # noqa: B010
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        del wrapper.__wrapped__
        paragraphs = inspect.cleandoc(fn.__doc__ or "").split("\n\n")
        doc = "\n\n".join(" ".join(p.split()) for p in paragraphs)
        help_text = f"{doc}\n\nExample:\n\n    {example}"
        if callback:
            group.callback(invoke_without_command=True, help=help_text, **settings)(wrapper)
        else:
            group.command(name, help=help_text, cls=JsonErrorsCommand, **settings)(wrapper)
        return fn

    return deco


def main() -> None:
    """Console entry point (``whimbrel``)."""
    app()
