"""Pools and ``max_running`` (a feature; issue 22; docs/architecture.md, "Pools").

A pool limits the attempts that hold one of its slots (``slots``) and how fast they
start (``per_second``); ``max_running`` is the implicit pool ``run:<workflow_name>``
whose holders are runs. Storage: :mod:`whimbrel.contract.pools` (no hot key). Here the
hooks; ``pool_ledger.py`` takes slots and tokens, ``pool_queue.py`` keeps the waiters
and wakes them, ``pool_keys.py`` names a keyed attempt's pool (``<pool>~<key>``).

* **Admission** (``admit``): before the write that starts an attempt — QUEUED or RUNNING,
  or READY and claimable for a pull one — or that makes a run RUNNING (a start, a
  redrive), the actor takes a slot (probing a few, in an order fixed by the holder's id;
  a slot handed over by a release first) and then a token. The slot goes into that same
  write (``pool_slot``); a lost write gives it back unless the winner recorded it.
* **Waiting**: with no slot (or no token) the attempt stops READY, out of the claimable
  index, with ``pool_wait`` set, and enters the pool's waiters; a run is created QUEUED
  and enters its pool's waiters. Entered, it looks at its slots once more (a release may
  have come between its probe and its entry: whichever of the two came second sees the
  other). A pool over its rate arms one *pacer* look of the sweep at its next token.
* **Release**: any end of a holder — an attempt's terminal write, whoever makes it
  (``attempt_ended``), a run's end (``ended``) — frees its slot and admits the first
  waiter (lower priority number first, then the oldest run: contract/priority.py), on the
  slot just freed. An end in a pool with a rate also admits waiters while tokens last.
* **Repair**: the sweep checks every held slot at its check time and frees one whose
  holder ended, vanished or records another slot (a crash between two writes); a QUEUED
  run's reconcile visit, and a RUNNING run's for its waiting attempts, enter them again
  and try to admit them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import NotAllowedNow, WhimbrelError
from whimbrel.contract.pools import (
    SLOT_CHECK_SECONDS,
    Pool,
    PoolInfo,
    base_pool,
    is_run_pool,
    parse_slot_ref,
    run_pool,
    slot_ref,
)
from whimbrel.contract.records import REMOVE, ActivityRecord, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_NOT_LAUNCHED,
    ACTIVITY_STARTING,
    ACTIVITY_TRANSITIONS,
    WORKFLOW_WAITING,
    ActivityState,
    Transition,
    WorkflowState,
)
from whimbrel.engine import admission
from whimbrel.engine.feature import Admission, Core, Feature
from whimbrel.engine.pool_holders import kept_until, sweep_shard
from whimbrel.engine.pool_keys import PoolKeyFailed, attempt_pool, fail_keyless, keyless
from whimbrel.engine.pool_ledger import Ledger, PoolNotFound
from whimbrel.engine.pool_nesting import (
    PoolDeadlock,
    fail_nested,
    held_above,
    nesting_problems,
    run_held_above,
)
from whimbrel.engine.pool_port import PoolPort
from whimbrel.engine.pool_queue import Queue

if TYPE_CHECKING:
    from whimbrel.engine.leases import SweepLeases

__all__ = ["Ledger", "PoolNotFound", "Pools", "WaitsForPool"]

log = logging.getLogger("whimbrel.pools")

A = ActivityState
W = WorkflowState

#: A held slot whose holder is still waiting to record it (its admission between two
#: writes) is kept this long; longer, its admitting actor died, and it is freed.
IN_FLIGHT_SECONDS = 2 * SLOT_CHECK_SECONDS


class WaitsForPool(NotAllowedNow):
    """A caller asked to start (or make claimable) an attempt its pool has not admitted:
    it goes when a slot frees (and a token is there)."""

    def __init__(self, *, activity_exec_id: str, pool: str, transition: str) -> None:
        super().__init__(
            f"{transition} refused for {activity_exec_id}: it waits for pool {pool!r} "
            "(full or over its rate); the engine starts it when a slot frees",
            activity_exec_id=activity_exec_id, pool=pool, transition=transition)
        self.activity_exec_id = activity_exec_id
        self.pool = pool


class Pools(Feature):
    """Slots, rates and waiters of named pools and of ``max_running``."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.store = core.store
        #: The pool table: the store's part for this feature's port.
        self.pool_port = core.store.part(PoolPort)
        self.ledger = Ledger(core.store, lambda pool, k: self.queue.wake(pool, k))
        self.queue = Queue(core, self.ledger)

    # -- the calls only this feature offers (Whimbrel.set_pool, get_pool, list_pools) ----

    def set_pool(self, pool: Pool) -> PoolInfo:
        """Create or change a pool (validated first; nothing is written when invalid).

        Raises:
            InvalidInput: a bad name, slots or rate.
        """
        pool.validate()
        info = self.pool_port.put_pool(pool, self.core.clock())
        self.ledger.forget(pool.name)
        if self.pool_port.waiter_heads(pool.name, 1):
            self.queue.wake(pool.name, None)  # room made, perhaps: waiters go in while it lasts
        return info

    def get_pool(self, name: str) -> PoolInfo:
        """A pool's settings, the slots held now and how many wait for it; of one key
        with ``<pool>~<key>`` (its pool's settings, the key's slots and waiters).

        Raises:
            PoolNotFound: no such pool.
        """
        Pool(base_pool(name)).validate()
        info = self.pool_port.get_pool_settings(base_pool(name))
        if info is None:
            raise PoolNotFound(name)
        high = max(info.slots or 0, info.slots_high or 0)
        in_use = len(self.pool_port.held_slots(name, high)) if high else 0
        return replace(info, name=name, in_use=in_use,
                       waiting=self.pool_port.count_waiters(name))

    def list_pools(self) -> list[PoolInfo]:
        return self.pool_port.list_pool_settings()  # every pool's settings, by name

    # -- registration ------------------------------------------------------------------

    def registering(self, defn: WorkflowDefinition) -> list[str]:
        """A definition may only name pools that exist (``set_pool`` first): a typo is
        refused at once, not discovered at the first start. Nor may it start child runs
        that wait for a slot (of a pool, or of its ``max_running``) their parent holds
        (engine/pool_nesting.py)."""
        out = nesting_problems(defn, lambda name, version: self.core.definitions.definition(
            name, version)[1], self.pool_port.get_pool_settings)
        for name in sorted({a.pool for a in defn.activities if a.pool is not None}):
            if self.pool_port.get_pool_settings(name) is None:
                users = ", ".join(repr(a.name) for a in defn.activities if a.pool == name)
                out.append(f"activity {users}: pool {name!r} does not exist; create it "
                           f"first (Whimbrel.set_pool, `whimbrel pools set {name}`)")
        return out

    # -- admission ---------------------------------------------------------------------

    def admit(self, wf: WorkflowRecord, defn: WorkflowDefinition,
              item: ActivityRecord | None, changes: Mapping[str, Any]) -> Admission | None:
        if item is None:
            return self._admit_run(wf, defn)
        spec = defn.activity(item.activity_name)
        if spec.pool is None:
            return None
        try:
            pool = attempt_pool(self.core, wf, defn, spec, item)
        except PoolKeyFailed as exc:  # held READY, then failed (a crash: reconcile fails it)
            return keyless(self.core, defn, spec, item.activity_exec_id, exc)
        limits = self.ledger.limits(pool, defn)
        if limits is None:  # no limit: admitted at once (marked, so nothing re-admits it)
            return Admission(True, {"pool_slot": slot_ref(pool, None), "pool_wait": REMOVE})
        now = self.core.clock()
        taken = self.queue.take(pool, limits, item.activity_exec_id, now)
        since = admission.waiting_since(self.core, item, changes)
        if since is None and item.state is not A.READY:
            since = now  # its wait begins with this write (``ready_epoch`` below)
        order = admission.claim_order(spec, wf, since)
        if taken.ok:
            go: dict[str, Any] = {"pool_wait": REMOVE, "pool_slot": slot_ref(pool, taken.k)}

            def landed(_moved: ActivityRecord) -> None:
                if item.state is A.READY:  # it waited: leave the queue
                    self.pool_port.delete_waiter(self.queue.waiter(pool, item.activity_exec_id,
                                                          order))

            return Admission(True, go, landed=landed, lost=lambda cur: self.ledger.give_back(
                pool, taken, item.activity_exec_id, getattr(cur, "pool_slot", None)))
        held: dict[str, Any] = {"pool_wait": pool, "claimable": REMOVE}
        if item.state is not A.READY:
            held["ready_epoch"] = since  # the entry's order, whoever else wrote a time
        above = held_above(self.core, wf, pool) \
            if taken.retry_at is None and limits[0] is not None else None  # full, not rated
        if above is not None:  # it would wait for what its parent holds: fail it
            return Admission(False, held, landed=lambda _rec: fail_nested(
                self.core, item.activity_exec_id, defn, pool, above))
        return Admission(False, held, landed=lambda _rec: self.queue.wait(
            pool, item.activity_exec_id, order, "activity", taken.retry_at,
            lambda: self.queue.retry_activity(item.activity_exec_id)))

    def _admit_run(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> Admission | None:
        if not defn.max_running:
            return None
        pool = run_pool(wf.workflow_name)
        wx = wf.workflow_exec_id
        taken = self.queue.take(pool, (defn.max_running, None), wx, self.core.clock())
        if taken.ok:
            assert taken.k is not None
            ref = slot_ref(pool, taken.k)

            def lost(cur: WorkflowRecord | None) -> None:
                if cur is not None and cur.state in WORKFLOW_WAITING and cur.pool_slot is None:
                    self.queue.start_queued(cur, defn, taken)  # a replayed start of a QUEUED run
                else:
                    self.ledger.give_back(pool, taken, wx, getattr(cur, "pool_slot", None))

            return Admission(True, {"pool_slot": ref}, lost=lost)
        above = run_held_above(self.core, wf)
        if above is not None:  # it would wait QUEUED for a slot its ancestor holds
            raise PoolDeadlock(workflow_name=wf.workflow_name, holder=above,
                               max_running=defn.max_running)

        def queue(rec: WorkflowRecord | None) -> None:
            if rec is not None and rec.state in WORKFLOW_WAITING:
                self.queue.wait(pool, wx, self.queue.run_order(rec), "run", None,
                           lambda: self.queue.retry_run(wx))

        return Admission(False, {}, landed=queue, lost=queue)

    # -- release and wake ----------------------------------------------------------------

    def attempt_ended(self, item: ActivityRecord) -> None:
        # What follows an end's write is best effort: the write landed, and a slot or
        # a wake lost here (throttled past the store's retries) is repaired by the sweep
        # (the slot's check) and the reconcile visits (the waiters); the caller whose
        # move landed must not hear an error for it.
        try:
            self._give_back_after(item)
        except WhimbrelError as exc:
            self.core.incidents.count("pool_followup_failed")
            log.warning("pool follow-up of %s: %s", item.activity_exec_id, exc)

    def _give_back_after(self, item: ActivityRecord) -> None:
        pool = parse_slot_ref(item.pool_slot)[0] if item.pool_slot else item.pool_wait \
            or self._pool_of(item)  # a keyed pool's name is on its attempt
        if pool is None:
            return
        if item.pool_wait is not None and item.pool_slot is None:
            self.queue.leave(item)  # ended while it waited (cancelled, timed out): out of line
        k = parse_slot_ref(item.pool_slot)[1] if item.pool_slot else None
        until = kept_until(self.core, item, self.core.clock()) if k is not None else None
        if k is not None and until is not None:
            # Timed out while its code may still run: the slot stays its own until the
            # code stops (its late report gives it back: engine/late.py) or shows no
            # sign of life; the slot's check comes then.
            slot = self.pool_port.get_slot(pool, k)
            if slot.holder == item.activity_exec_id and slot.token is not None:
                self.pool_port.recheck_slot(pool, k, slot.holder, slot.token, until)
            return
        if k is not None and self.pool_port.release_slot(pool, k, item.activity_exec_id):
            self.queue.wake(pool, k)
            return
        if self._rated(pool):
            self.queue.wake(pool, None)  # a token may be there for the next waiter

    def _pool_of(self, item: ActivityRecord) -> str | None:
        if item.workflow_version is None:
            return None
        defn = self.core.definitions.definition_of(item)  # a code step: its spec is its run's
        return defn.activity(item.activity_name).pool

    def _rated(self, pool: str) -> bool:
        info = None if is_run_pool(pool) else self.ledger.settings(pool)
        return info is not None and info.per_second is not None

    def ended(self, wf: WorkflowRecord) -> None:
        try:  # best effort, as after an attempt's end (the sweep repairs)
            pool, k = parse_slot_ref(wf.pool_slot) if wf.pool_slot else ("", None)
            if k is not None:
                if self.pool_port.release_slot(pool, k, wf.workflow_exec_id):
                    self.queue.wake(pool, k)
            elif any(h.state in {s.value for s in WORKFLOW_WAITING} for h in wf.history):
                # Cancelled or timed out while QUEUED: it leaves the queue.
                self.pool_port.delete_waiter(self.queue.waiter(
                    run_pool(wf.workflow_name), wf.workflow_exec_id, self.queue.run_order(wf)))
        except WhimbrelError as exc:
            self.core.incidents.count("pool_followup_failed")
            log.warning("pool follow-up of %s: %s", wf.workflow_exec_id, exc)

    # -- sweep and reconcile -------------------------------------------------------------

    def sweep(self, now: float, leases: SweepLeases) -> None:
        """Held slots whose check is due (free the dead ones), and pacer looks: of the
        ``pool_checks`` shards with something due whose lease this pass holds."""
        seen = self.pool_port.due_pool_check_shards(now)
        shards = self.pool_port.pool_check_shards
        if seen is None:  # ask each shard
            reads = [self.core.threads.submit(self.pool_port.due_pool_checks, now, 1, shard)
                     for shard in shards]
            seen = {shard for shard, read in zip(shards, reads, strict=True) if read.result()}
        for shard in shards:
            if shard in seen and leases.hold(shard):
                sweep_shard(self.core, self.pool_port, self.queue.wake, now, shard,
                            IN_FLIGHT_SECONDS)

    def reconcile(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        """A QUEUED run, and a RUNNING run's waiting attempts: in the queue again (a
        crash before their entry), and admitted if a slot is free."""
        if wf.state in WORKFLOW_WAITING:
            if not defn.max_running:
                return False
            pool = run_pool(wf.workflow_name)
            self.pool_port.put_waiter(pool, wf.workflow_exec_id, self.queue.run_order(wf),
                                  kind="run", expires_epoch=None)
            return self.queue.retry_run(wf.workflow_exec_id) == "admitted"
        if wf.state is not W.RUNNING:
            return False
        repaired = False
        for act in acts:
            spec = defn.activity(act.activity_name)
            if act.state is not A.READY or spec.pool is None or act.pool_slot is not None \
                    or act.claim_key is not None:
                continue  # not waiting: admitted (and claimable, for a pull one)
            # Waiting for its pool, or readied while its run was SUSPENDED.
            try:
                pool = attempt_pool(self.core, wf, defn, spec, act)
            except PoolKeyFailed as exc:  # its failure was lost to a crash: fail it now
                repaired |= fail_keyless(self.core, act.activity_exec_id, defn, str(exc))
                continue
            self.pool_port.put_waiter(pool, act.activity_exec_id,
                                  admission.claim_order(spec, wf, act.ready_epoch),
                                  kind="activity", expires_epoch=None)
            # A push one is advanced by the core's visit; python waits for a worker.
            if spec.launcher.is_pull or spec.launcher.needs_worker:
                repaired |= self.queue.admit_pull(wf, defn, spec, act) == "admitted"
        return repaired

    def refuse(self, spec: ActivityDefinition, item: ActivityRecord,
               verb: Transition) -> None:
        """A caller may not start (or make claimable) an attempt its pool has not admitted:
        that would go past the pool's limits.

        Raises:
            WaitsForPool: it waits for its pool (or for its upstreams to let the engine
                admit it).
        """
        state = item.state
        if spec.pool is None or state not in ACTIVITY_NOT_LAUNCHED:
            return
        target = ACTIVITY_TRANSITIONS.get((state, verb))
        if target is None or (target not in ACTIVITY_STARTING and target is not A.READY):
            return
        if item.pool_slot is not None or item.claim_key is not None:
            return  # admitted (a claim's candidate is in the index only when admitted)
        info = self.ledger.settings(spec.pool)
        if info is None or (info.slots is None and info.per_second is None):
            return  # no limit (or its settings vanished): nothing to go past
        fresh = self.store.get_activity(item.activity_exec_id)  # the image may be stale
        if fresh is not None and fresh.state is state and fresh.pool_slot is None \
                and fresh.claim_key is None:
            raise WaitsForPool(activity_exec_id=item.activity_exec_id,
                               pool=fresh.pool_wait or spec.pool, transition=verb.value)

