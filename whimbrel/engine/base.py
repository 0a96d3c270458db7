"""The engine's plumbing: definitions, reads, and what it last saw of each activity.

The first part of the core (docs/architecture.md, "The engine"): the other parts are
functions over it (``starting.py``, ``moves.py``, ``flow.py``, ``ending.py``), and
:class:`~whimbrel.engine.engine.Engine` adds the features.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from whimbrel.contract import checks
from whimbrel.contract.code.definition import CodeDefinition
from whimbrel.contract.dataflow import items_prefix
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import (
    ActivityNotFound,
    DefinitionNotFound,
    InvalidDefinition,
    InvalidInput,
    WorkflowNotFound,
)
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.outcomes import map_items, map_output
from whimbrel.contract.payloads import PayloadLimits, is_ref
from whimbrel.contract.records import (
    ActivityRecord,
    Changes,
    DefinitionRecord,
    WorkflowRecord,
    latest_of,
)
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.engine import rules
from whimbrel.engine.code_steps import StepSpecs
from whimbrel.engine.dataviews import run_view, with_child
from whimbrel.engine.latest import LatestVersions
from whimbrel.engine.metrics import NO_METRICS, EngineMetrics, Incidents, report_activity_end
from whimbrel.engine.payloads import resolved, resolved_all
from whimbrel.engine.ports import Clock, Launcher, StorePort
from whimbrel.engine.shared_reads import SharedReads
from whimbrel.engine.threads import submit_or_run
from whimbrel.engine.views import ActivityExec, WorkflowExec
from whimbrel.settings import DEFAULT_RETENTION_DAYS

if TYPE_CHECKING:
    from whimbrel.engine.feature import Feature

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState
T = TypeVar("T")
R = TypeVar("R")

#: First reconcile visit after a workflow starts; later visits back off (sweep.py).
RECONCILE_GRACE_SECONDS = 120.0
#: How long past a running attempt's deadline the heartbeat listener waits before it
#: times the attempt out: a Simple API result row written before the deadline may still
#: be in flight on the stream (docs/architecture.md, "Results written in time").
IN_FLIGHT_GRACE_SECONDS = 5.0

#: How many activity items an engine remembers from its own writes and reads.
KNOWN_ITEMS = 4096
#: How many runs' inputs kept apart (up to 128 KB each) an engine keeps once read.
KNOWN_INPUTS = 64

#: From this many dependents on, one completion readies and launches them in parallel.
PARALLEL_FANOUT = 8


class EngineBase:
    """State shared by the engine's parts. Thread-safe; share one per process.

    Args:
        store: the tables.
        clock: returns epoch seconds (inject one to drive time in tests).
        launchers: how activities start, by launcher kind.
        actor: recorded in the history of every move this engine makes.
        reconcile_grace_seconds: first reconcile visit after a start.
        in_flight_grace_seconds: how long past a running attempt's deadline it is timed
            out (results written in time may still be on their way).
        retention_days: how long ended runs are kept when their definition does not say
            (None: forever).
        metrics: told of every workflow and attempt end this engine makes (none: off).
    """

    #: The features (set by :class:`~whimbrel.engine.engine.Engine`); asked at
    #: registration here, at every hook elsewhere.
    features: tuple[Feature, ...] = ()

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
        self.in_flight_grace_seconds = in_flight_grace_seconds
        self.metrics: EngineMetrics = metrics or NO_METRICS
        #: Trouble survived or given up on (engine/metrics.py ``Incidents``).
        self.incidents = Incidents()
        self.clock = clock
        self.launchers: dict[str, Launcher] = dict(launchers or {})
        self.actor = actor
        self.reconcile_grace_seconds = reconcile_grace_seconds
        self.retention_days = retention_days
        self._definitions: dict[tuple[str, int], WorkflowDefinition] = {}
        self.steps = StepSpecs(store)
        #: Which version a start that names none runs (engine/latest.py).
        self.latest = LatestVersions(store)
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="whimbrel-io")
        # Wide fan-outs: one completion readies and launches many dependents. Their
        # writes are independent, so they go out in parallel (a separate pool: the
        # caller waits on it, and nothing running on it waits on another task).
        self._fanout = ThreadPoolExecutor(max_workers=16, thread_name_prefix="whimbrel-fanout")
        # The last image of activity items this engine wrote or read. Used only as the
        # *expected* state of the next conditional write, never as the truth: a stale
        # entry makes that write lose, and the store hands back the item as it is.
        self._known: OrderedDict[str, ActivityRecord] = OrderedDict()
        # Workflow reads started for the run that follows (a claim, a launch).
        self._prefetch: OrderedDict[str, Future[WorkflowRecord]] = OrderedDict()
        # Inputs the store keeps apart from their run's item, once read (they never change).
        self._inputs: OrderedDict[str, str | None] = OrderedDict()
        #: Guard reads of a run, shared by this engine's callers (engine/shared_reads.py).
        self.guard_reads: SharedReads[WorkflowRecord] = SharedReads(self.workflow)

    # -- definitions -----------------------------------------------------------------

    def register(self, definition: WorkflowDefinition) -> int:
        """Store ``definition`` as a new version (or return the version it equals).

        Raises:
            InvalidInput: not a ``WorkflowDefinition``.
            InvalidDefinition: listing every problem.
        """
        if not isinstance(definition, WorkflowDefinition):
            raise InvalidInput(f"a WorkflowDefinition is needed, not {type(definition).__name__}"
                               " (load text with WorkflowDefinition.from_yaml/from_json)",
                               field="definition")
        definition.validate()
        problems = [p for f in self.features for p in f.registering(definition)]
        if problems:
            raise InvalidDefinition(definition.name, problems)
        text = definition.to_json()
        while True:
            latest = self.store.cold.latest_definition(definition.name)
            if latest is not None and latest.definition == text:
                return latest.version
            version = latest.version + 1 if latest is not None else 1
            record = DefinitionRecord(definition.name, version, text, self.clock(),
                                      definition.description or None)
            # Copies first, version after: a start never sees a number whose version
            # it cannot read back the moment this returns (Store.point_latest).
            self.store.cold.point_latest(definition.name, version)
            if self.store.cold.put_definition(record):
                with self._lock:
                    self._definitions[(definition.name, version)] = definition
                return version

    def definition(self, name: str, version: int | None = None) -> tuple[int, WorkflowDefinition]:
        """The definition ``name`` at ``version`` (latest when None).

        Raises:
            DefinitionNotFound: no such name or version.
            InvalidInput: the name or version is malformed.
        """
        version = checks.version(version)
        checks.workflow_name(name)
        if version is not None:
            cached = self._parsed(name, version)
            if cached is not None:
                return version, cached
            item = self.store.cold.get_definition(name, version)
        else:
            found = self.latest.resolve(name, lambda v: self._parsed(name, v))
            if isinstance(found, tuple):
                return found
            item = found
        if item is None:
            raise DefinitionNotFound(name, version)
        cached = self._parsed(name, item.version)  # a version never changes: parse once
        if cached is not None:
            return item.version, cached
        defn = WorkflowDefinition.from_json(item.definition)
        with self._lock:
            self._definitions[(name, item.version)] = defn
        return item.version, defn

    def _parsed(self, name: str, version: int) -> WorkflowDefinition | None:
        with self._lock:
            return self._definitions.get((name, version))

    def definition_of(self, record: ActivityRecord | WorkflowRecord) -> WorkflowDefinition:
        """The definition a run captured when it started."""
        version = record.version if isinstance(record, WorkflowRecord) \
            else record.workflow_version
        if version is None:
            version = self.workflow(record.workflow_exec_id).version
        defn = self.definition(record.workflow_name, version)[1]
        # A code run's steps are known from its rows (engine/code_steps.py).
        return self.steps.bind(defn, record) if isinstance(defn, CodeDefinition) else defn

    def retention(self, defn: WorkflowDefinition) -> float | None:
        """Seconds an ended run of ``defn`` is kept (None: forever)."""
        return rules.retention_seconds(defn, self.retention_days)

    # -- what this engine last saw of an activity -------------------------------------

    def remember(self, item: ActivityRecord | None) -> None:
        if item is None or item.state is None:
            return
        with self._lock:
            self._known[item.activity_exec_id] = item
            self._known.move_to_end(item.activity_exec_id)
            while len(self._known) > KNOWN_ITEMS:
                self._known.popitem(last=False)

    def remembered(self, aeid: str) -> ActivityRecord | None:
        """What this engine last wrote or read of ``aeid`` (may be stale), or None."""
        with self._lock:
            return self._known.get(aeid)

    def remembered_activity(self, aeid: str) -> ActivityExec | None:
        item = self.remembered(aeid)
        return ActivityExec.from_record(resolved(self, item)) if item is not None else None

    def each(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(x) for x in items]``, in parallel once a fan-out is wide enough to gain.

        Narrow fan-outs stay in this thread, in order (the crash-point tests count on a
        deterministic write order for them). Every call finishes before this returns;
        the first exception is then raised.
        """
        if len(items) < PARALLEL_FANOUT:
            return [fn(x) for x in items]
        futures = [submit_or_run(self._fanout, fn, x) for x in items]
        wait(futures)
        return [f.result() for f in futures]

    def prefetched_workflow(self, aeid: str, read: Future[WorkflowRecord]) -> None:
        """Keep a read of ``aeid``'s workflow item, started ahead, for its run."""
        with self._lock:
            self._prefetch[aeid] = read
            while len(self._prefetch) > KNOWN_ITEMS:
                self._prefetch.popitem(last=False)

    def take_prefetched_workflow(self, aeid: str) -> Future[WorkflowRecord] | None:
        with self._lock:
            return self._prefetch.pop(aeid, None)

    def in_background(self, fn: Callable[[str], T], arg: str) -> Future[T]:
        """Run a read on the engine's I/O pool, to overlap it with a write."""
        return submit_or_run(self._pool, fn, arg)

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run independent writes on the engine's I/O pool (a start's phase one)."""
        return submit_or_run(self._pool, fn, *args)

    def move(self, aeid: str, expected: ActivityState, path: Sequence[ActivityState],
             changes: Changes, *, actor: str | None = None,
             due_by: float | None = None, claimed: bool = False,
             written_by: float | None = None, late_at: float | None = None,
             ) -> ActivityRecord:
        """``store.move_activity`` that remembers the new image.

        Raises:
            StateConflict: the activity was not in ``expected`` (``current`` says where).
        """
        moved = self.store.move_activity(aeid, expected, path, changes, now=self.clock(),
                                         actor=actor or self.actor, due_by=due_by,
                                         claimed=claimed, written_by=written_by,
                                         late_at=late_at)
        self.remember(moved)
        if path[-1].is_terminal:
            report_activity_end(self.metrics, moved)
            for feature in self.features:  # e.g. its pool slot is given back (pools.py)
                feature.attempt_ended(moved)
        return moved

    # -- reads ---------------------------------------------------------------------------

    def workflow(self, wx: str) -> WorkflowRecord:
        """The workflow item (consistent read).

        Raises:
            WorkflowNotFound: no such execution.
        """
        checks.text(wx, "workflow_exec_id")
        wf = self.store.get_workflow(wx)
        if wf is None:
            raise WorkflowNotFound(wx)
        return wf

    def workflow_after(self, wx: str) -> WorkflowRecord:
        """A consistent read of the workflow item begun after this call: a guard's read
        (created first, read second), shared with this engine's other guards of the run.

        Raises:
            WorkflowNotFound: no such execution.
        """
        return self.guard_reads.read_after(wx)

    def run_input(self, wf: WorkflowRecord) -> str | None:
        """The run's input (JSON text, None when it has none): on the run's item, or, for
        an input the store keeps apart (``input_apart``), read once per process — only
        where it is needed (an attempt's input, a map over the input, the run's status)."""
        if not wf.input_apart:
            return self.payload(wf.input, "input")
        wx = wf.workflow_exec_id
        with self._lock:
            if wx in self._inputs:
                self._inputs.move_to_end(wx)
                return self.payload(self._inputs[wx], "input")
        text = self.store.workflow_input(wx)  # kept as stored: S3's cache bounds bytes
        if text is None:
            log.warning("workflow %s: its input, kept apart, is gone (expired?)", wx)
        with self._lock:
            self._inputs[wx] = text
            while len(self._inputs) > KNOWN_INPUTS:
                self._inputs.popitem(last=False)
        return self.payload(text, "input")

    @property
    def limits(self) -> PayloadLimits:
        """How large a payload may be (a payload bucket raises the limits)."""
        return self.store.payload_limits

    def payload(self, text: str | None, field: str = "payload") -> str | None:
        """A payload's JSON text whole (a reference read once per process; readers only,
        never a guard). Raises ``PayloadMissing`` when its object cannot be read."""
        return self.store.payload_text(text, field)

    def with_input(self, wf: WorkflowRecord) -> WorkflowRecord:
        """``wf`` with its input on it (read when it is kept apart): what a view shows."""
        if is_ref(wf.output):
            wf = replace(wf, output=self.payload(wf.output, "output"))
        return replace(wf, input=self.run_input(wf)) if wf.input_apart or is_ref(wf.input) \
            else wf

    def activity(self, aeid: str) -> ActivityRecord:
        """The activity item (consistent read), remembered.

        Raises:
            ActivityNotFound: no such attempt.
            InvalidInput: not an activity execution id.
        """
        parse_activity_exec_id(aeid)
        item = self.store.get_activity(aeid)
        if item is None:
            raise ActivityNotFound(aeid)
        self.remember(item)
        return item

    def get_workflow(self, wx: str, *, with_activities: bool = True) -> WorkflowExec:
        wf = self.with_input(self.workflow(wx))
        if not with_activities:
            return WorkflowExec.from_record(wf)
        try:
            defn: WorkflowDefinition | None = self.definition_of(wf)
        except DefinitionNotFound:
            defn = None  # still show the run (without map progress or child links)
        return run_view(defn, wf, resolved_all(self, self.store.list_activities(wx)))

    def get_activity(self, aeid: str) -> ActivityExec:
        item = self.activity(aeid)
        view = ActivityExec.from_record(resolved(self, item))
        if item.state is ActivityState.COMPLETED and item.map_size and item.output is None:
            # A map's list too large for its row is kept on its items: never None here.
            items = map_items(resolved_all(self, self.store.list_activities(
                item.workflow_exec_id, items_prefix(item.activity_name),
                map_size=item.map_size)), item.activity_name)
            view = replace(view, output=map_output(items, item.map_size))
        try:
            defn = self.definition_of(item)
        except DefinitionNotFound:
            return view  # still show the attempt (without its child link)
        return with_child(defn, view, item.child_workflow_exec_id)

    def latest_attempts(self, wx: str) -> dict[str, ActivityRecord]:
        return latest_of(self.store.list_activities(wx))

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._fanout.shutdown(wait=False)
