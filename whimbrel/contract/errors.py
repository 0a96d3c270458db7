"""The one error tree. Everything Whimbrel raises on purpose derives from WhimbrelError.

Each error carries structured fields so that callers (and the Lambda adapters, which
must decide between *reject* and *retry*) never parse messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any


class WhimbrelError(Exception):
    """Base of every error Whimbrel raises on purpose.

    Attributes:
        retryable: True when the same call may succeed later (throttling, timeouts).
            Stream adapters retry these and reject everything else.
    """

    retryable: bool = False

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly description: the error's class name, message and fields."""
        return {"error": type(self).__name__, "message": self.message, **self.fields}


class IllegalTransition(WhimbrelError):
    """The contract has no move ``transition`` from ``current``."""

    def __init__(
        self,
        *,
        current: str,
        transition: str,
        activity_exec_id: str | None = None,
        workflow_exec_id: str | None = None,
    ) -> None:
        subject = activity_exec_id or workflow_exec_id or "execution"
        super().__init__(
            f"illegal transition {transition} from state {current} for {subject}",
            current=current,
            transition=transition,
            activity_exec_id=activity_exec_id,
            workflow_exec_id=workflow_exec_id,
        )
        self.current = current
        self.transition = transition
        self.activity_exec_id = activity_exec_id
        self.workflow_exec_id = workflow_exec_id


class ListenerOnly(IllegalTransition):
    """TIME_OUT asked for by anyone but the heartbeat listener: the contract gives that
    move to the listener alone."""

    def __init__(self, *, current: str, activity_exec_id: str | None = None) -> None:
        super().__init__(current=current, transition="TIME_OUT",
                         activity_exec_id=activity_exec_id)
        self.message = (f"TIME_OUT is applied only by the heartbeat listener (refused for "
                        f"{activity_exec_id or 'the activity'}, which is {current}); report "
                        "FAILED, or stop heartbeating and let its deadline pass")


class StateConflict(WhimbrelError):
    """A conditional write lost: the item is no longer in the state the move needs.

    ``actual`` is the state the item is in now (None if it does not exist); ``current``
    is the whole item as it is now, when the store had it at hand (not part of
    ``to_dict``).
    """

    def __init__(
        self,
        *,
        expected: str | Sequence[str],
        actual: str | None,
        activity_exec_id: str | None = None,
        workflow_exec_id: str | None = None,
        transition: str | None = None,
        current: Any = None,
    ) -> None:
        exp = expected if isinstance(expected, str) else "/".join(expected)
        subject = activity_exec_id or workflow_exec_id or "execution"
        verb = f" {transition}" if transition else ""
        super().__init__(
            f"state conflict on {subject}: move{verb} needs {exp} but it is {actual}",
            expected=exp,
            actual=actual,
            activity_exec_id=activity_exec_id,
            workflow_exec_id=workflow_exec_id,
            transition=transition,
        )
        self.expected = exp
        self.actual = actual
        self.activity_exec_id = activity_exec_id
        self.workflow_exec_id = workflow_exec_id
        self.transition = transition
        self.current = current


class NotFound(WhimbrelError):
    """A named thing does not exist."""


class WorkflowNotFound(NotFound):
    def __init__(self, workflow_exec_id: str) -> None:
        super().__init__(
            f"no workflow execution {workflow_exec_id!r}", workflow_exec_id=workflow_exec_id
        )
        self.workflow_exec_id = workflow_exec_id


class ActivityNotFound(NotFound):
    def __init__(self, activity_exec_id: str) -> None:
        super().__init__(
            f"no activity execution {activity_exec_id!r}", activity_exec_id=activity_exec_id
        )
        self.activity_exec_id = activity_exec_id


class DefinitionNotFound(NotFound):
    def __init__(self, workflow_name: str, version: int | None = None) -> None:
        which = f" version {version}" if version is not None else ""
        super().__init__(
            f"no registered workflow definition {workflow_name!r}{which}",
            workflow_name=workflow_name,
            version=version,
        )
        self.workflow_name = workflow_name
        self.version = version


