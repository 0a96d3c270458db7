"""What the engine needs from the outside, as Protocols it owns: the store, launchers
and a clock.

The engine speaks *intent* to the store (create a run, move an activity along a path of
states, list what is due) in the records of :mod:`whimbrel.contract.records`; how that
becomes DynamoDB requests is the store's business (``whimbrel/store``). A conditional
write that loses raises :class:`~whimbrel.contract.errors.StateConflict` whose
``current`` holds the record as it is now (None if it does not exist), so the engine
never reads an item back after losing a race.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from whimbrel.contract.records import (
    ActivityRecord,
    Changes,
    DefinitionRecord,
    Due,
    EventRecord,
    LeaseRecord,
    RejectionRecord,
    RequestRecord,
    SignalRecord,
    WorkflowRecord,
)
from whimbrel.contract.schedules import ScheduleInfo
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.settings import activity_environment

Clock = Callable[[], float]


class StorePort(Protocol):
    """The tables, as the engine uses them. Implemented by ``whimbrel.store.Store``."""

    endpoint_url: str | None
    table_prefix: str
    #: Partitions of the sparse ``claimable`` index; a claim asks them all at once.
    claim_shards: tuple[str, ...]
    #: Partitions of the sparse ``due_schedules`` index; a sweep asks them all at once.
    schedule_shards: tuple[str, ...]
    #: Partitions of the sparse ``timers`` and ``reconcile`` indexes (likewise).
    timer_shards: tuple[str, ...]
    check_shards: tuple[str, ...]

    # -- definitions --------------------------------------------------------------------
    def latest_definition(self, name: str) -> DefinitionRecord | None: ...
    def get_definition(self, name: str, version: int) -> DefinitionRecord | None: ...
    def put_definition(self, record: DefinitionRecord) -> bool: ...
    def definition_versions(self, name: str) -> list[DefinitionRecord]: ...
    def list_definitions(self) -> Iterable[DefinitionRecord]: ...

    # -- requests, events, rejections ------------------------------------------------------
    def put_request(self, record: RequestRecord) -> bool: ...
    def get_request(self, request_id: str) -> RequestRecord | None: ...
    def expire_request(self, request_id: str, expires_epoch: float) -> None: ...
    def mark_request(self, request_id: str, changes: Changes) -> None: ...
    def put_event(self, record: EventRecord) -> bool: ...
    def mark_event(self, event_id: str, changes: Changes) -> None: ...
    def put_rejection(self, record: RejectionRecord) -> None: ...
    def list_rejections(self, day: str, limit: int | None) -> list[RejectionRecord]: ...

    # -- workflow executions ---------------------------------------------------------------
    def create_workflow(self, record: WorkflowRecord) -> bool: ...
    def get_workflow(self, workflow_exec_id: str) -> WorkflowRecord | None: ...
    def workflow_input(self, workflow_exec_id: str) -> str | None: ...
    def expire_workflow_data(self, workflow_exec_id: str, expires: float | None) -> None: ...
    def move_workflow(self, workflow_exec_id: str, expected: Collection[WorkflowState],
                      new_state: WorkflowState, changes: Changes, *, now: float,
                      actor: str, workflow_name: str,
                      if_unchanged: Mapping[str, int] | None = None) -> WorkflowRecord: ...
    def set_workflow(self, workflow_exec_id: str, changes: Changes, *,
                     states: Collection[WorkflowState]) -> bool: ...
    def due_workflow_checks(self, now: float, limit: int,
                            shard: str | None = None) -> list[str]: ...
    def batch_get_workflows(self, ids: Sequence[str]) -> list[WorkflowRecord]: ...

    # -- activity executions ---------------------------------------------------------------
    def create_activity(self, record: ActivityRecord) -> bool: ...
    def create_claimable(self, record: ActivityRecord) -> bool: ...
    def get_activity(self, activity_exec_id: str) -> ActivityRecord | None: ...
    def list_activities(self, workflow_exec_id: str, prefix: str | None = None, *,
                        map_size: int | None = None) -> list[ActivityRecord]: ...
    def move_activity(self, activity_exec_id: str, expected: ActivityState,
                      path: Sequence[ActivityState], changes: Changes, *, now: float,
                      actor: str, due_by: float | None = None,
                      claimed: bool = False) -> ActivityRecord: ...
    def set_activity(self, activity_exec_id: str, changes: Changes, *,
                     states: Collection[ActivityState]) -> ActivityRecord: ...
    def try_set_activity(self, activity_exec_id: str, changes: Changes, *,
                         states: Collection[ActivityState]) -> bool: ...
    def due_timers(self, now: float, limit: int, shard: str | None = None) -> list[Due]: ...
    def claimable(self, shard: str, key_prefix: str, limit: int) -> list[ActivityRecord]: ...

    # -- fan-in edges ------------------------------------------------------------------------
    def put_dependencies(self, workflow_exec_id: str, downstream: str,
                         upstreams: Iterable[str]) -> None: ...
    def delete_dependency(self, workflow_exec_id: str, downstream: str,
                          upstream: str) -> None: ...
    def pending_dependencies(self, workflow_exec_id: str, downstream: str,
                             limit: int | None = 1) -> list[str]: ...

    # -- signals kept for a wait (store/signals.py) -------------------------------------------
    def put_signal(self, record: SignalRecord) -> bool: ...
    def get_signal(self, workflow_exec_id: str, signal_id: str) -> SignalRecord | None: ...
    def list_signals(self, workflow_exec_id: str) -> list[SignalRecord]: ...
    def bind_signal(self, workflow_exec_id: str, signal_id: str, activity_exec_id: str, *,
                    taking_from: str | None = None,
                    expires_epoch: float | None = None) -> bool: ...
    def release_signal(self, workflow_exec_id: str, signal_id: str,
                       activity_exec_id: str) -> bool: ...
    def expire_signal(self, workflow_exec_id: str, signal_id: str,
                      expires_epoch: float) -> None: ...

    # -- schedules (store/schedules.py) -----------------------------------------------------
    def put_schedule(self, info: ScheduleInfo, now: float) -> bool: ...
    def get_schedule(self, schedule_id: str) -> ScheduleInfo | None: ...
    def list_schedules(self) -> Iterable[ScheduleInfo]: ...
    def due_schedules(self, shard: str, now: float, limit: int) -> list[str]: ...
    def update_schedule(self, schedule_id: str, changes: Changes, *,
                        expect: Mapping[str, object]) -> ScheduleInfo | None: ...
    def delete_schedule(self, schedule_id: str) -> bool: ...

    # -- leases (store/leases.py) -------------------------------------------------------------
    def sweep_lease_id(self, shard: str) -> str: ...
    def acquire_lease(self, lease: LeaseRecord, now: float) -> LeaseRecord: ...
    def renew_lease(self, lease_id: str, owner: str, until_epoch: float) -> bool: ...
    def release_lease(self, lease_id: str, owner: str) -> bool: ...
    def get_lease(self, lease_id: str) -> LeaseRecord | None: ...


@dataclass(frozen=True)
class LaunchRequest:
    """Everything a launcher needs to start one activity attempt."""

    activity_exec_id: str
    activity_name: str
    workflow_exec_id: str
    workflow_name: str
    attempt: int
    config: Mapping[str, object] = field(default_factory=dict)
    endpoint_url: str | None = None
    table_prefix: str = "whimbrel_"

    def environment(self) -> dict[str, str]:
        """The variables an activity process receives (docs/contract.md)."""
        return activity_environment(
            activity_exec_id=self.activity_exec_id, activity_name=self.activity_name,
            workflow_exec_id=self.workflow_exec_id, workflow_name=self.workflow_name,
            table_prefix=self.table_prefix, endpoint_url=self.endpoint_url)


class Launcher(Protocol):
    """Starts an activity somewhere. Called only by the winner of the QUEUED write.

    A launcher must not block for the activity's duration; it hands the work off
    (a thread, a process, an AWS API call) and returns. Raising ``LaunchError`` (or
    any exception) makes the engine fail this attempt with the error.
    """

    def launch(self, request: LaunchRequest) -> None: ...


def runs_in_process(launcher: Launcher) -> bool:
    """True for launchers whose activities run in this process (``in_process = True``):
    the engine moves such an attempt straight to RUNNING in the write that queues it,
    and hands the run the workflow item it has."""
    return bool(getattr(launcher, "in_process", False))
