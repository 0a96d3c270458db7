"""Waiting for a pool (engine/pools.py): a held attempt's or QUEUED run's entry among its
pool's waiters and its second look at its slots, its admission when its turn comes, and
the wake a release (or a pacer look) owes the first waiters."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import StateConflict
from whimbrel.contract.ids import shard_of
from whimbrel.contract.pools import (
    WAIT_SHARDS,
    Waiter,
    is_run_pool,
    probe_order,
    run_pool,
    slot_ref,
    waiter_entry,
)
from whimbrel.contract.priority import DEFAULT_PRIORITY, order_text
from whimbrel.contract.records import REMOVE, ActivityRecord, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_NOT_LAUNCHED,
    WORKFLOW_WAITING,
    ActivityState,
    WorkflowState,
)
from whimbrel.engine import admission, flow
from whimbrel.engine.feature import Core
from whimbrel.engine.pool_keys import PoolKeyFailed, attempt_pool, fail_keyless
from whimbrel.engine.pool_ledger import Ledger, Limits, Taken
from whimbrel.engine.pool_pacer import Pacer
from whimbrel.engine.pool_port import PoolPort

A = ActivityState
W = WorkflowState

#: Waiters one release or pacer look tries before it stops (stale entries are skipped
#: and deleted on the way).
WAKE_TRIES = 8


class Queue:
    """The waiters of every pool, for one engine. Thread-safe."""

    def __init__(self, core: Core, ledger: Ledger) -> None:
        self.core = core
        self.store = core.store
        self.pool_port = core.store.part(PoolPort)
        self.ledger = ledger
        self._lock = threading.Lock()
        #: holder -> the slot a release hands it (tried first by its admission).
        self._prefer: dict[str, int] = {}
        self._local = threading.local()
        #: This process's own looks at rate-held waiters (the sweep's are the fallback).
        self.pacer = Pacer(core.clock, lambda pool: self.wake(pool, None))

    def take(self, pool: str, limits: Limits, holder: str, now: float) -> Taken:
        """A slot and a token for ``holder`` (a slot a release handed it first)."""
        with self._lock:
            handed = self._prefer.pop(holder, None)
        return self.ledger.take(pool, limits, holder, now, handed)

    def start_queued(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     taken: Taken) -> bool:
        """QUEUED → RUNNING with the slot ``taken``, then the start's rows and launches."""
        pool = run_pool(wf.workflow_name)
        assert taken.k is not None
        try:
            # Only a run still QUEUED: a cancel or a deadline that came first ends it.
            moved = self.store.move_workflow(
                wf.workflow_exec_id, WORKFLOW_WAITING, W.RUNNING,
                {"pool_slot": slot_ref(pool, taken.k)}, now=self.core.clock(),
                actor=self.core.actor, workflow_name=wf.workflow_name)
        except StateConflict as lost:
            self.ledger.give_back(pool, taken, wf.workflow_exec_id,
                                  getattr(lost.current, "pool_slot", None))
            return False
        self.pool_port.delete_waiter(self.waiter(pool, wf.workflow_exec_id, self.run_order(wf)))
        self.core.starting.resume_start(moved, defn)  # its rows, then its roots (starting.py)
        return True

    # -- waiting -----------------------------------------------------------------------

    @staticmethod
    def run_order(wf: WorkflowRecord) -> str:
        return order_text(DEFAULT_PRIORITY if wf.priority is None else wf.priority,
                          wf.created_epoch)

    @staticmethod
    def waiter(pool: str, holder: str, order: str) -> Waiter:
        return Waiter(pool, shard_of(holder, WAIT_SHARDS), waiter_entry(order, holder), holder)

    def wait(self, pool: str, holder: str, order: str, kind: str, retry_at: float | None,
             retry: Callable[[], Any]) -> None:
        """Enter ``holder`` among ``pool``'s waiters; then (a fresh wait) look once more."""
        self.pool_port.put_waiter(pool, holder, order, kind=kind, expires_epoch=None)
        if retry_at is not None:
            self.pool_port.arm_pacer(pool, retry_at)  # the sweep looks when a token is there
            self.pacer.arm(pool, retry_at)  # and so does this process, while it lives
            return
        if getattr(self._local, "quiet", False):
            return  # re-held by a wake or by this very look: no second look
        probes = self.probes(pool, holder)
        if probes and self.pool_port.free_among(pool, probes):
            self._local.quiet = True
            try:
                retry()
            finally:
                self._local.quiet = False

    def probes(self, pool: str, holder: str) -> list[int]:
        if is_run_pool(pool):
            wf = self.store.get_workflow(holder)
            slots = self.core.definitions.definition_of(wf).max_running if wf is not None else None
        else:
            info = self.ledger.settings(pool)
            slots = info.slots if info is not None else None
        return list(probe_order(slots, holder)) if slots else []

    def retry_activity(self, aeid: str) -> str:
        """Admit a waiting attempt now if it can be: ``"admitted"``, ``"held"`` or
        ``"gone"`` (it waits no more)."""
        item = self.store.get_activity(aeid)
        if item is None or item.state not in ACTIVITY_NOT_LAUNCHED \
                or item.pool_slot is not None:
            return "gone"
        self.core.known.remember(item)  # its ready_epoch: where its entry is (admission.py)
        wf = self.store.get_workflow(item.workflow_exec_id)
        if wf is None or wf.state.is_terminal or not flow.proceeds(wf):
            return "gone"
        if wf.state is not W.RUNNING:
            return "skip"  # SUSPENDED: its resume's reconcile visit admits it
        defn = self.core.definitions.definition_of(wf)
        spec = defn.activity(item.activity_name)
        # Only whether this process is a worker for it: ``advance`` decides the launch
        # (and promises its thread) itself.
        if spec.launcher.is_pull or admission.leaves_for_worker(self.core, spec,
                                                                launch=False):
            return self.admit_pull(wf, defn, spec, item)  # claimable, its slot held
        self.core.flow.advance(wf, defn, item.activity_name, item.attempt, item.state)
        fresh = self.store.get_activity(aeid)
        return "admitted" if fresh is not None and fresh.pool_wait is None else "held"

    def admit_pull(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                   spec: ActivityDefinition, item: ActivityRecord) -> str:
        """A waiting pull attempt becomes claimable, its slot recorded in the same write."""
        try:
            pool = attempt_pool(self.core, wf, defn, spec, item)
        except PoolKeyFailed as exc:
            fail_keyless(self.core, item.activity_exec_id, defn, str(exc))
            return "gone"
        limits = self.ledger.limits(pool, defn) or (None, None)
        now = self.core.clock()
        taken = self.take(pool, limits, item.activity_exec_id, now)
        order = admission.claim_order(spec, wf, item.ready_epoch)
        if not taken.ok:
            self.wait(pool, item.activity_exec_id, order, "activity", taken.retry_at,
                      lambda: None)
            return "held"
        changes: dict[str, Any] = {"pool_wait": REMOVE, "pool_slot": slot_ref(pool, taken.k)}
        if wf.state is W.RUNNING:  # SUSPENDED: its resume makes it claimable
            changes["claimable"] = (wf.workflow_name, spec.name, *admission.claim_intent(
                spec, wf, item.ready_epoch))
        try:
            moved = self.pool_port.admit_waiting(item.activity_exec_id, changes)
        except StateConflict as lost:
            self.ledger.give_back(pool, taken, item.activity_exec_id,
                                  getattr(lost.current, "pool_slot", None))
            return "gone"
        self.core.known.remember(moved)
        self.pool_port.delete_waiter(self.waiter(pool, item.activity_exec_id, order))
        return "admitted"

    def retry_run(self, wx: str) -> str:
        """Start a QUEUED run now if a run slot is free: ``"admitted"``, ``"held"`` or
        ``"gone"`` (it is QUEUED no more)."""
        wf = self.store.get_workflow(wx)
        if wf is None or wf.state not in WORKFLOW_WAITING or wf.pool_slot is not None:
            return "gone"
        defn = self.core.definitions.definition_of(wf)
        pool = run_pool(wf.workflow_name)
        if not defn.max_running:
            return "gone"
        taken = self.take(pool, (defn.max_running, None), wx, self.core.clock())
        if not taken.ok:
            return "held"
        return "admitted" if self.start_queued(wf, defn, taken) else "gone"

    def leave(self, item: ActivityRecord) -> None:
        """An attempt that waited ended (cancelled, timed out): its entry goes."""
        wf = self.store.get_workflow(item.workflow_exec_id)
        if wf is None or item.pool_wait is None:
            return
        spec = self.core.definitions.definition_of(wf).activity(item.activity_name)
        self.pool_port.delete_waiter(self.waiter(item.pool_wait, item.activity_exec_id,
                                             admission.claim_order(spec, wf,
                                                                   item.ready_epoch)))

    def wake(self, pool: str, freed: int | None) -> None:
        """Admit ``pool``'s first waiters: after a release, one (on the slot ``freed``);
        a rate's look, as many as its tokens allow. Wakes inside a wake (an admitted
        attempt whose launch failed and released) are queued on the thread, never nested."""
        queue: list[tuple[str, int | None]] | None = getattr(self._local, "wakes", None)
        if queue is not None:
            queue.append((pool, freed))
            return
        self._local.wakes = queue = [(pool, freed)]
        quiet = getattr(self._local, "quiet", False)
        self._local.quiet = True
        try:
            while queue:
                self._wake_once(*queue.pop(0))
        finally:
            self._local.wakes = None
            self._local.quiet = quiet

    def _wake_once(self, pool: str, freed: int | None) -> None:
        for waiter in self.pool_port.waiter_heads(pool)[:WAKE_TRIES]:
            if freed is not None:
                with self._lock:
                    self._prefer[waiter.holder] = freed
            try:
                outcome = (self.retry_run(waiter.holder) if is_run_pool(pool)
                           else self.retry_activity(waiter.holder))
            finally:
                with self._lock:
                    self._prefer.pop(waiter.holder, None)
            if outcome == "gone":
                self.pool_port.delete_waiter(waiter)  # admitted or ended meanwhile
                continue
            if outcome == "skip":
                continue  # its run is SUSPENDED: the next one may go
            if outcome == "held" or freed is not None:
                return  # full (or out of tokens) again, or the freed slot is taken
