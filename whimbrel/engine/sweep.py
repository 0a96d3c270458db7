"""The heartbeat listener and reconciler: one ``sweep(now)`` pass.

* Fires armed deadlines of activities, found through the sparse ``timers`` index (cost
  grows with what is due only): silent or overlong runs and attempts nobody started are
  TIMED_OUT, retries whose not-before time has come are launched.
* Visits workflows whose check time has come (sparse ``reconcile`` index): times out a
  run past its own deadline, and repairs whatever a crash left half done.

Any number of sweepers may run at once: each shard of the sparse indexes is swept by
the holder of its lease (``engine/leases.py``), taken only where something is due. One
sweeper alone takes every lease and covers every shard in one pass.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import StateConflict, WhimbrelError
from whimbrel.contract.outcomes import open_activities, resolution
from whimbrel.contract.records import REMOVE, ActivityRecord, Due, WorkflowRecord, latest_of
from whimbrel.contract.states import (
    ACTIVITY_ACTIVE,
    ACTIVITY_PENDING,
    ACTIVITY_TERMINAL,
    ACTIVITY_UNSUCCESSFUL,
    WORKFLOW_LIVE,
    WORKFLOW_WAITING,
    ActivityState,
    WorkflowState,
)
from whimbrel.engine import rules
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.leases import SweepLeases
from whimbrel.engine.metrics import report_sweep_error
from whimbrel.engine.ports import StorePort
from whimbrel.settings import DAY_SECONDS

log = logging.getLogger("whimbrel.sweep")

A = ActivityState
W = WorkflowState

#: Longest pause between two reconcile visits of a long-running workflow.
MAX_RECONCILE_INTERVAL_SECONDS = 3600.0
#: A live run's rows expiring sooner than this are pushed out by the visit (at most half
#: the retention: rows are rewritten at most twice per retention period).
RETENTION_GUARD_SECONDS = DAY_SECONDS

LISTENER = rules.LISTENER


@dataclass
class SweepReport:
    """What one sweep did. Lists hold activity or workflow execution ids."""

    now: float
    timed_out: list[str] = field(default_factory=list)
    retries_launched: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    #: Workflows visited whose tables needed (and got) a repair.
    reconciled: list[str] = field(default_factory=list)
    #: Workflows visited and found in order.
    checked: list[str] = field(default_factory=list)
    #: Workflows ended TIMED_OUT because their own deadline passed.
    workflows_timed_out: list[str] = field(default_factory=list)
    #: Items that failed in this pass, each ``"<id>: <ExceptionType>: <message>"``: any
    #: exception of one item is recorded here (and logged, and counted as a metric) and
    #: the pass goes on with every other item; the next pass visits it again.
    errors: list[str] = field(default_factory=list)
    #: Timer waits that fired (completed, or failed on an input holding no time).
    timers_fired: list[str] = field(default_factory=list)
    #: Sweep leases this pass held (``sweep#<k>``): the shards it swept.
    leases: list[str] = field(default_factory=list)
    #: Leases of shards with something due that another sweeper held: left to it.
    leased_elsewhere: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "now": self.now,
            "timed_out": self.timed_out,
            "retries_launched": self.retries_launched,
            "cancelled": self.cancelled,
            "reconciled": self.reconciled,
            "checked": self.checked,
            "workflows_timed_out": self.workflows_timed_out,
            "timers_fired": self.timers_fired,
            "errors": self.errors,
            "leases": self.leases,
            "leased_elsewhere": self.leased_elsewhere,
        }


def sweep(engine: Core, now: float | None = None, *, limit: int = 1000,
          leases: SweepLeases | None = None) -> SweepReport:
    """Run one heartbeat-listener pass at ``now`` (the engine's clock when None).

    ``limit`` bounds each shard's page (one Query of at most that many entries per
    shard and index). ``leases`` (default: new ones, on the engine's clock) divide the
    shards with other sweepers; all held are released at the end. A pass that raises
    releases them too; one that dies leaves them to expire.
    """
    now = engine.clock() if now is None else now
    report = SweepReport(now=now)
    leases = leases or SweepLeases(engine.store, engine.clock)
    try:
        _sweep_shards(engine, now, limit, leases, report)
        engine.hooks.observe(Feature.sweep, now, leases)
    except Exception:
        leases.release()  # the process lives on: free the shards for the next sweeper
        raise
    leases.release()
    report.leases = list(leases.taken)
    report.leased_elsewhere = sorted(leases.elsewhere)
    for lease_id, exc in leases.failed.items():  # its shards wait for the next pass
        _failed(engine, report, "lease", lease_id, exc)
    for lease_id in report.leased_elsewhere:
        holder = leases.elsewhere[lease_id]
        log.info("sweep: %s is held by %s (pid %s on %s) until %s: left to it", lease_id,
                 holder.owner, holder.pid, holder.host, holder.until_epoch)
    return report


def busy_shards(engine: Core, shards: tuple[str, ...],
                due: Callable[[str], Sequence[object]],
                at_once: Callable[[], set[str] | None]) -> Callable[[], list[str]]:
    """Ask which shards have something due: ``at_once()`` (one request for every shard,
    the store's ``due_*_shards``), or, when it cannot say, every shard at once with
    ``due(shard)``. The returned call waits for the answers: the busy shards, from a
    random one on (sweepers that start together start apart)."""
    probe = engine.threads.submit(at_once)

    def busy() -> list[str]:
        seen = probe.result()
        if seen is None:
            asked = [engine.threads.submit(due, shard) for shard in shards]
            found = [shard for shard, hits in zip(shards, asked, strict=True)
                     if hits.result()]
        else:
            found = [shard for shard in shards if shard in seen]
        start = random.randrange(len(found)) if found else 0
        return found[start:] + found[:start]
    return busy


def _sweep_shards(engine: Core, now: float, limit: int, leases: SweepLeases,
                  report: SweepReport) -> None:
    """Timers, then reconcile visits, of every shard with something due whose lease this
    pass holds: the shard's page is read once the lease is held (what another sweeper
    did meanwhile is not read again), and each item is checked to be still ours."""
    store: StorePort = engine.store
    # Every shard of both indexes asked at once, in one request per index (or one Query
    # per shard): an idle pass writes nothing.
    busy_timers = busy_shards(engine, store.timer_shards,
                              lambda k: store.due_timers(now, 1, k),
                              lambda: store.due_timer_shards(now))
    busy_checks = busy_shards(engine, store.check_shards,
                              lambda k: store.due_workflow_checks(now, 1, k),
                              lambda: store.due_check_shards(now))
    timers, checks = busy_timers(), busy_checks()
    for shard in timers:
        if not leases.hold(shard):
            continue
        for due in store.due_timers(now, limit, shard):
            if not leases.hold(shard):
                break  # lost to another sweeper (we renewed too late): its shard now
            leases.keep_all()
            try:
                fire_timer(engine, due, now, report)
            except Exception as exc:  # one bad item, whatever it raises, never stops the pass
                _failed(engine, report, "timer", due.activity_exec_id, exc)
    for shard in checks:
        if not leases.hold(shard):
            continue
        for wx in store.due_workflow_checks(now, limit, shard):
            if not leases.hold(shard):
                break
            leases.keep_all()
            try:
                outcome = reconcile(engine, wx, now)
            except Exception as exc:  # likewise: recorded, and every other run still visited
                _failed(engine, report, "reconcile", wx, exc)
                continue
            {"timed_out": report.workflows_timed_out, "repaired": report.reconciled}.get(
                outcome, report.checked).append(wx)


def _failed(engine: Core, report: SweepReport, part: str, item: str, exc: Exception) -> None:
    """Record one item's failure: in the report, the log (with the traceback for what
    is not a WhimbrelError: a bug or a row no reader understands) and the metrics (the
    ``SweepErrors`` alarm, infra/whimbrel_infra/alarms.py)."""
    what = exc if isinstance(exc, WhimbrelError) else f"{type(exc).__name__}: {exc}"
    report.errors.append(f"{item}: {what}")
    log.warning("sweep (%s): %s: %s", part, item, what,
                exc_info=not isinstance(exc, WhimbrelError))
    report_sweep_error(engine.metrics, part, item, exc)


def fire_timer(engine: Core, due: Due, now: float, report: SweepReport) -> None:
    store = engine.store
    item = store.get_activity(due.activity_exec_id)
    if item is None or item.timer_epoch is None or item.timer_epoch > now or item.state is None:
        return  # gone, disarmed or pushed forward by a heartbeat since the index read
    defn = engine.definitions.definition_of(item)
    spec = defn.activity(item.activity_name)
    state = item.state
    done = _due(engine, item, defn, now)
    if done is not None:  # a timer fired, or held while its run is SUSPENDED
        if done == "fired":
            report.timers_fired.append(item.activity_exec_id)
        return
    if state in ACTIVITY_ACTIVE:
        # A result written before the deadline may still be on the stream: wait the
        # in-flight grace past it (docs/architecture.md, "Results written in time").
        # That wait is all the grace does: the reason says how long it really ran.
        grace = engine.in_flight_grace_seconds
        why = rules.fired(item, spec, now) if rules.fired(item, spec, now - grace) else None
        if why is None:  # a heartbeat moved the deadline on (or in grace): arm the next
            nxt = rules.running_deadline(spec, heartbeat_epoch=float(
                item.heartbeat_epoch or item.started_epoch or now), close_epoch=item.close_epoch)
            if nxt is not None and nxt <= now:
                nxt += grace  # passed, within the grace: look again when it is over
            store.try_set_activity(item.activity_exec_id,
                                   {"timer_epoch": nxt if nxt is not None else REMOVE},
                                   states=[state])
            return
        _time_out(engine, item, defn, now, why, report)
    elif state is A.REQUESTED:
        wf = store.get_workflow(item.workflow_exec_id)
        if wf is not None and wf.state is W.RUNNING:
            engine.flow.advance(wf, defn, item.activity_name, item.attempt)
            report.retries_launched.append(item.activity_exec_id)
        else:
            if not engine.ending.stop_activity(item, defn, ask_running=False):
                report.cancelled.append(item.activity_exec_id)
            if wf is not None:
                engine.ending.settle(wf.workflow_exec_id)
    elif state in ACTIVITY_PENDING:
        _time_out(engine, item, defn, now, rules.not_started_reason(item, spec), report)
    else:
        # A terminal state with an armed timer is a leftover: disarm it (only if still in
        # the state we judged; otherwise leave it to its new owner).
        store.try_set_activity(item.activity_exec_id,
                               {"timer_epoch": REMOVE}, states=[state])


def _due(engine: Core, item: ActivityRecord, defn: WorkflowDefinition,
         now: float) -> str | None:
    """The features' part for a due item (``Feature.due``), sharing one read of its run:
    ``"held"`` (its run is SUSPENDED), ``"fired"`` (a timer), ``"gone"`` (it moved on
    since the index read), or None when the sweep's own handling applies."""
    read: list[WorkflowRecord | None] = []

    def run() -> WorkflowRecord | None:
        if not read:
            read.append(engine.store.get_workflow(item.workflow_exec_id))
        return read[0]

    return engine.hooks.first_answer(Feature.due, item, defn, run, now, LISTENER)


