"""LOST: an attempt row that vanished while its run was live (docs/contract.md, "LOST").

A row can disappear under the engine (a raw ``DeleteItem`` by mistake, a bad restore).
Nothing in the tables then says the attempt ever existed, so a repair that re-creates
"what is missing" would hand the same attempt id out a second time: two workers could
run one attempt. Two markers say which attempts were created, each written right after
the creation it vouches for:

* ``roots_ready`` on the workflow item: the start created every first attempt (roots
  last, engine/starting.py). Before it, a missing first attempt is a start that died
  half-way and the start is finished; after it, the attempt was lost.
* ``retry_created`` on an ended attempt: its retry's row was created (engine/flow.py).

The reconciler then writes the missing row itself, in LOST, with ``attribute_not_exists``:
a tombstone, so no path can create that attempt id again. Its retry policy decides next,
as for TIMED_OUT: a new attempt (the next id), or the failure.

A crash between a creation and its marker leaves the old reading (re-create) for that
attempt; that needs the crash and a lost row of a pull attempt claimed in between.
"""

from __future__ import annotations

import logging

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.outcomes import resolution
from whimbrel.contract.records import ActivityRecord, Change, WorkflowRecord, latest_of
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.engine import rules
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.metrics import report_activity_end

log = logging.getLogger("whimbrel.engine")

A = ActivityState
#: Who writes LOST (the only writer): the reconciler of the heartbeat listener.
RECONCILER = "reconciler"
#: The error type a LOST attempt carries (what ``RetryPolicy.non_retryable`` may name).
LOST_ERROR_TYPE = "AttemptLost"


class Lost(Feature):
    """Missing attempt rows of a live run become LOST tombstones; their retry policy
    decides next. Never re-creates an attempt id that was handed out."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def reconcile(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        """A visit of a RUNNING run whose start finished: every first attempt whose
        upstreams are resolved (it was, or could have been, handed out) must exist."""
        if wf.state is not WorkflowState.RUNNING or wf.roots_ready is None:
            return False
        latest = latest_of(acts)
        found = False
        for spec in defn.activities:
            name = spec.name
            if name in latest or not (name in defn.roots or spec.depends_on):
                continue  # present, or a failure handler (created when called)
            if any(resolution(defn, latest, d) is None for d in spec.depends_on):
                continue  # never moved yet: its upstreams' end finds it missing next
            found |= self.tombstone(wf, defn, name, 1, now, None)
        return found

    def before_retry(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     item: ActivityRecord) -> bool:
        """A retry whose row was created once: never create it again. If it is gone it
        becomes LOST (and its own retry policy decides); if not, it moves on as usual."""
        nxt = item.retry_created
        if nxt is None or not rules.retry_follows(defn.activity(item.activity_name), item):
            return False
        if not self.tombstone(wf, defn, item.activity_name, nxt, self.core.clock(), item):
            self.core.flow.advance(wf, defn, item.activity_name, nxt)  # a lost launch, repaired
        return True

    def tombstone(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                  attempt: int, now: float, previous: ActivityRecord | None) -> bool:
        """Create attempt ``attempt`` of ``name`` in LOST, if (and only if) no row of that
        id exists, then its follow-ups (its retry policy); True if it was missing.
        ``previous``: the attempt before it (its generation and retry budget carry)."""
        spec = defn.activity(name)
        aeid = activity_exec_id(wf.workflow_exec_id, name, attempt)
        why = (f"attempt {aeid} was lost: its row vanished while the run was live; "
               "recorded LOST by the reconciler")
        record = ActivityRecord(
            workflow_exec_id=wf.workflow_exec_id, activity_exec_id=aeid,
            activity_name=name, workflow_name=wf.workflow_name, attempt=attempt,
            state=A.LOST, workflow_version=wf.version, created_epoch=now,
            updated_epoch=now, ended_epoch=now, error=why, error_type=LOST_ERROR_TYPE,
            heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
            expires_epoch=rules.expiry(now + rules.RETENTION_SLACK_SECONDS,
                                       self.core.definitions.retention(defn)),
            redrive_count=previous.redrive_count if previous else wf.redrive_count,
            retry_base=previous.retry_base if previous else None,
            traceparent=wf.traceparent,  # its end's span goes to the run's trace
            history=(Change(A.LOST.value, now, RECONCILER),))
        # attribute_not_exists (create_activity): a row of this id that exists, whatever
        # its state, is never overwritten; a tombstone that exists stays one.
        if not self.core.store.create_activity(record):
            return False
        log.warning("%s", why)
        report_activity_end(self.core.metrics, record)
        self.core.flow.after(record)
        return True