class InvalidDefinition(WhimbrelError):
    """A workflow definition has problems; ``problems`` lists every one of them."""

    def __init__(self, name: str, problems: Sequence[str]) -> None:
        listing = "; ".join(problems)
        super().__init__(
            f"invalid workflow definition {name!r}: {listing}",
            workflow_name=name,
            problems=list(problems),
        )
        self.workflow_name = name
        self.problems = list(problems)


class InvalidInput(WhimbrelError, ValueError):
    """A request, event or argument is malformed. ``field`` names the culprit.

    Also a ``ValueError``: an unknown ``Transition("…")`` raises it, and callers that
    catch the ValueError of an enum lookup keep working.
    """

    def __init__(self, message: str, *, field: str | None = None, **fields: Any) -> None:
        super().__init__(message, field=field, **fields)
        self.field = field


class RequestIdReused(InvalidInput):
    """A request id that already started a run was given again with another workflow or
    another input: a request id names one request forever (the same one again returns
    its run)."""

    def __init__(self, *, request_id: str, workflow_exec_id: str, why: str) -> None:
        super().__init__(
            f"request id {request_id!r} already stands for run {workflow_exec_id} {why}; "
            "the same request again returns that run, another needs another request id",
            field="workflow_request_id", request_id=request_id,
            workflow_exec_id=workflow_exec_id)
        self.request_id = request_id
        self.workflow_exec_id = workflow_exec_id


class ActivityStopped(WhimbrelError):
    """The activity must stop: it was cancelled or timed out by someone else."""

    def __init__(self, message: str, *, activity_exec_id: str, state: str) -> None:
        super().__init__(message, activity_exec_id=activity_exec_id, state=state)
        self.activity_exec_id = activity_exec_id
        self.state = state


class ActivityCancelled(ActivityStopped):
    """The activity was cancelled while running; finish up and stop."""

    def __init__(self, activity_exec_id: str, state: str = "CANCELLED_RUNNING") -> None:
        super().__init__(
            f"activity {activity_exec_id} was cancelled ({state}); stop work",
            activity_exec_id=activity_exec_id,
            state=state,
        )


class ActivityTimedOut(ActivityStopped):
    """The system gave up on the activity (TIMED_OUT, or LOST: its row vanished); its
    results no longer move it. A late COMPLETED or FAILED is kept on its row as late
    output (``kept=True``), never as its state."""

    def __init__(self, activity_exec_id: str, state: str = "TIMED_OUT", *,
                 kept: bool = False) -> None:
        what = "timed out" if state == "TIMED_OUT" else "was given up"
        tail = (f"its result was kept as late output (late_output/late_error); its state "
                f"stays {state}" if kept else "its result will not change its state")
        super().__init__(
            f"activity {activity_exec_id} {what} ({state}); {tail}",
            activity_exec_id=activity_exec_id,
            state=state,
        )
        self.kept = kept


class LaunchError(WhimbrelError):
    """A launcher could not start an activity."""

    retryable = True


class LaunchHandedBack(LaunchError):
    """An in-process launcher cannot run the attempt after all: its process is closing
    or its interpreter exiting (between the check that it runs here and the launch).
    The engine hands the attempt back (``HandedBack``: a next attempt at once, left for
    a worker) instead of failing it."""


class StoreError(WhimbrelError):
    """DynamoDB refused or failed a call for a reason other than a lost condition.

    ``aws_code`` keeps the AWS error code; ``retryable`` says whether to try again.
    """

    def __init__(self, message: str, *, aws_code: str | None, retryable: bool) -> None:
        super().__init__(message, aws_code=aws_code)
        self.aws_code = aws_code
        self.retryable = retryable


class PayloadMissing(StoreError):
    """A payload kept in S3 could not be read (missing, expired, or access refused):
    its reader gets this, naming the object, never a ``null`` in the value's place."""

    def __init__(self, ref: str, reason: str, *, aws_code: str | None = None,
                 retryable: bool = False) -> None:
        super().__init__(f"payload {ref} could not be read: {reason}", aws_code=aws_code,
                         retryable=retryable)
        self.fields["ref"] = ref
        self.ref = ref