def _time_out(engine: Core, item: ActivityRecord, defn: WorkflowDefinition, now: float, why: str,
              report: SweepReport) -> None:
    state = item.state or A.RUNNING
    spec = defn.activity(item.activity_name)
    changes = rules.changes_for(spec, state, A.TIMED_OUT, now=now,
                                workflow_name=item.workflow_name,
                                retention=engine.definitions.retention(defn), error=why)
    try:
        moved = engine.known.move(item.activity_exec_id, state, (A.TIMED_OUT,), changes,
                            actor=LISTENER, due_by=now)
    except StateConflict:
        return  # it moved on (or a heartbeat pushed the deadline) since we read it
    report.timed_out.append(item.activity_exec_id)
    engine.flow.after(moved)


def reconcile(engine: Core, wx: str, now: float | None = None) -> str:
    """Re-derive and redo every follow-up of one workflow execution. Idempotent.

    Returns ``"timed_out"`` (its deadline passed), ``"repaired"`` (something was left
    half done and is now done) or ``"checked"``.
    """
    now = engine.clock() if now is None else now
    wf = engine.store.get_workflow(wx)
    if wf is None:
        return "checked"
    defn = engine.definitions.definition_of(wf)
    outcome = "checked"
    # A redriven run's deadline counts from its redrive.
    if wf.state in WORKFLOW_LIVE and defn.timeout_seconds is not None \
            and now >= wf.running_since + float(defn.timeout_seconds):
        return "timed_out" if engine.ending.time_out_workflow(wf, defn) else "checked"
    if wf.state is W.REQUESTED:
        engine.starting.resume_start(wf, defn)
        outcome = "repaired"
    elif wf.state is W.RUNNING:
        if _reconcile_running(engine, wf, defn, now):
            outcome = "repaired"
    elif wf.state in WORKFLOW_WAITING:
        if _repair(engine, wf, defn, [], now):
            outcome = "repaired"  # QUEUED: in its queue, started if a slot is free
    elif wf.state is W.SUSPENDED:
        if _repair(engine, wf, defn, engine.store.list_activities(wx), now):
            outcome = "repaired"  # claims a suspend or resume left half done
    else:
        if wf.state in WORKFLOW_LIVE and _repair(
                engine, wf, defn, engine.store.list_activities(wx), now):
            outcome = "repaired"  # e.g. a child whose end its failing parent missed
        engine.ending.settle(wx)
    fresh = engine.store.get_workflow(wx)
    if fresh is not None and fresh.state in WORKFLOW_LIVE:
        age = max(0.0, now - fresh.running_since)
        interval = min(max(engine.reconcile_grace_seconds, age / 2),
                       MAX_RECONCILE_INTERVAL_SECONDS)
        engine.store.set_workflow(wx, {"check_epoch": engine.starting.next_check(
            fresh.running_since, now, defn, interval)}, states=WORKFLOW_LIVE)
    elif fresh is not None and fresh.check_epoch is not None:
        engine.store.set_workflow(wx, {"check_epoch": REMOVE}, states=[fresh.state])
    return outcome


