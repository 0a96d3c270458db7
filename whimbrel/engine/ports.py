"""What the engine needs from the outside, as Protocols it owns: the store, launchers
and a clock.

The engine speaks *intent* to the store (create a run, move an activity along a path of
states, list what is due) in the records of :mod:`whimbrel.contract.records`; how that
becomes DynamoDB requests is the store's business (``whimbrel/store``). A conditional
write that loses raises :class:`~whimbrel.contract.errors.StateConflict` whose
``current`` holds the record as it is now (None if it does not exist), so the engine
never reads an item back after losing a race.

``StorePort`` is the core port (runs, attempts, fan-in edges, timers, claims, and the
core's other tables, ``cold``: ``cold_port.py``). A feature with tables of its own declares
its port beside itself (``signal_port.py``, ``schedule_port.py``, ``lease_port.py``,
``pool_port.py``) and asks the store for it by that type, ``store.part(PoolPort)``: the
store finds the part implementing it (``whimbrel/store/parts/``) by the port's name, and
the port's module checks, for mypy, that the part implements it. No line here names a
feature.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from whimbrel.contract.payloads import PayloadLimits
from whimbrel.contract.records import (
    ActivityRecord,
    Changes,
    Due,
    WorkflowRecord,
)
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.settings import activity_environment

if TYPE_CHECKING:
    from whimbrel.engine.cold_port import ColdPort

Clock = Callable[[], float]
P = TypeVar("P")


class StorePort(Protocol):
    """The core tables as the engine uses them: runs, attempts, fan-in edges, timers and
    claims. Implemented by ``whimbrel.store.Store``, whose own methods these are.

    A feature's tables are reached through its part, asked for by the feature's own
    port (declared beside the feature): ``store.part(PoolPort)``. A new feature with a
    table of its own adds a part to the store and its port, and nothing here.
    """

    # -- the core's other tables, and the door to every feature's ------------------------
    @property
    def cold(self) -> ColdPort: ...
    def part(self, port: Callable[..., P]) -> P:
        """The store's part implementing the feature port ``port`` (``PoolPort``, …)."""
        ...

    endpoint_url: str | None
    table_prefix: str
    #: Partitions of the sparse ``claimable`` index; a claim asks them all at once.
    claim_shards: tuple[str, ...]
    #: Its shards of attempts whose priority is not the default, a window per claim.
    priority_claim_shards: tuple[str, ...]
    #: How many times this store put an attempt on a priority shard (a count that only
    #: grows): a claim reads every priority shard when it changed since its last look.
    priority_written: int
    #: The same for python work left for a worker (``w<k>``, ``wp<k>``; keys by module).
    worker_claim_shards: tuple[str, ...]
    worker_priority_claim_shards: tuple[str, ...]
    #: Partitions of the sparse ``timers`` and ``reconcile`` indexes (likewise).
    timer_shards: tuple[str, ...]
    check_shards: tuple[str, ...]

    # -- workflow executions ---------------------------------------------------------------
    def create_workflow(self, record: WorkflowRecord) -> bool: ...
    def put_attributes(self, record: WorkflowRecord, values: Mapping[str, str],
                       expires_epoch: float | None) -> None: ...
    def get_workflow(self, workflow_exec_id: str) -> WorkflowRecord | None: ...
    def workflow_input(self, workflow_exec_id: str) -> str | None: ...
    #: How large a payload may be (a bucket raises the limits).
    @property
    def payload_limits(self) -> PayloadLimits: ...
    def payload_text(self, text: str | None, field: str = "payload") -> str | None: ...
    def expire_workflow_data(self, workflow_exec_id: str, expires: float | None) -> None: ...
    def move_workflow(self, workflow_exec_id: str, expected: Collection[WorkflowState],
                      new_state: WorkflowState, changes: Changes, *, now: float,
                      actor: str, workflow_name: str,
                      if_unchanged: Mapping[str, int] | None = None) -> WorkflowRecord: ...
    def set_workflow(self, workflow_exec_id: str, changes: Changes, *,
                     states: Collection[WorkflowState]) -> bool: ...
    def claim_run_end(self, workflow_exec_id: str, activity_exec_id: str, *,
                      states: Collection[WorkflowState],
                      replacing: str | None = None) -> bool: ...
    def due_workflow_checks(self, now: float, limit: int,
                            shard: str | None = None) -> list[str]: ...
    def batch_get_workflows(self, ids: Sequence[str]) -> list[WorkflowRecord]: ...

    # -- activity executions ---------------------------------------------------------------
    def create_activity(self, record: ActivityRecord) -> bool: ...
    def create_claimable(self, record: ActivityRecord,
                         claim: tuple[object, ...] | None = None) -> bool: ...
    def get_activity(self, activity_exec_id: str) -> ActivityRecord | None: ...
    def list_activities(self, workflow_exec_id: str, prefix: str | None = None, *,
                        map_size: int | None = None, items: bool = True
                        ) -> list[ActivityRecord]: ...
    def move_activity(self, activity_exec_id: str, expected: ActivityState,
                      path: Sequence[ActivityState], changes: Changes, *, now: float,
                      actor: str, due_by: float | None = None,
                      claimed: bool = False, written_by: float | None = None,
                      late_at: float | None = None) -> ActivityRecord: ...
    def set_activity(self, activity_exec_id: str, changes: Changes, *,
                     states: Collection[ActivityState],
                     alive_at: float | None = None) -> ActivityRecord: ...
    def try_set_activity(self, activity_exec_id: str, changes: Changes, *,
                         states: Collection[ActivityState]) -> bool: ...
    def due_timers(self, now: float, limit: int, shard: str | None = None) -> list[Due]: ...
    def due_timer_shards(self, now: float) -> set[str] | None: ...
    def due_check_shards(self, now: float) -> set[str] | None: ...
    def claimable(self, shard: str, key_prefix: str, limit: int) -> list[ActivityRecord]: ...
    def claimable_among(self, shards: Sequence[str], key_prefix: str,
                        limit: int) -> list[ActivityRecord]: ...

    # -- fan-in edges ------------------------------------------------------------------------
    def put_dependencies(self, workflow_exec_id: str, downstream: str,
                         upstreams: Iterable[str]) -> None: ...
    def delete_dependency(self, workflow_exec_id: str, downstream: str,
                          upstream: str) -> None: ...
    def pending_dependencies(self, workflow_exec_id: str, downstream: str,
                             limit: int | None = 1) -> list[str]: ...



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


