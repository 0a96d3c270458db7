"""Read-only views of executions returned by the public API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from whimbrel.contract import attributes as run_attributes
from whimbrel.contract.dataflow import split_item
from whimbrel.contract.ids import parse_activity_exec_id, workflow_exec_id_for
from whimbrel.contract.outcomes import MapProgress
from whimbrel.contract.payloads import decode_payload
from whimbrel.contract.priority import DEFAULT_PRIORITY
from whimbrel.contract.records import ActivityRecord, Change, RequestRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, WorkflowState


@dataclass(frozen=True)
class StateChange:
    state: str
    at: float
    by: str | None


@dataclass(frozen=True)
class ActivityExec:
    """One attempt of one activity."""

    activity_exec_id: str
    activity_name: str
    workflow_exec_id: str
    workflow_name: str
    state: ActivityState
    attempt: int
    output: Any
    error: str | None
    created_epoch: float
    updated_epoch: float
    started_epoch: float | None
    ended_epoch: float | None
    heartbeat_epoch: float | None
    heartbeat_timeout_seconds: float | None
    not_before_epoch: float | None
    history: tuple[StateChange, ...]
    #: Definition version of its workflow (None on items from before it was recorded).
    workflow_version: int | None = None
    #: Deadline of the attempt's whole run (``start_to_close_seconds``), once RUNNING.
    close_epoch: float | None = None
    #: Type name of the error it failed with, when the reporter gave one.
    error_type: str | None = None
    #: When DynamoDB's TTL may delete the row (None: kept).
    expires_epoch: float | None = None
    #: A map item's index in its map's list (its ``activity_name`` is ``<map>#<index>``).
    item_index: int | None = None
    #: A map's number of items, once it expanded.
    map_size: int | None = None
    #: A map's items: done / running / failed of all (``str()``: "120/500 done, …").
    progress: MapProgress | None = None
    #: The child run this attempt started (``LauncherSpec.workflow``).
    child_workflow_exec_id: str | None = None
    #: A failure handler's attempt: the failed attempt it runs for.
    called_by: str | None = None
    #: While a wait is READY, what it waits for: ``"signal:payment"``, ``"approval"``,
    #: ``"timer:2026-11-23T09:00:00Z"`` (None otherwise).
    waiting_for: str | None = None
    #: What it reported after the system gave up on it (TIMED_OUT, LOST): a late
    #: COMPLETED's output, a late FAILED's error, and when that was written
    #: (docs/contract.md, "Late output"); its state never changes for them.
    late_output: Any = None
    late_error: str | None = None
    late_epoch: float | None = None
    #: The pool slot the attempt holds (``<pool>#<k>``; ``<pool>`` alone: admitted by a
    #: pool without slots), and while it waits READY for its pool (full, or over its
    #: rate), that pool's name (docs/definitions.md, "Pools").
    pool_slot: str | None = None
    pool_wait: str | None = None
    #: The latest details its heartbeats carried (its progress), or None.
    heartbeat_details: Any = None

    @property
    def reused_from(self) -> str | None:
        """In a fork, the source run's attempt whose output this one reuses (it never
        ran); None for an attempt that ran."""
        first = self.history[0].by if self.history else None
        return first.removeprefix("reused:") if first and first.startswith("reused:") \
            else None

    @property
    def duration_seconds(self) -> float | None:
        if self.started_epoch is None:
            return None
        end = self.ended_epoch if self.ended_epoch is not None else self.updated_epoch
        return max(0.0, end - self.started_epoch)

    @classmethod
    def from_record(cls, m: ActivityRecord) -> ActivityExec:
        return cls(
            activity_exec_id=m.activity_exec_id,
            activity_name=m.activity_name,
            workflow_exec_id=m.workflow_exec_id,
            workflow_name=m.workflow_name,
            state=ActivityState(m.state or ActivityState.REQUESTED),
            attempt=m.attempt,
            output=decode_payload(m.output, field="output"),
            error=m.error,
            created_epoch=m.created_epoch,
            updated_epoch=m.updated_epoch,
            started_epoch=m.started_epoch,
            ended_epoch=m.ended_epoch,
            heartbeat_epoch=m.heartbeat_epoch,
            heartbeat_timeout_seconds=m.heartbeat_timeout_seconds,
            not_before_epoch=m.not_before_epoch,
            history=_changes(m.history),
            workflow_version=m.workflow_version,
            close_epoch=m.close_epoch,
            error_type=m.error_type,
            expires_epoch=m.expires_epoch,
            # A code step (<name>#<k>) is no map's item.
            item_index=split_item(m.activity_name)[1] if m.step is None else None,
            map_size=m.map_size,
            called_by=m.called_by,
            waiting_for=m.waiting_for if m.state is ActivityState.READY else None,
            late_output=decode_payload(m.late_output, field="late_output"),
            late_error=m.late_error,
            late_epoch=m.late_epoch,
            pool_slot=m.pool_slot,
            pool_wait=m.pool_wait if m.state is ActivityState.READY else None,
            heartbeat_details=decode_payload(m.heartbeat_details, field="heartbeat_details"),
        )


@dataclass(frozen=True)
class WorkflowExec:
    """One workflow execution and (when loaded) every attempt of its activities."""

    workflow_exec_id: str
    workflow_name: str
    version: int
    state: WorkflowState
    workflow_request_id: str
    input: Any
    error: str | None
    created_epoch: float
    updated_epoch: float
    ended_epoch: float | None
    history: tuple[StateChange, ...]
    activities: tuple[ActivityExec, ...] = ()
    source: str | None = None
    expires_epoch: float | None = None
    #: Every attempt of the items of its maps (``activities`` holds the maps' own rows).
    items: tuple[ActivityExec, ...] = ()
    #: A child run: the parent's attempt that started it.
    parent_activity_exec_id: str | None = None
    #: The child runs its attempts started, oldest first.
    child_workflow_exec_ids: tuple[str, ...] = ()
    #: How often the run was redriven.
    redrive_count: int = 0
    #: A run ended early (``ActivityRun.end_workflow``, the END_WORKFLOW row): the attempt
    #: that ended it, and the output it gave (the run's output).
    ended_by: str | None = None
    ended_with: Any = None
    #: Its priority, 0 (first) to 9 (``start_workflow(priority=)``; 5 unless given).
    priority: int = 5
    #: A code run (``@workflow``): its ``ctx.properties`` as last saved; its output is
    #: what its function returned.
    code: bool = False
    properties: Any = None
    #: A code run that ended with ``ctx.continue_as_new``: the new run.
    continued_as: str | None = None
    #: A fork (``fork_workflow``): the run it was forked from.
    forked_from: str | None = None
    #: The caller's attributes (``start_workflow(attributes=...)``); empty when none.
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def parent_workflow_exec_id(self) -> str | None:
        """A child run's parent run."""
        if self.parent_activity_exec_id is None:
            return None
        return parse_activity_exec_id(self.parent_activity_exec_id).workflow_exec_id

    def map_items(self, name: str) -> dict[int, ActivityExec]:
        """The latest attempt of each item of map ``name``, by index."""
        out: dict[int, ActivityExec] = {}
        for act in self.items:
            base, index = split_item(act.activity_name)
            if base == name and index is not None and (
                    index not in out or act.attempt > out[index].attempt):
                out[index] = act
        return out

    @property
    def latest_activities(self) -> dict[str, ActivityExec]:
        """The newest attempt of each activity, by name."""
        out: dict[str, ActivityExec] = {}
        for act in self.activities:
            cur = out.get(act.activity_name)
            if cur is None or act.attempt > cur.attempt:
                out[act.activity_name] = act
        return out

    def activity(self, name: str) -> ActivityExec:
        return self.latest_activities[name]

    @property
    def output(self) -> Any:
        """Outputs of completed activities, by name; for a run ended early, the output
        the attempt that ended it gave."""
        if self.ended_by is not None or self.code:
            return self.ended_with
        return {
            n: a.output for n, a in self.latest_activities.items()
            if a.state is ActivityState.COMPLETED
        }

    @classmethod
    def from_record(cls, m: WorkflowRecord,
                    activities: tuple[ActivityExec, ...] = ()) -> WorkflowExec:
        return cls(
            workflow_exec_id=m.workflow_exec_id,
            workflow_name=m.workflow_name,
            version=m.version,
            state=m.state,
            workflow_request_id=m.workflow_request_id,
            input=decode_payload(m.input, field="input"),
            error=m.error,
            created_epoch=m.created_epoch,
            updated_epoch=m.updated_epoch,
            ended_epoch=m.ended_epoch,
            history=_changes(m.history),
            activities=tuple(sorted((a for a in activities if a.item_index is None),
                                    key=lambda a: (a.created_epoch, a.attempt))),
            source=m.source,
            expires_epoch=m.expires_epoch,
            items=tuple(sorted((a for a in activities if a.item_index is not None),
                               key=lambda a: (a.item_index or 0, a.attempt))),
            parent_activity_exec_id=m.parent_activity_exec_id,
            # A fork starts as generation 1 (engine/fork.py): not a redrive.
            redrive_count=m.redrives - (1 if m.forked_from else 0),
            ended_by=m.ended_by,
            ended_with=decode_payload(m.output, field="output") if m.output else None,
            priority=DEFAULT_PRIORITY if m.priority is None else m.priority,
            properties=decode_payload(m.properties, field="properties"),
            continued_as=m.continued_as,
            forked_from=m.forked_from,
            attributes=run_attributes.decode(m.attributes),
        )


