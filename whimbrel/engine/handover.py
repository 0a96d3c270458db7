"""Code runs where the code is (docs/contract.md, "Who runs code"): a worker's claim of
the python work other processes left for it, and the hand-back of what a closing
process launched but never started.

A process that is not a worker for a python attempt (``admission.leaves_for_worker``)
moves it to READY with a ``claimable`` intent that carries its ``module:function``; the
store keys it under the worker shards by module (store/keys.py), apart from external
work. A worker reads the prefixes of its modules, and moves a candidate READY → RUNNING
in one conditional write (``flow.apply`` with ``claimed``: only while it is still in the
index), then runs it. ``schedule_to_start_seconds`` bounds the wait as for any READY
attempt (rules.start_deadline). A code run's decision left for a worker
(engine/code_handoff.py) is found by the same read and made by the claiming worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from whimbrel.contract.errors import StateConflict, WhimbrelError
from whimbrel.contract.outcomes import HANDED_BACK
from whimbrel.contract.records import ActivityRecord
from whimbrel.contract.states import ActivityState, Transition
from whimbrel.engine.claims import CLAIM_CANDIDATES
from whimbrel.engine.code_handoff import is_decision_entry
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.engine.feature import Core

A = ActivityState

log = logging.getLogger("whimbrel.engine.handover")


def worker_target(item: ActivityRecord) -> str:
    """The ``module:function`` of a claimable worker entry, read from its claim key
    (``<module>/<function>/<order>/<id>``)."""
    module, _, rest = (item.claim_key or "").partition("/")
    return f"{module}:{rest.partition('/')[0]}"


class Handover:
    """A worker's claim of the python work left for it, and the hand-back of what a
    closing process launched but never started. A part of the engine:
    ``engine.handover.op(…)``."""

    def __init__(self, core: Core) -> None:
        self.core = core
        #: Decisions of code runs left for a worker that this engine took (a count).
        self.decisions_taken = 0

    def claim_for_worker(self, prefixes: Sequence[str], covers: Callable[[str], bool], *,
                         actor: str = "worker",
                         decisions_only: bool = False) -> ActivityRecord | None:
        """Take one READY python attempt left for a worker whose target ``covers`` accepts,
        among the entries under ``prefixes`` (``<module>/``; "" for every one): READY →
        RUNNING, or None if none waits in a proceeding run. As ``claims.claim``: the priority
        shards and a window at a random offset first, then the other shards. The decisions
        of code runs left for a worker that the read finds are made on the caller's
        thread when it claimed no attempt (one claimed is started first: the caller polls
        again at once); ``decisions_only``: claim no python attempt (every thread is
        busy), only make those."""
        store = self.core.store
        left: list[ActivityRecord] = []

        def read(group: list[str]) -> list[ActivityRecord]:
            hits = [hit for prefix in prefixes
                    for hit in store.claimable_among(group, prefix, CLAIM_CANDIDATES)
                    if covers(worker_target(hit))]
            # Decisions of code runs left for a worker share the read (their key is
            # the workflow's module:qualname): taken here, not launched.
            left.extend(hit for hit in hits if is_decision_entry(hit))
            return [] if decisions_only else [hit for hit in hits
                                              if not is_decision_entry(hit)]

        claimed = self.core.claims.claim_from(store.worker_claim_shards,
                                              store.worker_priority_claim_shards, read, actor)
        if claimed is not None:
            return claimed  # started first (it is RUNNING); the next poll decides
        runs = self.core.feature(CodeRuns)
        for entry in left:
            try:
                if runs.take_left(entry, actor=actor):
                    self.decisions_taken += 1
            except (WhimbrelError, OSError) as exc:  # throttled: the next poll finds it
                log.warning("left decision %s not taken: %s", entry.activity_exec_id, exc)
        return None

    def hand_back(self, activity_exec_id: str, why: str) -> bool:
        """End an attempt this process moved to RUNNING but never started (its client is
        closing): FAILED with error type ``HANDED_BACK``, which always gets a next attempt
        at once (contract/outcomes.py), left for a worker. False if it moved on meanwhile."""
        item = self.core.known.remembered(activity_exec_id) \
            or self.core.store.get_activity(activity_exec_id)
        if item is None or item.state is not A.RUNNING:
            return False
        try:
            self.core.flow.apply(item, Transition.FAILED, error=f"handed back: {why}",
                       error_type=HANDED_BACK)
        except (StateConflict, WhimbrelError):
            return False
        return True
