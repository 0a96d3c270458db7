"""The one protocol between the engine's core and its features.

The core's parts (``definitions.py``, ``reads.py``, ``known.py``, ``threads.py`` — the
plumbing —, ``starting.py``, ``moves.py``, ``flow.py``, ``launches.py``, ``ending.py``,
``heartbeats.py``, ``claims.py``, and ``sweep.py``) make the moves every activity makes.
A *feature* (maps, child workflows, failure handlers, redrive, suspension, waits,
conditions, pools, …) takes part in them through the hooks below, and nowhere else.
:class:`~whimbrel.engine.engine.Engine` holds the features in one
:class:`~whimbrel.engine.hooks.Hooks` dispatcher (built from ``FEATURES`` in
``engine.py``), which asks each hook of the features that take it, in that order: a hook
that *takes over* stops at the first truthy answer (the features after it, and the
core's own handling, are not asked), a *first answer* hook at the first answer that is
not None; an *observing* hook is asked of every taker (hooks.py ``KINDS``).

Each feature is one module with one class that subclasses :class:`Feature` (for the
do-nothing defaults) and overrides the hooks it needs; it sees the engine only as
:class:`Core`. No feature imports another; one that needs another's operation asks for
it by a protocol declared here (``core.feature(Redriving).redrive(…)``).

Pools (engine/pools.py) take ``admit``: asked in ``flow.advance`` before a move that
starts an attempt (to QUEUED or RUNNING, or READY and claimable for a pull one), and in
``starting.start`` and a redrive before a run goes RUNNING; and ``attempt_ended``, asked
after every write that ends an attempt, whoever makes it (its own report, a cancel, a
time-out), to give back what the attempt held. A claim asks nothing: a pull attempt took
its slot when it became claimable, so a worker polling a full pool writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    ParamSpec,
    Protocol,
    TypeVar,
    runtime_checkable,
)

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, Transition
from whimbrel.engine.run_reads import RunRead as RunRead  # re-exported for the features
from whimbrel.engine.run_reads import RunRows as RunRows

if TYPE_CHECKING:
    # The core's parts by their protocols (core_parts.py), never their modules: each part
    # imports this one, so naming a part's class here would close a circle.
    from whimbrel.engine.code_steps import StepSpecs
    from whimbrel.engine.core_parts import (
        ClaimsPart,
        DefinitionsPart,
        EndingPart,
        FlowPart,
        HandoverPart,
        HeartbeatsPart,
        InputsPart,
        KnownPart,
        LaunchesPart,
        MovesPart,
        ReadsPart,
        StartingPart,
    )
    from whimbrel.engine.latest import LatestVersions
    from whimbrel.engine.leases import SweepLeases
    from whimbrel.engine.metrics import EngineMetrics, Incidents
    from whimbrel.engine.ports import Launcher, StorePort
    from whimbrel.engine.threads import Threads

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")


def _nothing(_: Any) -> None:
    return None


@dataclass(frozen=True)
class Admission:
    """A feature's answer to ``admit``.

    Attributes:
        go: True: the move goes on, also writing ``changes`` (the slot it took). False:
            it is held — an attempt stops at READY (not claimable), a run is created
            QUEUED — also writing ``changes``; the feature moves it on later.
        landed: called with the item as written (held where it already was: as it is)
            once the write landed.
        lost: called when the write lost, with the item as it is now (None: missing):
            what the admission took is given back.
    """

    go: bool
    changes: Mapping[str, Any] = field(default_factory=dict)
    landed: Callable[[Any], None] = _nothing
    lost: Callable[[Any], None] = _nothing


class HooksPart(Protocol):
    """``hooks.py``'s ``Hooks``: the features' hooks, asked of their takers in the order
    of ``FEATURES`` (declared here, beside ``Feature``, since hooks.py imports it)."""

    features: tuple[Feature, ...]

    def take_over(self, hook: Callable[Concatenate[Feature, P], bool],
                  *args: P.args, **kwargs: P.kwargs) -> bool: ...
    def first_answer(self, hook: Callable[Concatenate[Feature, P], T | None],
                     *args: P.args, **kwargs: P.kwargs) -> T | None: ...
    def observe(self, hook: Callable[Concatenate[Feature, P], T],
                *args: P.args, **kwargs: P.kwargs) -> list[T]: ...
    def shape(self, hook: Callable[Concatenate[Feature, P], T],
              *args: P.args, **kwargs: P.kwargs) -> T: ...
    def takers(self, hook: str) -> tuple[Feature, ...]: ...
    def table(self) -> str: ...


class Core(Protocol):
    """What a feature (and each part) sees of the engine: its settings and its parts.
    Every move runs the features' hooks, so a feature that calls one is itself seen by
    the others. A part's operations are reached one way: ``core.<part>.op(…)``; each
    part is typed by its protocol (core_parts.py), read-only, so this module imports no
    part's module and no part closes a circle through it."""

    store: StorePort
    #: The features' hooks, asked in the order of ``FEATURES`` (hooks.py).
    @property
    def hooks(self) -> HooksPart: ...
    clock: Callable[[], float]
    actor: str
    launchers: dict[str, Launcher]
    reconcile_grace_seconds: float
    in_flight_grace_seconds: float
    retention_days: float | None
    metrics: EngineMetrics
    incidents: Incidents
    steps: StepSpecs
    latest: LatestVersions

    #: Called with the definition of every run this engine starts, before its roots
    #: are created (the client: a worker for what it starts, client/_worker.py).
    starting_hooks: list[Callable[[WorkflowDefinition], None]]

    # -- plumbing
    @property
    def definitions(self) -> DefinitionsPart: ...
    @property
    def reads(self) -> ReadsPart: ...
    @property
    def known(self) -> KnownPart: ...
    threads: Threads
    # -- the core's moves
    @property
    def starting(self) -> StartingPart: ...
    @property
    def moves(self) -> MovesPart: ...
    @property
    def flow(self) -> FlowPart: ...
    @property
    def launches(self) -> LaunchesPart: ...
    @property
    def ending(self) -> EndingPart: ...
    @property
    def heartbeats(self) -> HeartbeatsPart: ...
    @property
    def claims(self) -> ClaimsPart: ...
    @property
    def handover(self) -> HandoverPart: ...
    @property
    def inputs(self) -> InputsPart: ...

    def feature(self, kind: type[T]) -> T: ...