def runs_here(launcher: Launcher, config: Mapping[str, object]) -> bool:
    """Whether this process runs the code ``config`` names (a worker kind,
    ``contract.launching.worker_kinds()``): the launcher's ``runs(config)`` if it has one
    (the python launcher asks its ``WorkerScope``), else True. The one question the
    engine asks before it launches such an attempt here."""
    runs = getattr(launcher, "runs", None)
    return True if runs is None else bool(runs(config))


def takes_here(launcher: Launcher, config: Mapping[str, object]) -> bool:
    """Whether this process launches an attempt of the code ``config`` names now: the
    launcher's ``takes(config)`` if it has one (a worker for it with a thread free,
    promised to this launch), else :func:`runs_here`. Asked once per launch decision."""
    takes = getattr(launcher, "takes", None)
    return runs_here(launcher, config) if takes is None else bool(takes(config))


def decides_here(launcher: Launcher | None, code: str) -> bool | None:
    """Whether this process makes the decisions of the code workflow whose function is
    ``code`` (``module:qualname``): the python launcher's ``decides(code)`` (its
    ``WorkerScope``: the client that registered or started it while it lives,
    ``run_worker``'s modules, ``whimbrel dev``). None: the launcher keeps no scope (a
    process given the code some other way decides if it can import it)."""
    decides = getattr(launcher, "decides", None)
    return None if decides is None else bool(decides(code))


def serve_here(launcher: Launcher | None, config: Mapping[str, object]) -> None:
    """Make this process a worker for the code ``config`` names, if its launcher keeps
    such a list (``serve(config)``): a code workflow's decision made here asked for that
    step, so its code is here (docs/contract.md, "Who runs code")."""
    serve = getattr(launcher, "serve", None)
    if serve is not None:
        serve(config)
