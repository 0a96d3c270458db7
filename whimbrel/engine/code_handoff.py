"""A code workflow's decision left for a worker (docs/architecture.md, "Code runs where
the code is"): a process that is not a worker for the workflow's code (the python
launcher's ``WorkerScope``, asked through ``ports.decides_here``) does not decide; it
writes a *decision entry* that a worker claims as it claims python work left for it.

An entry is an attempt-shaped item READY in the ``claimable`` index's worker shards,
keyed by the workflow's ``module:qualname`` (so ``claim_for_worker``'s read by module
finds it beside the python attempts, at no extra request). Its activity name is an item
of the reserved map ``~decision``: it lives in ``map_item`` and no run listing (the
console, status, the run's own settling) ever reads it, because its run has no map of
that name. Its id is derived from what asked for the decision (the step attempt that
ended, the run's start, a reconcile visit), so a redelivered stream record or a retried
write leaves one entry, not two. The worker moves it READY → RUNNING in one conditional
write (one winner), decides, and ends it (COMPLETED, expiring). A decision is
idempotent by replay, so an entry taken after another process decided further
schedules nothing twice; it only costs a replay.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable

from whimbrel.contract.code import CodeDefinition
from whimbrel.contract.errors import StateConflict
from whimbrel.contract.priority import DEFAULT_PRIORITY, attempt_priority, order_text
from whimbrel.contract.records import REMOVE, ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.engine.feature import Core

log = logging.getLogger("whimbrel.engine.code")

A = ActivityState

#: The reserved map whose items are decision entries (``~`` is no name a user writes).
DECISION_MAP = "~decision"
#: How long an ended entry is kept (it keeps a redelivered trigger from leaving another).
ENTRY_SECONDS = 86400.0
#: How long an entry no worker took is kept (then the run's next reconcile visit leaves
#: another, as long as the run lives; one of a run that ended is no longer needed).
LEFT_SECONDS = 7 * 86400.0

#: Makes one decision of a run this process took the entry of (``cold``: from the
#: run's rows, not from a history kept here: what a reconcile visit asked for).
Decide = Callable[[WorkflowRecord, CodeDefinition, bool], None]


def entry_id(workflow_exec_id: str, trigger: str) -> str:
    """The entry a decision asked for by ``trigger`` is left as (the same on every
    redelivery: ``attribute_not_exists`` keeps one)."""
    number = int(hashlib.sha256(trigger.encode()).hexdigest()[:12], 16)
    return f"{workflow_exec_id}:{DECISION_MAP}#{number}:1"


def is_decision_entry(item: ActivityRecord) -> bool:
    return item.activity_name.startswith(f"{DECISION_MAP}#")


def leave(core: Core, wf: WorkflowRecord, defn: CodeDefinition, trigger: str, *,
          cold: bool = False) -> bool:
    """Leave ``wf``'s next decision for a worker for ``defn.code``; False if an entry
    for ``trigger`` was left before."""
    now = core.clock()
    aeid = entry_id(wf.workflow_exec_id, trigger)
    record = ActivityRecord(
        wf.workflow_exec_id, aeid, aeid.rsplit(":", 2)[-2], wf.workflow_name, 1, A.READY,
        workflow_version=wf.version, created_epoch=now, updated_epoch=now,
        ready_epoch=now, expires_epoch=now + LEFT_SECONDS,
        input=json.dumps({"trigger": trigger, "cold": cold}))
    priority = attempt_priority(DEFAULT_PRIORITY, wf.priority)
    left = core.store.create_claimable(record, (order_text(priority, now), priority,
                                                defn.code))
    if left:
        log.info("code run %s: no worker for %s here; decision (%s) left for one",
                 wf.workflow_exec_id, defn.code, trigger)
    return left


def take(core: Core, entry: ActivityRecord, decide: Decide, *, actor: str) -> bool:
    """Claim a decision entry (READY → RUNNING, while it is still in the index) and make
    the decision; False if another worker took it first."""
    try:
        taken = core.store.move_activity(entry.activity_exec_id, A.READY, [A.RUNNING],
                                         {"claimable": REMOVE, "worker": actor},
                                         now=core.clock(), actor=actor, claimed=True)
    except StateConflict:
        return False
    ended, error = A.COMPLETED, None
    try:
        asked = json.loads(taken.input or "{}")
        wf = core.store.get_workflow(entry.workflow_exec_id)
        # A cancelled run's code decides too (its clean-up: engine/code_cancel.py).
        if wf is not None and wf.state in (WorkflowState.RUNNING,
                                           WorkflowState.CANCEL_REQUESTED):
            defn = core.definitions.definition_of(wf)
            if isinstance(defn, CodeDefinition):
                decide(wf, defn, bool(isinstance(asked, dict) and asked.get("cold")))
    except Exception as exc:  # the run's reconcile visit leaves it again
        log.exception("decision of %s failed", entry.workflow_exec_id)
        ended, error = A.FAILED, f"{type(exc).__name__}: {exc}"
    now = core.clock()
    changes: dict[str, object] = {"ended_epoch": now, "expires_epoch": now + ENTRY_SECONDS}
    if error is not None:
        changes["error"] = error
    try:
        core.store.move_activity(entry.activity_exec_id, A.RUNNING, [ended], changes,
                                 now=now, actor=actor)
    except StateConflict:
        pass  # gone meanwhile (expired): nothing to end
    return True
