"""What each of the core's parts offers the others, as protocols (docs/architecture.md,
"The engine"). :class:`~whimbrel.engine.feature.Core` types its parts by these, so
neither ``feature.py`` nor a part's module imports another part's module for its types:
the parts import ``feature.py`` (for ``Core``) and this module, and nothing imports a
part back. ``Engine`` (``engine.py``) holds the real parts; mypy checks, where it hands
itself to them as ``Core``, that each part is what its protocol here says.

A part's method that another part, a feature or a caller through ``Core`` uses is
declared here with the same signature as on the part.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.payloads import PayloadLimits
from whimbrel.contract.records import ActivityRecord, Changes, WorkflowRecord
from whimbrel.contract.states import ActivityState, Transition, WorkflowState
from whimbrel.engine.ports import LaunchRequest
from whimbrel.engine.run_reads import RunRead, RunRows
from whimbrel.engine.views import ActivityExec, WorkflowExec

__all__ = [
    "ClaimsPart",
    "DefinitionsPart",
    "EndingPart",
    "FlowPart",
    "HandoverPart",
    "HeartbeatsPart",
    "InputsPart",
    "KnownPart",
    "LaunchesPart",
    "MovesPart",
    "ReadsPart",
    "StartedRun",
    "StartingPart",
]


class StartedRun(str):
    """What a start returns: the run's ``workflow_exec_id`` (a ``str``, as every caller
    uses it), saying whether this very start ``created`` the run (False: it was there,
    from an earlier delivery of the same request) — known from the conditional create,
    so a caller needs no read of its own (a request row's outcome: intake)."""

    created: bool

    def __new__(cls, workflow_exec_id: str, created: bool = False) -> StartedRun:
        run = super().__new__(cls, workflow_exec_id)
        run.created = created
        return run

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        return str, (str(self),)  # pickled (another process, a copy): the plain id


class DefinitionsPart(Protocol):
    """``definitions.py``'s ``Definitions``."""

    def register(self, definition: WorkflowDefinition) -> int: ...
    def definition(
        self, name: str, version: int | None = ...
    ) -> tuple[int, WorkflowDefinition]: ...
    def definition_of(self, record: ActivityRecord | WorkflowRecord) -> WorkflowDefinition: ...
    def retention(self, defn: WorkflowDefinition) -> float | None: ...


class ReadsPart(Protocol):
    """``reads.py``'s ``Reads``."""

    def workflow(self, wx: str) -> WorkflowRecord: ...
    def workflow_after(self, wx: str) -> WorkflowRecord: ...
    def run_input(self, wf: WorkflowRecord) -> str | None: ...
    @property
    def limits(self) -> PayloadLimits: ...
    def payload(self, text: str | None, field: str = ...) -> str | None: ...
    def with_input(self, wf: WorkflowRecord) -> WorkflowRecord: ...
    def activity(self, aeid: str) -> ActivityRecord: ...
    def get_workflow(self, wx: str, *, with_activities: bool = ...) -> WorkflowExec: ...
    def get_activity(self, aeid: str) -> ActivityExec: ...
    def latest_attempts(self, wx: str) -> dict[str, ActivityRecord]: ...


class KnownPart(Protocol):
    """``known.py``'s ``Known``."""

    def remember(self, item: ActivityRecord | None) -> None: ...
    def remembered(self, aeid: str) -> ActivityRecord | None: ...
    def remembered_activity(self, aeid: str) -> ActivityExec | None: ...
    def prefetched_workflow(self, aeid: str, read: Future[WorkflowRecord]) -> None: ...
    def take_prefetched_workflow(self, aeid: str) -> Future[WorkflowRecord] | None: ...
    def move(
        self,
        aeid: str,
        expected: ActivityState,
        path: Sequence[ActivityState],
        changes: Changes,
        *,
        actor: str | None = ...,
        due_by: float | None = ...,
        claimed: bool = ...,
        written_by: float | None = ...,
        late_at: float | None = ...,
    ) -> ActivityRecord: ...


class StartingPart(Protocol):
    """``starting.py``'s ``Starting``."""

    def driven(self, spec: ActivityDefinition, name: str) -> bool: ...
    def start(
        self,
        name: str,
        input: Any = ...,
        *,
        version: int | None = ...,
        request_id: str | None = ...,
        source: str | None = ...,
        write_request: bool = ...,
        parent: str | None = ...,
        priority: int | None = ...,
        attributes: Mapping[str, Any] | None = ...,
    ) -> StartedRun: ...
    def next_check(
        self, created: float, now: float, defn: WorkflowDefinition, interval: float | None = ...
    ) -> float: ...
    def resume_start(
        self, wf: WorkflowRecord, defn: WorkflowDefinition, rows: list[ActivityRecord] | None = ...
    ) -> bool: ...
    def materialize(
        self, wf: WorkflowRecord, defn: WorkflowDefinition, *, phase_one: bool = ...
    ) -> dict[str, ActivityState]: ...
    def create_root(
        self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str, now: float
    ) -> ActivityState | None: ...
    def launch_roots(
        self, wf: WorkflowRecord, defn: WorkflowDefinition, created: Mapping[str, ActivityState]
    ) -> None: ...


class MovesPart(Protocol):
    """``moves.py``'s ``Moves``."""

    def refuse_outside_move(
        self, defn: WorkflowDefinition, item: ActivityRecord, verb: Transition
    ) -> None: ...
    def transition(
        self,
        activity_exec_id_: str,
        transition: Transition | str,
        *,
        output: Any = ...,
        error: Any = ...,
        error_type: str | None = ...,
        actor: str | None = ...,
        assume: ActivityRecord | None = ...,
        written_epoch: float | None = ...,
        output_json: str | None = ...,
    ) -> ActivityExec: ...
    def write_image(self, aeid: str, assume: ActivityRecord | None = ...) -> ActivityRecord: ...
    def check_guards(self, item: ActivityRecord, verb: Transition) -> None: ...
    def finish(
        self,
        aeid: str,
        transition: Transition,
        *,
        output: Any = ...,
        error: Any = ...,
        error_type: str | None = ...,
        actor: str = ...,
        image: ActivityRecord | None = ...,
    ) -> ActivityRecord: ...
    def ensure_followups(self, activity_exec_id_: str) -> None: ...
    def start_running(self, aeid: str, *, actor: str = ...) -> ActivityRecord: ...
    def end_wait(
        self,
        item: ActivityRecord,
        defn: WorkflowDefinition,
        verb: Transition,
        *,
        output: str | None = ...,
        error: str | None = ...,
        error_type: str | None = ...,
        actor: str | None = ...,
        due_by: float | None = ...,
    ) -> ActivityRecord: ...


class FlowPart(Protocol):
    """``flow.py``'s ``Flow``."""

    def after(self, item: ActivityRecord, wf_read: Future[WorkflowRecord] | None = ...) -> None: ...
    def visit_soon(self, wx: str, why: str) -> None: ...
    def follow_up(self, item: ActivityRecord, run: RunRead) -> None: ...
    def run_going_on(self, item: ActivityRecord, run: RunRead) -> WorkflowRecord | None: ...
    def after_completed(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str) -> None: ...
    def waiting_attempt(self, wf: WorkflowRecord, name: str) -> int: ...
    def maybe_complete(self, wf: WorkflowRecord, defn: WorkflowDefinition, sink: str) -> None: ...
    def complete_if_done(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool: ...
    def on_failure(
        self, wf: WorkflowRecord, defn: WorkflowDefinition, item: ActivityRecord
    ) -> None: ...
    def retry_or_fail(
        self, wf: WorkflowRecord, defn: WorkflowDefinition, item: ActivityRecord
    ) -> None: ...
    def failed_for_good(
        self, wf: WorkflowRecord, defn: WorkflowDefinition, item: ActivityRecord, why: str
    ) -> None: ...
    def new_attempt(
        self,
        wf: WorkflowRecord,
        defn: WorkflowDefinition,
        name: str,
        attempt: int,
        now: float,
        *,
        not_before: float | None = ...,
        actor: str | None = ...,
        previous: ActivityRecord | None = ...,
    ) -> ActivityRecord: ...
    def plan(
        self,
        wf: WorkflowRecord,
        defn: WorkflowDefinition,
        name: str,
        source: ActivityState,
        *,
        take: bool = ...,
    ) -> tuple[ActivityState, ...]: ...
    def advance(
        self,
        wf: WorkflowRecord,
        defn: WorkflowDefinition,
        name: str,
        attempt: int,
        source: ActivityState = ...,
        *,
        rows: RunRows | None = ...,
    ) -> None: ...
    def rows(self, wx: str) -> RunRows: ...
    def apply(
        self,
        item: ActivityRecord,
        transition: Transition,
        *,
        output: str | None = ...,
        error: str | None = ...,
        error_type: str | None = ...,
        actor: str | None = ...,
        claimed: bool = ...,
        written_epoch: float | None = ...,
    ) -> ActivityRecord: ...


class LaunchesPart(Protocol):
    """``launches.py``'s ``Launches``."""

    def launch(
        self, wf: WorkflowRecord, defn: WorkflowDefinition, item: ActivityRecord
    ) -> None: ...
    def launch_request(self, defn: WorkflowDefinition, item: ActivityRecord) -> LaunchRequest: ...
    def fail_attempt(self, item: ActivityRecord, error: str, error_type: str | None) -> None: ...


class EndingPart(Protocol):
    """``ending.py``'s ``Ending``."""

    def end_workflow(
        self,
        wf: WorkflowRecord,
        defn: WorkflowDefinition,
        expected: Collection[WorkflowState],
        state: WorkflowState,
        *,
        error: str | None = ...,
        activities: Sequence[ActivityRecord] | None = ...,
        extra: Mapping[str, str] | None = ...,
        actor: str | None = ...,
    ) -> bool: ...
    def before_end(
        self,
        wf: WorkflowRecord,
        defn: WorkflowDefinition,
        state: WorkflowState,
        expires: float | None,
        activities: Sequence[ActivityRecord] | None,
    ) -> None: ...
    def after_end(self, wf: WorkflowRecord) -> None: ...
    def fail_workflow(self, wf: WorkflowRecord, error: str) -> None: ...
    def cancel(self, wx: str, *, actor: str | None = ..., refuse_ended: bool = ...,
               again: bool = ...) -> None: ...
    def time_out_workflow(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool: ...
    def settle(self, wx: str) -> None: ...
    def stop_activity(
        self, act: ActivityRecord, defn: WorkflowDefinition, *, ask_running: bool
    ) -> bool: ...
    def stop_plainly(
        self, act: ActivityRecord, defn: WorkflowDefinition, *, ask_running: bool
    ) -> bool: ...


class HeartbeatsPart(Protocol):
    """``heartbeats.py``'s ``Heartbeats``."""

    def heartbeat(
        self,
        aeid: str,
        image: ActivityRecord | None = ...,
        details: str | None = ...,
        written_epoch: float | None = ...,
    ) -> ActivityState: ...
    def beat_after_time_out(self, aeid: str) -> bool: ...
    def check_running(self, aeid: str) -> ActivityState: ...
    def previous_details(self, wx: str, name: str, attempt: int) -> str | None: ...


class ClaimsPart(Protocol):
    """``claims.py``'s ``Claims``."""

    def claim(
        self, workflow_name: str | None = ..., activity_name: str | None = ..., *, actor: str = ...
    ) -> ActivityRecord | None: ...
    def claim_from(
        self,
        shards: Sequence[str],
        priority_shards: Sequence[str],
        read: Callable[[list[str]], list[ActivityRecord]],
        actor: str,
    ) -> ActivityRecord | None: ...
    def give_up(self, item: ActivityRecord, wf: WorkflowRecord) -> None: ...


class HandoverPart(Protocol):
    """``handover.py``'s ``Handover``."""

    def claim_for_worker(
        self,
        prefixes: Sequence[str],
        covers: Callable[[str], bool],
        *,
        actor: str = ...,
        decisions_only: bool = ...,
    ) -> ActivityRecord | None: ...
    def hand_back(self, activity_exec_id: str, why: str) -> bool: ...


class InputsPart(Protocol):
    """``inputs.py``'s ``Inputs``."""

    def launch_input(
        self, wf: WorkflowRecord, defn: WorkflowDefinition, own: str | None, name: str
    ) -> Any: ...
    def assembled(self, wx: str, node: ActivityRecord) -> Any: ...
    def whole_items(self, items: dict[int, ActivityRecord]) -> dict[int, ActivityRecord]: ...
    def upstream_values(
        self,
        wx: str,
        defn: WorkflowDefinition,
        name: str,
        acts: Iterable[ActivityRecord] | None = ...,
    ) -> tuple[dict[str, Any], dict[str, str]]: ...
    def upstream_value(self, wx: str, defn: WorkflowDefinition, up: str) -> Any: ...
    def resolved_value(
        self, wx: str, defn: WorkflowDefinition, latest: Mapping[str, ActivityRecord], name: str
    ) -> Any: ...
    def output_of(self, node: ActivityRecord) -> Any: ...
    def map_list(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str) -> list[Any]: ...
