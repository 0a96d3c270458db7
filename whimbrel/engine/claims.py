"""Claims (part of the core): a worker takes one READY ``external`` attempt from the
sparse ``claimable`` index, lower priority number first, then the longest waiting, with
aging (contract/priority.py), while workers polling together spread over its shards."""

from __future__ import annotations

import itertools
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from whimbrel.contract.errors import StateConflict
from whimbrel.contract.priority import (
    AGING_SECONDS,
    DEFAULT_PRIORITY,
    claim_key_order,
    serving_grain,
)
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import (
    WORKFLOW_PROCEEDING,
    ActivityState,
    Transition,
    activity_path,
)
from whimbrel.engine import rules
from whimbrel.engine.feature import Core

A = ActivityState

#: Claim candidates asked of each shard of the claimable index.
CLAIM_CANDIDATES = 25
#: Shards of the claimable index a claim reads first: a window of consecutive shards at
#: a random offset, so workers polling together mostly read (and race on) different
#: shards; only when the window holds nothing are the other shards read.
CLAIM_WINDOW = 4
#: Priority shards a claim reads with its window: a group of this many, a process's
#: claims taking the groups in turn from a random one. So each priority shard is read by
#: one claim in ``PRIORITY_CLAIM_SHARDS / PRIORITY_WINDOW`` (4), not by every claim (its
#: key would cap the claims of the account at ~6,000/s), and any 4 consecutive claims
#: of a process read every priority shard.
PRIORITY_WINDOW = 2
#: Attempts a process remembers having claimed, so that none of its threads writes a
#: claim for one again from an index read that lags behind (that write would lose).
RECENT_CLAIMS = 1024
#: Candidates whose serving order is this close are equals to a claim, tried in a random
#: order (far finer than a priority level, AGING_SECONDS = 300 s of waiting; the
#: serving order is kept to the second, as the aging rule promises).
CLAIM_ORDER_GRAIN_SECONDS = 1.0


def behind_default(hit: ActivityRecord, now: float) -> bool:
    """Whether ``hit`` is served after a default-priority attempt readied at ``now``
    would be (its order is later): then every default attempt waiting anywhere goes
    first, and a claim must look beyond its window for one."""
    order = claim_key_order(hit.claim_key)
    return bool(order) and float(order) > now + DEFAULT_PRIORITY * AGING_SECONDS


def _ordered(hits: list[ActivityRecord]) -> list[ActivityRecord]:
    # Most urgent first, then the longest waiting; workers polling together may still
    # see the same candidates, so equals (within CLAIM_ORDER_GRAIN_SECONDS of serving
    # order) go in a random order: fewer lost writes.
    return sorted(hits, key=lambda h: (serving_grain(h.claim_key, CLAIM_ORDER_GRAIN_SECONDS),
                                       random.random()))


