"""The full logic: one core and its features, put together.

:class:`Engine` holds its parts and calls nothing itself. The core's parts are the
plumbing (``definitions.py``, ``reads.py``, ``known.py``: what this engine last saw,
``threads.py``), the start (``starting.py``), the moves callers ask for (``moves.py``),
the hand-offs (``flow.py``), the launches (``launches.py``), workflow ends
(``ending.py``), heartbeats and claims; each is reached one way, ``engine.<part>.op(…)``
(e.g. ``engine.flow.advance(wf, defn, name, attempt)``). The features take part in them
through one protocol (``feature.py``), asked through one :class:`~whimbrel.engine.hooks.Hooks`
object in the order of :data:`FEATURES` — the only place that order is written; a
feature's own operations are reached as ``engine.feature(X).op(…)``.

Every state change is one conditional write through the store port. Follow-up work is
idempotent and re-derivable from the tables, so a crash between any two writes is
repaired by a replay (stream redelivery) or by the reconciler (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.engine.children import Children
from whimbrel.engine.claims import Claims
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.engine.code_steps import StepSpecs
from whimbrel.engine.conditions import Conditions
from whimbrel.engine.definitions import Definitions
from whimbrel.engine.ending import Ending
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.flow import Flow
from whimbrel.engine.handlers import FailureHandlers
from whimbrel.engine.handover import Handover
from whimbrel.engine.heartbeats import Heartbeats
from whimbrel.engine.hooks import Hooks
from whimbrel.engine.inputs import Inputs
from whimbrel.engine.known import Known
from whimbrel.engine.latest import LatestVersions
from whimbrel.engine.launches import Launches
from whimbrel.engine.lost import Lost
from whimbrel.engine.maps import Maps
from whimbrel.engine.metrics import NO_METRICS, EngineMetrics, Incidents
from whimbrel.engine.moves import Moves
from whimbrel.engine.pools import Pools
from whimbrel.engine.ports import Clock, Launcher, StorePort
from whimbrel.engine.reads import Reads
from whimbrel.engine.redrive import Redrive
from whimbrel.engine.schedules import Schedules
from whimbrel.engine.starting import Starting
from whimbrel.engine.suspend import Suspend
from whimbrel.engine.threads import Threads
from whimbrel.engine.tracing import Tracing
from whimbrel.engine.waits import Waits
from whimbrel.settings import DEFAULT_RETENTION_DAYS

F = TypeVar("F")

#: First reconcile visit after a workflow starts; later visits back off (sweep.py).
RECONCILE_GRACE_SECONDS = 120.0
#: How long past a running attempt's deadline the heartbeat listener waits before it
#: times the attempt out: a Simple API result row written before the deadline may still
#: be in flight on the stream (docs/architecture.md, "Results written in time").
IN_FLIGHT_GRACE_SECONDS = 5.0

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


class Engine:
    """Whimbrel's full logic over one store: its parts and its features. Thread-safe;
    share one per process.

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
        self.store = store
        self.clock = clock
        self.launchers: dict[str, Launcher] = dict(launchers or {})
        self.actor = actor
        self.reconcile_grace_seconds = reconcile_grace_seconds
        self.retention_days = retention_days
        self.in_flight_grace_seconds = in_flight_grace_seconds
        self.metrics: EngineMetrics = metrics or NO_METRICS
        #: Trouble survived or given up on (engine/metrics.py ``Incidents``).
        self.incidents = Incidents()
        self.steps = StepSpecs(store)
        #: Which version a start that names none runs (engine/latest.py).
        self.latest = LatestVersions(store)
        #: Called with the definition of every run this engine starts, before its roots
        #: are created (the client: a worker for what it starts, client/_worker.py).
        self.starting_hooks: list[Callable[[WorkflowDefinition], None]] = []
        core: Core = self
        # The plumbing.
        self.definitions = Definitions(core)
        self.reads = Reads(core)
        self.known = Known(core)
        self.threads = Threads()
        # The core's moves.
        self.starting = Starting(core)
        self.moves = Moves(core)
        self.flow = Flow(core)
        self.launches = Launches(core)
        self.ending = Ending(core)
        self.heartbeats = Heartbeats(core)
        self.claims = Claims(core)
        self.handover = Handover(core)
        self.inputs = Inputs(core)
        # The features, last: they may read any part as they are made. Their hooks are
        # asked through one dispatcher (hooks.py), never by a loop of a caller's own.
        self.hooks = Hooks([make(core) for make in FEATURES])

    def feature(self, kind: type[F]) -> F:
        """The engine's instance of a feature: the one door to its own operations
        (``engine.feature(Redrive).redrive(wx)``). ``kind`` may be a runtime-checkable
        protocol (feature.py ``Redriving``) for a caller that may not import the feature.

        Raises:
            LookupError: no feature of this engine is a ``kind``.
        """
        for f in self.hooks.features:
            if isinstance(f, kind):
                return f
        raise LookupError(f"no feature of this engine is a {kind.__name__}")

    def close(self) -> None:
        """Stop the engine's thread pools (what is queued on them still runs)."""
        self.threads.close()
