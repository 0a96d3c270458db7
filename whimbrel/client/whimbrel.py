"""``Whimbrel``: the public facade over the engine, the store and the launchers."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

from whimbrel.client import query, simple
from whimbrel.client.query import DefinitionVersion, WorkflowPage
from whimbrel.contract import checks
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.states import Transition
from whimbrel.engine.engine import Engine
from whimbrel.engine.manual import retry_activity
from whimbrel.engine.ports import Clock, Launcher, LaunchRequest
from whimbrel.engine.sweep import SweepReport, sweep
from whimbrel.engine.views import ActivityExec, WorkflowExec
from whimbrel.launch.command import CommandLauncher
from whimbrel.launch.python import PythonLauncher
from whimbrel.settings import (
    DEFAULT_RETENTION_DAYS,
    DEFAULT_TABLE_PREFIX,
    Settings,
    parse_retention_days,
)
from whimbrel.store.meter import CapacityMeter
from whimbrel.store.store import Store
from whimbrel.worker.command import run_command
from whimbrel.worker.run import ActivityRun, heartbeat, run_activity

#: ``watch()`` lists the activities at most this often (it polls the workflow item).
WATCH_ACTIVITIES_SECONDS = 1.0


class Whimbrel:
    """Entry point of the Full Logic API (and, through the same store, everything else).

    Args:
        endpoint_url: DynamoDB endpoint; None means real AWS.
        table_prefix: prefix of every table name.
        region: AWS region (default from ``AWS_REGION`` / ``AWS_DEFAULT_REGION``).
        clock: returns epoch seconds; inject one to drive time in tests.
        launchers: extra or replacement launchers by kind (``lambda``, ``sqs``, …).
        max_workers: threads for ``python`` and ``command`` activities of this process.
        retention_days: how long ended runs are kept when their definition does not say
            (None: forever).
    """

    def __init__(
        self,
        endpoint_url: str | None = None,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        region: str | None = None,
        clock: Clock | None = None,
        *,
        launchers: Mapping[str, Launcher] | None = None,
        max_workers: int = 16,
        actor: str = "client",
        retention_days: float | None = DEFAULT_RETENTION_DAYS,
    ) -> None:
        region = region or Settings.from_env().region
        if retention_days is not None:
            retention_days = parse_retention_days(retention_days, "retention_days")
        self.clock: Clock = clock or time.time
        self.store = Store(table_prefix=table_prefix, endpoint_url=endpoint_url, region=region)
        self.executor = ThreadPoolExecutor(max_workers=max_workers,
                                           thread_name_prefix="whimbrel-activity")
        all_launchers: dict[str, Launcher] = {
            "python": PythonLauncher(self.executor, self._run_python),
            "command": CommandLauncher(self.executor, self._run_command),
        }
        all_launchers.update(launchers or {})
        self.engine = Engine(self.store, clock=self.clock, launchers=all_launchers, actor=actor,
                             retention_days=retention_days)

    @classmethod
    def from_env(cls, **overrides: Any) -> Whimbrel:
        """Configure from ``WHIMBREL_ENDPOINT_URL`` (unset: real AWS),
        ``WHIMBREL_TABLE_PREFIX`` (default ``whimbrel_``), ``WHIMBREL_RETENTION_DAYS``
        (a number, or ``none`` to keep ended runs forever) and the AWS region variables.

        Raises:
            InvalidInput: a malformed setting.
        """
        settings = Settings.from_env()
        kwargs: dict[str, Any] = {
            "endpoint_url": settings.endpoint_url,
            "table_prefix": settings.table_prefix,
            "region": settings.region,
            "retention_days": settings.retention_days,
        }
        kwargs.update(overrides)
        return cls(**kwargs)

    # -- setup ------------------------------------------------------------------------

    @property
    def table_prefix(self) -> str:
        return self.store.table_prefix

    @property
    def endpoint_url(self) -> str | None:
        return self.store.endpoint_url

    @property
    def meter(self) -> CapacityMeter:
        """Read/write units this client consumed, counted by AWS's billing rules."""
        return self.store.meter

    def create_tables(self) -> list[str]:
        """Create any missing table (idempotent); returns the names created."""
        return self.store.create_tables()

    def register_workflow(self, definition: WorkflowDefinition) -> int:
        """Validate and store ``definition``; returns its version (unchanged if equal
        to the latest).

        Raises:
            InvalidDefinition: listing every problem.
        """
        return self.engine.register(definition)

    def get_definition(self, name: str, version: int | None = None) -> WorkflowDefinition:
        return self.engine.definition(name, version)[1]

    def list_definitions(self, name: str | None = None) -> list[DefinitionVersion]:
        """Registered definition versions (of ``name``, or of every workflow), by name
        and newest version first. Without ``name`` it reads the whole definition table:
        an operator listing, never on a run's path.

        Raises:
            InvalidInput: ``name`` is not a workflow name.
        """
        return query.list_definitions(self.store, name)

    # -- Full Logic API -----------------------------------------------------------------

    def start_workflow(self, name: str, input: Any = None, *, version: int | None = None,
                       request_id: str | None = None, source: str | None = None) -> str:
        """Start a workflow in-process; returns its ``workflow_exec_id``.

        The same ``request_id`` always yields the same single execution. A request row
        with ``manual = true`` is written for tracing.

        Raises:
            DefinitionNotFound: unknown name or version.
            InvalidInput: input not JSON or too large.
        """
        return self.engine.start(name, input, version=version, request_id=request_id,
                                 source=source)

    # -- Simple Lambda API (one item; the stream-triggered Lambdas run the logic) ------

    def request_workflow(self, name: str, input: Any = None, *, version: int | None = None,
                         source: str | None = None, request_id: str | None = None) -> str:
        """Write one ``workflow_request`` item; returns its ``workflow_request_id``.

        The execution id is ``whimbrel.contract.ids.workflow_exec_id_for(request_id)``.
        The same ``request_id`` always stands for the same single run (default: a new
        UUID). The definition must be registered: the Lambda would only reject the item.

        Raises:
            DefinitionNotFound: no registered workflow ``name`` (at ``version``).
            InvalidInput: empty name, bad version or request id, input not JSON / too
                large, or ``request_id`` already used for another workflow.
        """
        return simple.request_workflow(self.store, self.clock, name, input, version=version,
                                       source=source, request_id=request_id,
                                       require_definition=self.engine.definition)

    def send_activity_event(self, activity_exec_id: str, transition: Transition | str, *,
                            output: Any = None, error: Any = None) -> str:
        """Write one ``activity_event`` item; returns its ``activity_event_id``.

        Raises:
            InvalidInput: malformed id, unknown transition, or output not JSON / too large.
        """
        return simple.send_activity_event(self.store, self.clock, activity_exec_id,
                                          transition, output=output, error=error)

    def list_rejections(self, day: str | None = None, *,
                        limit: int | None = 100) -> list[simple.Rejection]:
        """Stream records rejected on ``day`` (UTC ``YYYY-MM-DD``, default today)."""
        return simple.list_rejections(self.store, day, limit=limit, clock=self.clock)

    def get_workflow(self, workflow_exec_id: str) -> WorkflowExec:
        """The execution with every attempt of its activities.

        Raises:
            WorkflowNotFound: no such execution.
        """
        return self.engine.get_workflow(workflow_exec_id)

    def get_activity(self, activity_exec_id: str) -> ActivityExec:
        return self.engine.get_activity(activity_exec_id)

    def transition_activity(self, activity_exec_id: str, transition: Transition | str, *,
                            output: Any = None, error: Any = None) -> ActivityExec:
        """Apply a contract move to an activity and run its follow-ups.

        Raises:
            IllegalTransition: the contract forbids the move.
            StateConflict: the activity is no longer in the state the move needs.
        """
        return self.engine.transition(activity_exec_id, Transition(transition),
                                      output=output, error=error)

    def heartbeat(self, activity_exec_id: str) -> None:
        """Report that a running activity is alive.

        Raises:
            ActivityCancelled: the activity was cancelled; stop work.
            ActivityTimedOut: the system gave up on it.
        """
        heartbeat(self.engine, activity_exec_id)

    def claim(self, *, workflow_name: str | None = None,
              activity_name: str | None = None) -> ActivityExec | None:
        """Take one READY ``external`` activity (READY -> RUNNING), or None if none waits
        in a RUNNING workflow.

        The candidates come from a sparse index (eventually consistent); the move itself
        is conditional, so two workers never claim the same activity.

        Raises:
            InvalidInput: a malformed name.
        """
        if workflow_name is not None:
            checks.workflow_name(workflow_name)
        if activity_name is not None:
            checks.text(activity_name, "activity_name", max_chars=64)
        claimed = self.engine.claim(workflow_name, activity_name)
        return ActivityExec.from_record(claimed) if claimed is not None else None

    def list_workflows(self, *, name: str | None = None, state: query.StateArg = None,
                       since: query.TimeArg = None, until: query.TimeArg = None,
                       limit: int = 50, cursor: str | None = None) -> WorkflowPage:
        """One page of runs, newest first (ties by execution id), without activities.

        Reads indexes with Query only (never Scan): a page costs about ``limit`` index
        entries per partition queried plus one BatchGetItem of the page, however many
        runs are stored (docs/architecture.md, "Listing runs").

        Args:
            name: only runs of this workflow.
            state: one ``WorkflowState`` (or its name) or a collection of them.
            since: only runs created at or after this time: epoch seconds, an aware
                datetime, or text — an ISO date/time (UTC unless it names a zone) or an
                age such as ``"2h"``/``"7d"``, counted from when the first page was read
                (so every page of one listing has the same window). Without it, a
                listing with neither ``name`` nor ``state`` looks back
                ``DEFAULT_LOOKBACK_DAYS`` (30) UTC days from ``until``/now.
            until: only runs created before this time (same forms).
            limit: page size, 1 to 1000.
            cursor: the ``cursor`` of the previous page, with the same filters.

        Returns:
            The page; its ``cursor`` is None on the last page.

        Raises:
            InvalidInput: a bad filter, limit or cursor; ``field`` names it.
        """
        return query.list_workflows(self.store, self.clock, name=name, state=state,
                                    since=since, until=until, limit=limit, cursor=cursor)

    def count_workflows(self, *, name: str | None = None, state: query.StateArg = None,
                        since: query.TimeArg = None, until: query.TimeArg = None,
                        cap: int = 1000) -> int:
        """How many runs match the filters of :meth:`list_workflows`, counting at most
        ``cap`` (1 to 1000): a result equal to ``cap`` means "``cap`` or more". Reads
        index keys only.

        Raises:
            InvalidInput: a bad filter or cap.
        """
        return query.count_workflows(self.store, self.clock, name=name, state=state,
                                     since=since, until=until, cap=cap)

    def retry_activity(self, activity_exec_id: str) -> ActivityExec:
        """Run a FAILED or TIMED_OUT attempt again, as attempt n + 1, while its workflow
        is RUNNING (a retry waiting for its back-off is launched now instead).

        Returns:
            The new attempt as it is after its launch.

        Raises:
            InvalidInput: not an activity execution id.
            ActivityNotFound: no such attempt.
            RetryNotAllowed: the attempt is not FAILED/TIMED_OUT, a newer attempt
                started, or the workflow is no longer RUNNING (the message says why).
        """
        return retry_activity(self.engine, activity_exec_id, actor=self.engine.actor)

    def cancel_workflow(self, workflow_exec_id: str) -> None:
        """Cancel a workflow: nothing new starts, running activities are asked to stop.

        Raises:
            WorkflowNotFound: no such execution.
        """
        self.engine.cancel(workflow_exec_id)

    def sweep(self, now: float | None = None) -> SweepReport:
        """One pass of the heartbeat listener and reconciler.

        Raises:
            InvalidInput: ``now`` is not a number.
        """
        return sweep(self.engine, checks.epoch(now))

    def run_activity(self, activity_exec_id: str) -> AbstractContextManager[ActivityRun]:
        """Context manager for activity code; see :func:`whimbrel.worker.run_activity`."""
        return run_activity(self.engine, activity_exec_id)

    def wait(self, workflow_exec_id: str, timeout: float = 60.0,
             poll_seconds: float = 0.05) -> WorkflowExec:
        """Poll the workflow item until the run is terminal (or ``timeout`` passes), then
        return it with its activities. Each poll reads the one workflow item.

        Raises:
            TimeoutError: still not finished at the deadline.
            WorkflowNotFound: no such execution.
        """
        deadline = time.monotonic() + timeout
        while True:
            wf = self.engine.workflow(workflow_exec_id)
            if wf.state.is_terminal:
                return self.engine.get_workflow(workflow_exec_id)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"workflow {workflow_exec_id} still {wf.state.value} "
                                   f"after {timeout} s")
            time.sleep(poll_seconds)

    def watch(self, workflow_exec_id: str, poll_seconds: float = 0.1,
              timeout: float = 300.0) -> Iterator[WorkflowExec]:
        """Yield the execution each time something in it changes, until it ends.

        Each poll reads the workflow item; the activities are listed when it changed and
        otherwise at most every second (a change of an activity alone shows up within
        a second).
        """
        deadline = time.monotonic() + timeout
        last: tuple[Any, ...] | None = None
        listed = 0.0
        item_seen: tuple[Any, ...] | None = None
        while time.monotonic() < deadline:
            item = self.engine.workflow(workflow_exec_id)
            item_sig = (item.state, item.updated_epoch)
            now = time.monotonic()
            if item_sig != item_seen or item.state.is_terminal \
                    or now - listed >= WATCH_ACTIVITIES_SECONDS:
                item_seen, listed = item_sig, now
                wf = self.engine.get_workflow(workflow_exec_id)
                sig = (wf.state, tuple((a.activity_exec_id, a.state) for a in wf.activities))
                if sig != last:
                    last = sig
                    yield wf
                if wf.state.is_terminal:
                    return
            time.sleep(poll_seconds)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=False)
        self.engine.close()

    def __enter__(self) -> Whimbrel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- launcher plumbing ----------------------------------------------------------------

    def _run_python(self, request: LaunchRequest, func: Callable[..., Any]) -> None:
        with run_activity(self.engine, request.activity_exec_id) as act:
            result = func(act)
            if result is not None:
                act.output = result

    def _run_command(self, request: LaunchRequest, argv: list[str]) -> int:
        return run_command(self.engine, request.activity_exec_id, argv,
                           env=request.environment())
