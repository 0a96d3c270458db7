"""The full logic: one core and its features, put together.

The core is the plumbing (``base.py``: store, clock, definitions, what this engine last
saw), the start (``starting.py``), the moves callers ask for (``moves.py``), the
hand-offs (``flow.py``), workflow ends (``ending.py``) and the sweep (``sweep.py``).
The features take part in them through one protocol (``feature.py``), asked in the
order of :data:`FEATURES` — the only place that order is written.

Every state change is one conditional write through the store port. Follow-up work is
idempotent and re-derivable from the tables, so a crash between any two writes is
repaired by a replay (stream redelivery) or by the reconciler (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, Transition, WorkflowState
from whimbrel.engine import claims, ending, flow, heartbeats, launches, moves, starting
from whimbrel.engine.base import (
    IN_FLIGHT_GRACE_SECONDS,
    RECONCILE_GRACE_SECONDS,
    EngineBase,
)
from whimbrel.engine.children import Children
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.engine.conditions import Conditions
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.handlers import FailureHandlers
from whimbrel.engine.lost import Lost
from whimbrel.engine.maps import Maps
from whimbrel.engine.metrics import EngineMetrics
from whimbrel.engine.pools import Pools
from whimbrel.engine.ports import Clock, Launcher, StorePort
from whimbrel.engine.redrive import Redrive
from whimbrel.engine.schedules import Schedules
from whimbrel.engine.suspend import Suspend
from whimbrel.engine.tracing import Tracing
from whimbrel.engine.views import ActivityExec
from whimbrel.engine.waits import Waits
from whimbrel.settings import DEFAULT_RETENTION_DAYS

A = ActivityState
F = TypeVar("F", bound=Feature)

#: The features, in the order they are asked at every hook (feature.py). A new feature
#: is one module and one entry here.
FEATURES: tuple[Callable[[Core], Feature], ...] = (
    CodeRuns,         # code workflows: a step's end replays the function, which decides
    Redrive,          # attempts from before a redrive; a redrive's unfinished phase one
    Conditions,       # when/trigger decide a release (a map's too); skips; early ends
    Maps,             # a map's own row and its items
    Children,         # attempts that run a child workflow, and child runs' ends
    FailureHandlers,  # on_failure: continue, or call a handler
    Suspend,          # held deadlines and claims of a SUSPENDED run
    Waits,            # timer, signal and approval waits
    Lost,             # missing attempt rows: LOST tombstones; a created retry never again
    Pools,            # max_running and pools: slots, rates, waiters; what an end gives back
    Schedules,        # sweep: start the due firings of schedules
    Tracing,          # spans of a run and its attempts (observes only)
)


class Engine(EngineBase):
    """Whimbrel's full logic over one store. Thread-safe; share one per process.

    Args:
        store: the tables (:class:`~whimbrel.engine.ports.StorePort`).
        clock: returns epoch seconds (inject one to drive time in tests).
        launchers: how activities start, by launcher kind.
        actor: recorded in the history of every move this engine makes.
        reconcile_grace_seconds: first reconcile visit after a start.
        retention_days: default retention of ended runs (None: forever).
        in_flight_grace_seconds: how long past a running attempt's deadline it is timed
            out (``IN_FLIGHT_GRACE_SECONDS``: results written in time may be on their way).
        metrics: told of every workflow and attempt end this engine makes (none: off).
    """

    def __init__(
        self,
        store: StorePort,
        *,
        clock: Clock,
        launchers: Mapping[str, Launcher] | None = None,
        actor: str = "engine",
        reconcile_grace_seconds: float = RECONCILE_GRACE_SECONDS,
        retention_days: float | None = DEFAULT_RETENTION_DAYS,
        metrics: EngineMetrics | None = None,
        in_flight_grace_seconds: float = IN_FLIGHT_GRACE_SECONDS,
    ) -> None:
        super().__init__(store, clock=clock, launchers=launchers, actor=actor,
                         reconcile_grace_seconds=reconcile_grace_seconds,
                         retention_days=retention_days, metrics=metrics,
                         in_flight_grace_seconds=in_flight_grace_seconds)
        self.features: tuple[Feature, ...] = tuple(make(self) for make in FEATURES)
        self.starting_hooks: list[Callable[[WorkflowDefinition], None]] = []

    def feature(self, kind: type[F]) -> F:
        """The engine's instance of a feature (for the calls only it offers)."""
        return next(f for f in self.features if isinstance(f, kind))

    # -- start (starting.py) ---------------------------------------------------------------

    def start(self, name: str, input: Any = None, *, version: int | None = None,
              request_id: str | None = None, source: str | None = None,
              write_request: bool = True, parent: str | None = None,
              priority: int | None = None,
              attributes: Mapping[str, Any] | None = None) -> str:
        """Start (or resume starting) the execution for ``request_id``. Idempotent.

        Raises:
            DefinitionNotFound: unknown workflow name or version.
            InvalidInput: input too large or not JSON; request id used for another
                workflow; a priority that is not 0-9; bad attributes.
        """
        return starting.start(self, name, input, version=version, request_id=request_id,
                              source=source, write_request=write_request, parent=parent,
                              priority=priority, attributes=attributes)

    def resume_start(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     rows: list[ActivityRecord] | None = None) -> bool:
        return starting.resume_start(self, wf, defn, rows)

    def next_check(self, created: float, now: float, defn: WorkflowDefinition,
                   interval: float | None = None) -> float:
        return starting.next_check(self, created, now, defn, interval)

    # -- moves callers ask for (moves.py) ----------------------------------------------------

    def transition(self, activity_exec_id_: str, transition: Transition | str, *,
                   output: Any = None, error: Any = None, error_type: str | None = None,
                   actor: str | None = None,
                   assume: ActivityRecord | None = None,
                   written_epoch: float | None = None,
                   output_json: str | None = None) -> ActivityExec:
        """Apply one contract move asked for by a caller outside the engine, with its
        guards and follow-ups (see :func:`whimbrel.engine.moves.transition`)."""
        return moves.transition(self, activity_exec_id_, transition, output=output,
                                error=error, error_type=error_type, actor=actor,
                                assume=assume, written_epoch=written_epoch,
                                output_json=output_json)

    def finish(self, aeid: str, transition: Transition, *, output: Any = None,
               error: Any = None, error_type: str | None = None, actor: str = "worker",
               image: ActivityRecord | None = None) -> ActivityRecord:
        return moves.finish(self, aeid, transition, output=output, error=error,
                            error_type=error_type, actor=actor, image=image)

    def ensure_followups(self, activity_exec_id_: str) -> None:
        """Re-run the follow-ups of the activity's current state (redelivery, repair)."""
        self.after(self.activity(activity_exec_id_))

    def start_running(self, aeid: str, *, actor: str = "worker") -> ActivityRecord:
        return moves.start_running(self, aeid, actor=actor)

    def heartbeat(self, aeid: str, image: ActivityRecord | None = None,
                  details: str | None = None,
                  written_epoch: float | None = None) -> ActivityState:
        return heartbeats.heartbeat(self, aeid, image, details, written_epoch)

    def claim(self, workflow_name: str | None = None, activity_name: str | None = None, *,
              actor: str = "worker") -> ActivityRecord | None:
        return claims.claim(self, workflow_name, activity_name, actor=actor)

    # -- hand-offs (flow.py) -------------------------------------------------------------

    def after(self, item: ActivityRecord,
              wf_read: Future[WorkflowRecord] | None = None) -> None:
        flow.after(self, item, wf_read)

    def after_completed(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                        name: str) -> None:
        flow.after_completed(self, wf, defn, name)

    def advance(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                attempt: int, source: ActivityState = A.REQUESTED) -> None:
        flow.advance(self, wf, defn, name, attempt, source)

    def new_attempt(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                    attempt: int, now: float, *, not_before: float | None = None,
                    actor: str | None = None,
                    previous: ActivityRecord | None = None) -> ActivityRecord:
        return flow.new_attempt(self, wf, defn, name, attempt, now, not_before=not_before,
                                actor=actor, previous=previous)

    def retry_or_fail(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                      item: ActivityRecord) -> None:
        flow.retry_or_fail(self, wf, defn, item)

    def failed_for_good(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                        item: ActivityRecord, why: str) -> None:
        flow.failed_for_good(self, wf, defn, item, why)

    def complete_if_done(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        return flow.complete_if_done(self, wf, defn)

    def launch(self, wf: WorkflowRecord, defn: WorkflowDefinition,
               item: ActivityRecord) -> None:
        launches.launch(self, wf, defn, item)

    def apply(self, item: ActivityRecord, transition: Transition, *,
              output: str | None = None, error: str | None = None,
              error_type: str | None = None, actor: str | None = None,
              claimed: bool = False) -> ActivityRecord:
        return flow.apply(self, item, transition, output=output, error=error,
                          error_type=error_type, actor=actor, claimed=claimed)

    # -- ends (ending.py) ----------------------------------------------------------------

    def settle(self, wx: str) -> None:
        ending.settle(self, wx)

    def cancel(self, wx: str, *, actor: str | None = None) -> None:
        """Request cancellation and stop what can be stopped. Idempotent (a run that
        ended CANCELLED is cancelled again quietly).

        Raises:
            WorkflowNotFound: no such execution.
            WorkflowAlreadyEnded: it ended otherwise (COMPLETED, FAILED, TIMED_OUT).
        """
        ending.cancel(self, wx, actor=actor, refuse_ended=True)

    def fail_workflow(self, wf: WorkflowRecord, error: str) -> None:
        ending.fail_workflow(self, wf, error)

    def time_out_workflow(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        return ending.time_out_workflow(self, wf, defn)

    def end_workflow(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     expected: Collection[WorkflowState], state: WorkflowState, *,
                     error: str | None = None,
                     activities: Sequence[ActivityRecord] | None = None) -> bool:
        return ending.end_workflow(self, wf, defn, expected, state, error=error,
                                   activities=activities)

    def stop_activity(self, act: ActivityRecord, defn: WorkflowDefinition, *,
                      ask_running: bool) -> bool:
        return ending.stop_activity(self, act, defn, ask_running=ask_running)

    def stop_plainly(self, act: ActivityRecord, defn: WorkflowDefinition, *,
                     ask_running: bool) -> bool:
        return ending.stop_plainly(self, act, defn, ask_running=ask_running)

    # -- what only a feature offers ------------------------------------------------------

    def redrive(self, wx: str, *, actor: str | None = None,
                parent: str | None = None) -> WorkflowRecord:
        """Move an ended run back to RUNNING and start what did not complete
        (engine/redrive.py). ``parent``: only for a child run, the parent's attempt that
        adopts it (engine/children.py).

        Raises:
            WorkflowNotFound: no such execution.
            RedriveNotAllowed: the run is not FAILED, CANCELLED or TIMED_OUT, an attempt
                of it still runs, another redrive won, or it is a child run (redrive the
                parent).
        """
        return self.feature(Redrive).redrive(wx, actor=actor, parent=parent)

    def redrive_followups(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        return self.feature(Redrive).followups(wf, defn)

    def start_child(self, aeid: str) -> str:
        """Start the child run of a RUNNING attempt (idempotent; engine/children.py)."""
        return self.feature(Children).start_child(aeid)