class NotAllowedNow(WhimbrelError):
    """The contract allows the move in general, but one of its guards refuses it now
    (docs/contract.md, "Guards"); nothing changed. The message says which and why."""


class UpstreamNotCompleted(NotAllowedNow):
    """READY/QUEUED asked for an activity whose upstreams have not all COMPLETED."""

    def __init__(self, *, activity_exec_id: str, transition: str,
                 open_upstreams: Sequence[str]) -> None:
        listing = ", ".join(open_upstreams)
        super().__init__(
            f"{transition} refused for {activity_exec_id}: its upstream(s) {listing} "
            "have not COMPLETED (the engine readies it when the last one does)",
            activity_exec_id=activity_exec_id, transition=transition,
            open_upstreams=list(open_upstreams))
        self.activity_exec_id = activity_exec_id
        self.open_upstreams = list(open_upstreams)


class WorkflowNotRunning(NotAllowedNow):
    """Nothing is queued, prepared, run or claimed unless its workflow is RUNNING."""

    def __init__(self, *, workflow_exec_id: str, workflow_state: str,
                 activity_exec_id: str | None = None, transition: str | None = None) -> None:
        what = f"{transition} of {activity_exec_id}" if activity_exec_id else "the move"
        super().__init__(
            f"{what} refused: workflow {workflow_exec_id} is {workflow_state}, and nothing "
            "new starts unless it is RUNNING",
            workflow_exec_id=workflow_exec_id, workflow_state=workflow_state,
            activity_exec_id=activity_exec_id, transition=transition)
        self.workflow_exec_id = workflow_exec_id
        self.workflow_state = workflow_state


class DevAlreadyRunning(NotAllowedNow):
    """Another ``whimbrel dev`` (a local runtime) already pumps the streams of these
    tables: a second one would process every stream record twice. It holds the ``dev``
    lease (``lease`` table) since ``since_epoch``, renewed while it runs (``until_epoch``:
    when it lapses unless renewed). Raised for a live holder on this host; a dead one is
    taken over, another host's waited for (``whimbrel/local/devlease.py``)."""

    def __init__(self, *, table_prefix: str, endpoint: str | None, host: str | None,
                 pid: int | None, since_epoch: float, until_epoch: float) -> None:
        def at(epoch: float) -> str:
            return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        super().__init__(
            f"another whimbrel dev already runs on tables {table_prefix}* at "
            f"{endpoint or 'this endpoint'}: pid {pid} on {host}, since {at(since_epoch)}. "
            "Two would process every stream record twice: stop that one, or give this one "
            "other tables (--table-prefix). A dev killed on this host is taken over at "
            "once; one on another host when its lease lapses (now "
            f"{at(until_epoch)}, unless it renews it)",
            table_prefix=table_prefix, endpoint=endpoint, host=host, pid=pid,
            since_epoch=since_epoch, until_epoch=until_epoch)
        self.host, self.pid = host, pid
        self.since_epoch, self.until_epoch = since_epoch, until_epoch


class WorkflowAlreadyEnded(NotAllowedNow):
    """A run that has ended cannot be cancelled (nothing of it runs); one that ended
    CANCELLED is cancelled again quietly."""

    def __init__(self, *, workflow_exec_id: str, workflow_state: str) -> None:
        super().__init__(
            f"workflow {workflow_exec_id} already ended {workflow_state}: nothing to cancel",
            workflow_exec_id=workflow_exec_id, workflow_state=workflow_state)
        self.workflow_exec_id = workflow_exec_id
        self.workflow_state = workflow_state


class OutputTooLarge(InvalidInput):
    """A completed child's output is larger than its parent's attempt may hold."""


class NestingTooDeep(LaunchError):
    """A child run would nest deeper than ``MAX_NESTING_DEPTH`` (its attempt fails)."""