class Claims:
    """Claims of READY attempts from the claimable index. A part of the engine:
    ``engine.claims.op(…)``."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._turns = itertools.count(random.randrange(1 << 16))
        #: Per set of priority shards: the store's ``priority_written`` when this process
        #: last read them all (-1: never, so a process's first claim reads them all).
        self._looked_at: dict[tuple[str, ...], int] = {}
        self._lock = threading.Lock()
        #: Attempts a thread of this process is claiming now, and the last it claimed.
        self._trying: set[str] = set()
        self._taken: OrderedDict[str, None] = OrderedDict()

    def claim(self, workflow_name: str | None = None, activity_name: str | None = None, *,
              actor: str = "worker") -> ActivityRecord | None:
        """Take one READY ``external`` attempt (READY → RUNNING), or None if none waits in
        a RUNNING workflow.

        Candidates come from the sparse ``claimable`` index: first a window of
        ``CLAIM_WINDOW`` shards at a random offset with a window of the priority shards
        (attempts whose priority is not the default: ``PRIORITY_WINDOW`` of them, this
        process's claims taking the groups in turn; all of them when this process put an
        attempt on one since it last read them all), read at once, then the other shards
        (read at once) when the first read holds nothing, when another worker took all it
        held, or when the best it holds is served after any default-priority attempt could
        be (a priority above 5 that has not aged that far: :func:`behind_default`) —
        default work outside the window may then go first. So workers spread over the
        shards, no key is read by every claim, a claim reads 6 shards of each table while
        a backlog lasts, a later priority never goes before default work, and an urgent
        attempt (a priority below 5) goes before default work at the latest by the 4th
        claim of each process after it became claimable (at once in the process that
        readied it); default work goes oldest first among what its window holds.
        Candidates are tried in serving
        order (the claim key's order: priority, then the wait, aging included), equals in a
        random order. The move is conditional, so two workers never claim the same
        attempt. The workflow item is read while the move is in flight; an attempt claimed
        in a workflow that turned out to be ending is given up at once (CANCELLED) and the
        next candidate is tried.
        """
        prefix = ""
        if workflow_name:
            prefix = f"{workflow_name}/" + (f"{activity_name}/" if activity_name else "")

        def read(group: list[str]) -> list[ActivityRecord]:
            return [hit for hit in self.core.store.claimable_among(group, prefix, CLAIM_CANDIDATES)
                    if not (activity_name and not workflow_name
                            and hit.activity_name != activity_name)]

        return self.claim_from(self.core.store.claim_shards, self.core.store.priority_claim_shards,
                          read, actor)

    def claim_from(self, shards: Sequence[str], priority_shards: Sequence[str],
                   read: Callable[[list[str]], list[ActivityRecord]],
                   actor: str) -> ActivityRecord | None:
        """One claim over a sharded claimable index (``claim``'s order and spread, for the
        external and the worker shards alike): ``read`` gives a group of shards' candidates."""
        ring = list(shards)
        start = random.randrange(len(ring))
        ring = ring[start:] + ring[:start]
        urgent = self.priority_window(priority_shards)
        first = [*urgent, *ring[:CLAIM_WINDOW]]
        rest = ring[CLAIM_WINDOW:] + [s for s in priority_shards if s not in urgent]
        now = self.core.clock()
        hits = _ordered(read(first))
        if rest and hits and behind_default(hits[0], now):
            hits = _ordered(hits + read(rest))  # default work elsewhere may go first
            rest = []
        claimed = self._claim_one(hits, actor)
        if claimed is None and rest:
            claimed = self._claim_one(_ordered(read(rest)), actor)
        return claimed

    def priority_window(self, shards: Sequence[str]) -> list[str]:
        """The priority shards a claim reads first: every one when this process's store
        put an attempt on one since this process last read them all (it knows such work
        waits, and serves it first at once), else the next group of ``PRIORITY_WINDOW``
        in this process's turn."""
        key = tuple(shards)
        written = self.core.store.priority_written
        with self._lock:
            if self._looked_at.get(key, -1) != written:
                self._looked_at[key] = written
                return list(shards)
        groups = -(-len(shards) // PRIORITY_WINDOW)
        group = next(self._turns) % groups
        return list(shards[group * PRIORITY_WINDOW:(group + 1) * PRIORITY_WINDOW])

    def _claim_one(self, hits: list[ActivityRecord], actor: str) -> ActivityRecord | None:
        """The first of ``hits`` this worker moves to RUNNING in a proceeding run, or None."""
        for hit in hits:
            if not self._try(hit.activity_exec_id):
                continue  # another thread of this process tries it or took it
            wf_read = self.core.threads.in_background(self.core.reads.workflow,
                                                      hit.workflow_exec_id)
            landed = False
            try:
                claimed = self.core.flow.apply(hit, Transition.RUNNING, actor=actor, claimed=True)
                landed = True
            except StateConflict:
                wf_read.cancel()
                continue  # another worker was faster
            finally:
                self._tried(hit.activity_exec_id, landed)
            wf = wf_read.result()
            # SUSPENDED: claimed as the suspend landed; it runs (as if claimed just before).
            if wf.state in WORKFLOW_PROCEEDING:
                self.core.known.prefetched_workflow(hit.activity_exec_id, wf_read)
                return claimed
            self.give_up(claimed, wf)
        return None

    def _try(self, activity_exec_id: str) -> bool:
        """Whether this thread may write the claim of ``activity_exec_id``: not while
        another thread of this process does, nor once this process took it (an index read
        lags behind its claims). Such a write could only lose, and AWS bills a lost
        conditional write like one that lands: a process never races itself."""
        with self._lock:
            if activity_exec_id in self._trying or activity_exec_id in self._taken:
                return False
            self._trying.add(activity_exec_id)
            return True

    def _tried(self, activity_exec_id: str, landed: bool) -> None:
        """The claim write of ``activity_exec_id`` is done; remembered as taken if it
        ``landed`` (RUNNING, never READY again; one that lost may be READY again after a
        resume, so it is not remembered)."""
        with self._lock:
            self._trying.discard(activity_exec_id)
            if landed:
                self._taken[activity_exec_id] = None
                while len(self._taken) > RECENT_CLAIMS:
                    self._taken.popitem(last=False)

    def give_up(self, item: ActivityRecord, wf: WorkflowRecord) -> None:
        """End an attempt this actor moved to RUNNING but never started, because its
        workflow is ending: RUNNING → CANCELLED_RUNNING → CANCELLED in one write."""
        defn = self.core.definitions.definition_of(wf)
        spec = defn.activity(item.activity_name)
        path = activity_path(A.RUNNING, Transition.CANCEL, Transition.FAILED)
        changes = rules.changes_for(spec, A.RUNNING, path[-1], now=self.core.clock(),
                                    workflow_name=item.workflow_name,
                                    retention=self.core.definitions.retention(defn),
                                    error=f"claimed while workflow was {wf.state.value}")
        try:
            moved = self.core.known.move(item.activity_exec_id, A.RUNNING, path, changes)
        except StateConflict:
            return
        self.core.flow.after(moved)