@dataclass(frozen=True)
class WorkflowRequest:
    """One ``workflow_request`` row: what asked for a run, and — for a row a client wrote
    through the Simple API — what processing did with it."""

    workflow_request_id: str
    workflow_name: str
    #: The run it starts (derived from the request id, whether or not it exists yet).
    workflow_exec_id: str
    version: int | None
    input: Any
    #: True for the trace a Full Logic start writes (the Lambda leaves it alone).
    manual: bool
    source: str | None
    when_epoch: float
    #: ``REJECTED`` (see ``reason``) for a client row that could not start its run; None
    #: otherwise (a row that started its run has the run as its record).
    outcome: str | None = None
    reason: str | None = None
    processed_epoch: float | None = None
    expires_epoch: float | None = None

    @classmethod
    def from_record(cls, r: RequestRecord) -> WorkflowRequest:
        return cls(
            workflow_request_id=r.workflow_request_id, workflow_name=r.workflow_name,
            workflow_exec_id=r.workflow_exec_id or workflow_exec_id_for(r.workflow_request_id),
            version=int(r.version) if r.version is not None else None,
            input=decode_payload(r.input, field="input"), manual=bool(r.manual),
            source=r.source, when_epoch=float(r.when_epoch), outcome=r.outcome,
            reason=r.reason,
            processed_epoch=float(r.processed_epoch) if r.processed_epoch is not None else None,
            expires_epoch=float(r.expires_epoch) if r.expires_epoch is not None else None)


def _changes(history: tuple[Change, ...]) -> tuple[StateChange, ...]:
    return tuple(StateChange(h.state, h.at, h.by) for h in history)