@runtime_checkable
class Redriving(Protocol):
    """What a feature may ask of the redrive feature without importing it (a child run
    redriven with its parent's attempt): ``core.feature(Redriving).redrive(…)``."""

    def redrive(self, wx: str, *, actor: str | None = None,
                parent: str | None = None) -> WorkflowRecord: ...

    def followups(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool: ...


class Feature(Protocol):
    """The hooks a feature may take part in; every default does nothing.

    How each is asked (take over, first answer, observe each, shape each) is written
    once, in hooks.py ``KINDS``.
    """

    # -- registration --------------------------------------------------------------------

    def registering(self, defn: WorkflowDefinition) -> list[str]:
        """Problems of a valid definition about to be registered that only the
        registered ones show (a cycle of child workflows); none: it may be stored."""
        return []

    # -- start ---------------------------------------------------------------------------

    def begin(self, record: WorkflowRecord) -> WorkflowRecord:
        """A new run's workflow item before its create write: add to it (tracing
        records the run's trace context)."""
        return record

    def started(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> None:
        """A start (or its replay) wrote what it writes; ``wf`` as the start saw it (a
        code run's first decision: engine/code_runs.py)."""
        return None

    def drives(self, spec: ActivityDefinition, name: str) -> str | None:
        """Whether only the engine moves attempts of ``name`` (a map's own row, a child
        run's attempt): what it is, for the refusal of an outside caller's move; such a
        root is created REQUESTED and advanced (never launched directly)."""
        return None

    def new_attempt(self, defn: WorkflowDefinition, record: ActivityRecord) -> ActivityRecord:
        """Shape a new attempt before it is created."""
        return record

    # -- advance -------------------------------------------------------------------------

    def advance(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str, attempt: int,
                source: ActivityState, rows: RunRows) -> bool:
        """Take over moving an attempt on (a condition skips; a map expands). ``rows``:
        the run's attempt rows, listed once for every attempt the same hand-off moves."""
        return False

    def admit(self, wf: WorkflowRecord, defn: WorkflowDefinition,
              item: ActivityRecord | None, changes: Mapping[str, Any]) -> Admission | None:
        """Whether a move that starts ``item`` (QUEUED or RUNNING; READY and claimable
        for a pull attempt) — or, ``item`` None, the run ``wf`` (its start, a redrive) —
        may go now (None: not this feature's business). ``changes``: what the move
        writes so far."""
        return None

    def ready(self, spec: ActivityDefinition, wf: WorkflowRecord, now: float,
              changes: dict[str, Any]) -> None:
        """Add to (or take from) the write that makes an attempt READY."""
        return None

    def readied(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                item: ActivityRecord) -> None:
        """An attempt just became READY (by this engine's write)."""
        return None

    def refuse(self, spec: ActivityDefinition, item: ActivityRecord,
               verb: Transition) -> None:
        """Raise when ``verb`` may not be applied to ``item`` by a caller's move."""
        return None

    # -- after a move --------------------------------------------------------------------

    def reads_run_after(self, item: ActivityRecord, defn: WorkflowDefinition,
                        verb: Transition) -> bool:
        """Whether the follow-ups of ``verb`` (a move that ends ``item``) read the run
        themselves, after a write of their own (a map item's next item: its guard read
        serves both); the core then reads nothing ahead of them."""
        return False

    def follow_up(self, item: ActivityRecord, run: RunRead) -> bool:
        """Take over the follow-ups of an ended attempt."""
        return False

    def completed(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str) -> None:
        """``name`` completed (or counts as completed) and its dependents were released."""
        return None

    def moved(self, item: ActivityRecord) -> None:
        """After a move and all its follow-ups."""
        return None

    def launched(self, item: ActivityRecord) -> None:
        """An attempt was handed to its launcher (one that failed is a move instead)."""
        return None

    def attempt_ended(self, item: ActivityRecord) -> None:
        """A write that ended an attempt landed (``item`` as written), whoever made it:
        its own report, a cancel, a time-out, a skip (before the move's follow-ups); and
        a late report kept on a timed-out one (its code stopped: engine/late.py)."""
        return None

    # -- failure -------------------------------------------------------------------------

    def before_retry(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     item: ActivityRecord) -> bool:
        """Take over an ended-unsuccessfully attempt before its retry policy is asked."""
        return False

    def failed_for_good(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                        item: ActivityRecord, why: str) -> bool:
        """Take over an attempt with no retry left (otherwise the workflow fails)."""
        return False

    def waiting_attempt(self, wf: WorkflowRecord, name: str) -> int | None:
        """The attempt of ``name`` that waits for its upstreams, when not the first."""
        return None

    # -- stop and end --------------------------------------------------------------------

    def stop(self, act: ActivityRecord, defn: WorkflowDefinition, *,
             ask_running: bool) -> bool | None:
        """Take over stopping an attempt: True while it may still run, None: not mine."""
        return None

    def cancelling(self, wf: WorkflowRecord, defn: WorkflowDefinition, *,
                   again: bool, actor: str | None = None) -> bool:
        """Take over settling a run in CANCEL_REQUESTED — stopping its attempts and its
        end — (a code run's clean-up: engine/code_cancel.py); ``again``: a caller
        cancelled it once more (``actor``: recorded with what that does)."""
        return False

    def check_at_end(self, wf: WorkflowRecord, now: float) -> float | None:
        """Keep a check time on an ended run (visited until ``after_end`` has run)."""
        return None

    def ended(self, wf: WorkflowRecord) -> None:
        """A run's terminal write landed (``wf`` as written)."""
        return None

    def after_end(self, wf: WorkflowRecord) -> None:
        """A run that kept a check time has ended; its follow-ups."""
        return None

    # -- reconcile and sweep -------------------------------------------------------------

    def finish_start(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        """A RUNNING run's reconcile visit, first: finish a start-like pass a crash cut
        short (a redrive's phase one). True: done, and the visit ends there."""
        return False

    def reconcile(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        """A live run's reconcile visit: repair this feature's part; True if it did."""
        return False

    def sweep(self, now: float, leases: SweepLeases) -> None:
        """Once per sweep pass, after the due timers and the reconcile visits. A sharded
        index is swept only on the shards whose lease the pass holds
        (``leases.hold(shard)``, taken where something is due)."""
        return None

    def due(self, item: ActivityRecord, defn: WorkflowDefinition, run: Callable[[], Any],
            now: float, actor: str) -> str | None:
        """A due deadline of an attempt not launched (REQUESTED, READY): take it over
        (``"held"``, ``"fired"``, ``"gone"``), or None for the sweep's own handling.
        ``run()`` reads the workflow item (once; None if it is gone)."""
        return None