def _reconcile_running(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                       now: float) -> bool:
    wx = wf.workflow_exec_id
    acts = engine.store.list_activities(wx)
    if engine.starting.resume_start(wf, defn, rows=acts):
        return True  # the start died half-way; the next visit checks the rest
    if engine.hooks.take_over(Feature.finish_start, wf, defn):
        return True  # a redrive died half-way (engine/redrive.py); likewise
    latest = latest_of(acts)
    # Maps' lanes and child runs; after a resume: held deadlines re-armed, READY
    # externals claimable again; kept signals given to READY waits.
    repaired = _repair(engine, wf, defn, acts, now)
    for name in defn.topological_order():
        act = latest.get(name)
        if act is None or act.state is None:
            continue
        spec = defn.activity(name)
        state = act.state
        if state is A.REQUESTED:
            if act.not_before_epoch is not None and act.not_before_epoch > now:
                continue  # a retry waiting for its time; its timer will fire
            # Every upstream resolved: COMPLETED, or a failure on_failure took over.
            if all(resolution(defn, latest, d) is not None for d in spec.depends_on):
                for d in spec.depends_on if len(spec.depends_on) > 1 else ():
                    engine.store.delete_dependency(wx, name, d)
                engine.flow.advance(wf, defn, name, act.attempt)
                repaired = True
        elif state is A.READY and spec.launcher.is_push and not spec.launcher.needs_worker:
            # (a READY python attempt waits for a worker's claim: engine/handover.py)
            engine.flow.advance(wf, defn, name, act.attempt, A.READY)
            repaired = True
        elif state in ACTIVITY_UNSUCCESSFUL \
                and resolution(defn, latest, name) is None:
            engine.flow.after(act)  # a retry (or the failure) whose follow-up was lost
            repaired = True
    fresh = engine.store.get_workflow(wx)
    if fresh is None or fresh.state is not W.RUNNING:
        return repaired
    if not open_activities(defn, engine.reads.latest_attempts(wx)):
        return engine.flow.complete_if_done(fresh, defn) or repaired
    _guard_retention(engine, acts, defn, now)
    return repaired


def _repair(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
            acts: list[ActivityRecord], now: float) -> bool:
    """Every feature's part of a live run's visit (``Feature.reconcile``), in order."""
    return any(engine.hooks.observe(Feature.reconcile, wf, defn, acts, now))


def _guard_retention(engine: Core, acts: list[ActivityRecord], defn: WorkflowDefinition,
                     now: float) -> None:
    """Nothing a live run needs may expire: push out rows that would expire soon."""
    retention = engine.definitions.retention(defn)
    if retention is None:
        return
    guard = min(RETENTION_GUARD_SECONDS, retention / 2)
    for act in acts:
        if act.expires_epoch is not None and act.expires_epoch < now + guard:
            engine.store.try_set_activity(
                act.activity_exec_id, {"expires_epoch": rules.expiry(now, retention)},
                states=ACTIVITY_TERMINAL)
