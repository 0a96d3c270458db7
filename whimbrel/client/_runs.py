"""The runs side of the public facade: start, read, list, wait for and cancel runs, and
run the heartbeat listener by hand (mixed into :class:`whimbrel.Whimbrel`)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from whimbrel.client import query, simple
from whimbrel.client.query import WorkflowPage
from whimbrel.contract import checks
from whimbrel.contract.errors import WorkflowNotFound
from whimbrel.engine import (
    Clock,
    Engine,
    NudgeReport,
    SweepReport,
    WorkflowExec,
    WorkflowRequest,
    fork,
    nudge,
    sweep,
)
from whimbrel.store.store import Store

#: ``watch()`` lists the activities at most this often (it polls the workflow item).
WATCH_ACTIVITIES_SECONDS = 1.0
#: How long ``wait()`` lets the process that ended a run finish what follows the end (a
#: few writes right after the terminal one) before doing it itself.
SETTLE_SECONDS = 2.0


class Runs:
    """Runs: start, read, list, wait, cancel."""

    engine: Engine
    store: Store
    clock: Clock

    def start_workflow(self, name: str, input: Any = None, *, version: int | None = None,
                       request_id: str | None = None, source: str | None = None,
                       priority: int | None = None,
                       attributes: Mapping[str, Any] | None = None) -> str:
        """Start a workflow in-process; returns its ``workflow_exec_id``.

        The same ``request_id`` always yields the same single execution. A request row
        with ``manual = true`` is written for tracing. When ``max_running`` runs of the
        definition are RUNNING, the run is accepted QUEUED and starts when one ends.
        ``priority`` (0 first to 9; default 5) orders it among QUEUED runs, and its
        attempts among those waiting for a pool or a claim (each waits with its
        activity's ``priority`` shifted by ``priority - 5``, kept within 0-9).
        ``attributes`` (at most 10 names of short strings or numbers, e.g.
        ``{"customer": "c-17", "region": "eu"}``) are the run's own: it is listed by
        them (``list_workflows(attributes=...)``), its child runs carry them.

        Raises:
            DefinitionNotFound: unknown name or version.
            InvalidInput: input not JSON or too large; a priority that is not 0-9; bad
                attributes (more than 10, a bad name, a value that is not a short
                string or a number).
        """
        return self.engine.starting.start(name, input, version=version, request_id=request_id,
                                 source=source, priority=priority, attributes=attributes)

    def request_workflow(self, name: str, input: Any = None, *, version: int | None = None,
                         source: str | None = None, request_id: str | None = None,
                         priority: int | None = None,
                         attributes: Mapping[str, Any] | None = None) -> str:
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
                                       require_definition=self.engine.definitions.definition,
                                       priority=priority, attributes=attributes)

    def get_workflow(self, workflow_exec_id: str) -> WorkflowExec:
        """The execution with every attempt of its activities.

        Raises:
            WorkflowNotFound: no such execution.
        """
        return self.engine.reads.get_workflow(workflow_exec_id)

    def list_workflows(self, *, name: str | None = None, state: query.StateArg = None,
                       since: query.TimeArg = None, until: query.TimeArg = None,
                       limit: int = 50, cursor: str | None = None,
                       attributes: Mapping[str, Any] | None = None) -> WorkflowPage:
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
            attributes: only runs with every one of these attributes
                (``{"customer": "c-17"}``; a number matches the same number). Read
                from the ``by_attribute`` index of the first (by name), spread over 32
                shards; the name, states and other attributes are checked on the runs.
            limit: page size, 1 to 1000.
            cursor: the ``cursor`` of the previous page, with the same filters.

        Returns:
            The page; its ``cursor`` is None on the last page.

        Raises:
            InvalidInput: a bad filter, limit or cursor; ``field`` names it.
        """
        return query.list_workflows(self.store, self.clock, name=name, state=state,
                                    since=since, until=until, limit=limit, cursor=cursor,
                                    attributes=attributes)

    def count_workflows(self, *, name: str | None = None, state: query.StateArg = None,
                        since: query.TimeArg = None, until: query.TimeArg = None,
                        cap: int = 1000, attributes: Mapping[str, Any] | None = None) -> int:
        """How many runs match the filters of :meth:`list_workflows`, counting at most
        ``cap`` (1 to 1000): a result equal to ``cap`` means "``cap`` or more". Reads
        index keys only.

        Raises:
            InvalidInput: a bad filter or cap.
        """
        return query.count_workflows(self.store, self.clock, name=name, state=state,
                                     since=since, until=until, cap=cap,
                                     attributes=attributes)

    def cancel_workflow(self, workflow_exec_id: str) -> None:
        """Cancel a workflow: nothing new starts, running activities are asked to stop.
        Idempotent: a run that ended CANCELLED is cancelled again quietly. A code run's
        function then cleans up (its wait raises ``Cancelled``); a second cancel while
        it cleans up ends the run CANCELLED at once (docs/code-workflows.md).

        Raises:
            WorkflowNotFound: no such execution.
            WorkflowAlreadyEnded: it ended otherwise (COMPLETED, FAILED, TIMED_OUT):
                nothing to cancel.
        """
        self.engine.ending.cancel(workflow_exec_id, again=True)

    def wait(self, workflow_exec_id: str, timeout: float = 60.0,
             poll_seconds: float = 0.05) -> WorkflowExec:
        """Poll the workflow item until the run has ended and settled (or ``timeout``
        passes), then return it with its activities. Each poll reads the one workflow item.

        An end is one write; what follows it (a run ended early skips what it left
        unstarted, a child run's parent hears) is written right after, and the run keeps
        a check time until it is done. So a run that ended is returned once its check
        time is gone, and one whose ender died before finishing is settled here after
        ``SETTLE_SECONDS`` (those follow-ups are idempotent): its activities are as the
        docs say an ended run leaves them (SKIPPED, not REQUESTED).

        Raises:
            TimeoutError: still not finished at the deadline.
            WorkflowNotFound: no such execution.
        """
        deadline = time.monotonic() + timeout
        ended: float | None = None
        while True:
            wf = self.engine.reads.workflow(workflow_exec_id)
            if wf.state.is_terminal:
                now = time.monotonic()
                ended = now if ended is None else ended
                if wf.check_epoch is None:
                    return self.engine.reads.get_workflow(workflow_exec_id)
                if now - ended >= SETTLE_SECONDS or now >= deadline:
                    self.engine.ending.settle(workflow_exec_id)
                    return self.engine.reads.get_workflow(workflow_exec_id)
            elif time.monotonic() >= deadline:
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
            item = self.engine.reads.workflow(workflow_exec_id)
            item_sig = (item.state, item.updated_epoch)
            now = time.monotonic()
            if item_sig != item_seen or item.state.is_terminal \
                    or now - listed >= WATCH_ACTIVITIES_SECONDS:
                item_seen, listed = item_sig, now
                wf = self.engine.reads.get_workflow(workflow_exec_id)
                sig = (wf.state, tuple((a.activity_exec_id, a.state) for a in wf.activities))
                if sig != last:
                    last = sig
                    yield wf
                if wf.state.is_terminal:
                    return
            time.sleep(poll_seconds)

    def sweep(self, now: float | None = None) -> SweepReport:
        """One pass of the heartbeat listener and reconciler.

        Raises:
            InvalidInput: ``now`` is not a number.
        """
        return sweep(self.engine, checks.epoch(now))

    def fork_workflow(self, workflow_exec_id: str, *, from_activity: str, input: Any = None,
                      version: int | None = None, request_id: str | None = None) -> str:
        """Start a new run of the run's definition version (or ``version``) that keeps the
        completed outputs of every activity that does not depend on ``from_activity``
        (recorded as reused: ``ActivityExec.reused_from``; they never run) and runs
        ``from_activity`` and everything after it again. Returns the new run's id; its
        ``WorkflowExec.forked_from`` names the source. ``input`` replaces the source's
        input (None: the same). The same ``request_id`` always yields the same fork.
        Maps, child runs and failure handlers always run again.

        A code run is forked from a step ``name#k`` (a bare ``name``: ``name#1``): the
        steps that completed at an earlier position in the code's order of calls are
        reused, and the new run's code replays over them with its source's
        ``ctx.now``/``uuid4``/``random`` (docs/code-workflows.md, "Fork from a step").

        Raises:
            WorkflowNotFound: no such run.
            DefinitionNotFound: no such ``version``.
            InvalidInput: ``from_activity`` is not an activity of the definition (of a
                code run: not a step it has, or not ``name#k``; nothing is written), a
                bad input, or a request id used for another run.
            NotAllowedNow: ``max_running`` runs of the definition are running.
        """
        return fork(self.engine, workflow_exec_id, from_activity=from_activity,
                    input=input, version=version, request_id=request_id)

    def nudge(self, workflow_exec_id: str) -> NudgeReport:
        """Reconcile one run now, as the sweep would on its next visit: give back the pool
        slots its ended attempts still hold, time out or launch what is due (past a
        heartbeat or start deadline, a retry whose back-off passed, a timer), record a
        lost attempt row LOST (its retry policy decides next) and redo any follow-up a
        crash left half done. Costs what the run holds (one Query of its attempts, then
        what is due), never a pass over every run. Idempotent; safe beside the sweep.

        Raises:
            InvalidInput: a malformed id.
            WorkflowNotFound: no such execution.
        """
        checks.text(workflow_exec_id, "workflow_exec_id")
        return nudge(self.engine, workflow_exec_id)

    def list_rejections(self, day: str | None = None, *,
                        limit: int | None = 100) -> list[simple.Rejection]:
        """Stream records rejected on ``day`` (UTC ``YYYY-MM-DD``, default today)."""
        return simple.list_rejections(self.store, day, limit=limit, clock=self.clock)

    def find_workflow(self, workflow_exec_id: str) -> WorkflowExec | None:
        """The execution without its activities (one read), or None if it does not exist.

        Raises:
            InvalidInput: a malformed id.
        """
        try:
            return self.engine.reads.get_workflow(workflow_exec_id, with_activities=False)
        except WorkflowNotFound:
            return None

    def get_request(self, request_id: str) -> WorkflowRequest | None:
        """The ``workflow_request`` row of ``request_id`` — what asked for a run, and (for a
        Simple API row) what processing did with it — or None.

        Raises:
            InvalidInput: a malformed id.
        """
        checks.text(request_id, "workflow_request_id")
        record = self.store.cold.get_request(request_id)
        if record is None:
            return None
        # An input kept in S3 is read whole (what the row asked for).
        return WorkflowRequest.from_record(
            replace(record, input=self.engine.reads.payload(record.input, "input")))
