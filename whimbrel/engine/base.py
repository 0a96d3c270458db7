"""The engine's plumbing: definitions, reads, and what it last saw of each activity.

:class:`~whimbrel.engine.engine.Engine` builds on this (``ending.py`` adds the
workflow-level moves, ``engine.py`` the start and the activity moves).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

from pynamodb.expressions.update import Action

from whimbrel.contract import checks
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import (
    ActivityNotFound,
    DefinitionNotFound,
    InvalidInput,
    WorkflowNotFound,
)
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.engine.ports import Clock, Launcher
from whimbrel.engine.views import ActivityExec, WorkflowExec
from whimbrel.store.models import ActivityExecModel, WorkflowExecModel
from whimbrel.store.store import Store

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState
T = TypeVar("T")
R = TypeVar("R")

#: First reconcile visit after a workflow starts; later visits back off (sweep.py).
RECONCILE_GRACE_SECONDS = 120.0

#: How many activity items an engine remembers from its own writes and reads.
KNOWN_ITEMS = 4096

#: From this many dependents on, one completion readies and launches them in parallel.
PARALLEL_FANOUT = 8


class EngineBase:
    """State shared by the engine's parts. Thread-safe; share one per process."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock,
        launchers: Mapping[str, Launcher] | None = None,
        actor: str = "engine",
        reconcile_grace_seconds: float = RECONCILE_GRACE_SECONDS,
    ) -> None:
        self.store = store
        self.clock = clock
        self.launchers: dict[str, Launcher] = dict(launchers or {})
        self.actor = actor
        self.reconcile_grace_seconds = reconcile_grace_seconds
        self._definitions: dict[tuple[str, int], WorkflowDefinition] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="whimbrel-io")
        # Wide fan-outs: one completion readies and launches many dependents. Their
        # writes are independent, so they go out in parallel (a separate pool: the
        # caller waits on it, and nothing running on it waits on another task).
        self._fanout = ThreadPoolExecutor(max_workers=16, thread_name_prefix="whimbrel-fanout")
        # The last image of activity items this engine wrote or read. Used only as the
        # *expected* state of the next conditional write, never as the truth: a stale
        # entry makes that write fail its condition, and the engine then reads the item
        # (transition()). It saves the read before each move on the hot path.
        self._known: OrderedDict[str, ActivityExecModel] = OrderedDict()
        # Workflow reads a claim started for the run that follows (pull path).
        self._prefetch: OrderedDict[str, Future[WorkflowExecModel]] = OrderedDict()

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
        text = definition.to_json()
        while True:
            latest = self.store.latest_definition(definition.name)
            if latest is not None and latest.definition == text:
                return int(latest.version)
            version = int(latest.version) + 1 if latest is not None else 1
            if self.store.put_definition(definition.name, version, text, self.clock(),
                                         definition.description):
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
            with self._lock:
                cached = self._definitions.get((name, version))
            if cached is not None:
                return version, cached
            item = self.store.get_definition(name, version)
        else:
            item = self.store.latest_definition(name)
        if item is None:
            raise DefinitionNotFound(name, version)
        defn = WorkflowDefinition.from_json(item.definition)
        with self._lock:
            self._definitions[(name, int(item.version))] = defn
        return int(item.version), defn

    # -- what this engine last saw of an activity -------------------------------------

    def _workflow_version(self, item: ActivityExecModel) -> int:
        if item.workflow_version is not None:
            return int(item.workflow_version)
        wf = self._workflow(item.workflow_exec_id)
        return int(wf.version)

    def _remember(self, item: ActivityExecModel | None) -> None:
        if item is None:
            return
        with self._lock:
            self._known[item.activity_exec_id] = item
            self._known.move_to_end(item.activity_exec_id)
            while len(self._known) > KNOWN_ITEMS:
                self._known.popitem(last=False)

    def _remembered(self, aeid: str) -> ActivityExecModel | None:
        with self._lock:
            return self._known.get(aeid)

    def remembered_activity(self, aeid: str) -> ActivityExec | None:
        """What this engine last wrote or read of ``aeid`` (may be stale), or None."""
        item = self._remembered(aeid)
        return ActivityExec.from_model(item) if item is not None else None

    def _each(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(x) for x in items]``, in parallel once a fan-out is wide enough to gain.

        Narrow fan-outs stay in this thread, in order (the crash-point tests count on a
        deterministic write order for them). Every call finishes before this returns;
        the first exception is then raised.
        """
        if len(items) < PARALLEL_FANOUT:
            return [fn(x) for x in items]
        futures = [self._fanout.submit(fn, x) for x in items]
        wait(futures)
        return [f.result() for f in futures]

    def prefetched_workflow(self, aeid: str, read: Future[WorkflowExecModel]) -> None:
        """Keep a read of ``aeid``'s workflow item, started by a claim, for its run."""
        with self._lock:
            self._prefetch[aeid] = read
            while len(self._prefetch) > KNOWN_ITEMS:
                self._prefetch.popitem(last=False)

    def take_prefetched_workflow(self, aeid: str) -> Future[WorkflowExecModel] | None:
        with self._lock:
            return self._prefetch.pop(aeid, None)

    def read_in_background(self, fn: Callable[[str], T], arg: str) -> Future[T]:
        """Run a read on the engine's I/O pool, to overlap it with a write."""
        return self._pool.submit(fn, arg)

    def _move(self, aeid: str, expected: ActivityState, new_state: ActivityState, *,
              actor: str | None = None, extra: Iterable[Action] = ()) -> ActivityExecModel:
        """``store.move_activity`` that remembers the new image (ReturnValues ALL_NEW)."""
        moved = self.store.move_activity(aeid, expected.value, new_state.value, self.clock(),
                                         actor=actor or self.actor, extra=extra)
        self._remember(moved)
        return moved

    # -- reads ---------------------------------------------------------------------------

    def _workflow(self, wx: str) -> WorkflowExecModel:
        checks.text(wx, "workflow_exec_id")
        wf = self.store.get_workflow(wx)
        if wf is None:
            raise WorkflowNotFound(wx)
        return wf

    def _activity(self, aeid: str) -> ActivityExecModel:
        parse_activity_exec_id(aeid)
        item = self.store.get_activity(aeid)
        if item is None:
            raise ActivityNotFound(aeid)
        self._remember(item)
        return item

    def get_workflow(self, wx: str, *, with_activities: bool = True) -> WorkflowExec:
        wf = self._workflow(wx)
        acts: tuple[ActivityExec, ...] = ()
        if with_activities:
            acts = tuple(ActivityExec.from_model(a) for a in self.store.list_activities(wx))
        return WorkflowExec.from_model(wf, acts)

    def get_activity(self, aeid: str) -> ActivityExec:
        return ActivityExec.from_model(self._activity(aeid))

    def latest_attempts(self, wx: str) -> dict[str, ActivityExecModel]:
        latest: dict[str, ActivityExecModel] = {}
        for act in self.store.list_activities(wx):
            cur = latest.get(act.activity_name)
            if cur is None or int(act.attempt) > int(cur.attempt):
                latest[act.activity_name] = act
        return latest

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._fanout.shutdown(wait=False)

