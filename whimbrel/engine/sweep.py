"""The heartbeat listener and reconciler: one ``sweep(now)`` pass.

* Times out RUNNING / CANCELLED_RUNNING activities whose heartbeat deadline passed,
  found through the sparse ``timers`` index (cost grows with the stale count only).
* Launches retries whose not-before time has come (same index).
* Visits workflows whose reconcile time has come (sparse ``reconcile`` index) and
  repairs whatever a crash left half done; finished workflows' stragglers are cancelled.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from whimbrel.contract.errors import WhimbrelError
from whimbrel.contract.ids import shard_of
from whimbrel.contract.states import ActivityState, Transition, WorkflowState
from whimbrel.engine.engine import Engine
from whimbrel.store import specs
from whimbrel.store.errors import ConditionFailed
from whimbrel.store.models import ActivityExecModel, WorkflowExecModel

log = logging.getLogger("whimbrel.sweep")

A = ActivityState
W = WorkflowState

#: Longest pause between two reconcile visits of a long-running workflow.
MAX_RECONCILE_INTERVAL_SECONDS = 3600.0


@dataclass
class SweepReport:
    """What one sweep did. Lists hold activity or workflow execution ids."""

    now: float
    timed_out: list[str] = field(default_factory=list)
    retries_launched: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    reconciled: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "now": self.now,
            "timed_out": self.timed_out,
            "retries_launched": self.retries_launched,
            "cancelled": self.cancelled,
            "reconciled": self.reconciled,
            "errors": self.errors,
        }


def sweep(engine: Engine, now: float | None = None, *, limit: int = 1000) -> SweepReport:
    """Run one heartbeat-listener pass at ``now`` (the engine's clock when None)."""
    now = engine.clock() if now is None else now
    report = SweepReport(now=now)
    for _wx, aeid in engine.store.due_timers(now, limit):
        try:
            _fire_timer(engine, aeid, now, report)
        except WhimbrelError as exc:  # one bad item must not stop the pass
            report.errors.append(f"{aeid}: {exc}")
            log.warning("sweep: %s: %s", aeid, exc)
    for wx in engine.store.due_workflow_checks(now, limit):
        try:
            reconcile(engine, wx, now)
            report.reconciled.append(wx)
        except WhimbrelError as exc:
            report.errors.append(f"{wx}: {exc}")
            log.warning("reconcile: %s: %s", wx, exc)
    return report


def _fire_timer(engine: Engine, aeid: str, now: float, report: SweepReport) -> None:
    store = engine.store
    m = store.models.activity_exec
    item = store.get_activity(aeid)
    if item is None or item.timer_epoch is None or float(item.timer_epoch) > now:
        return  # gone, disarmed or pushed forward by a heartbeat since the index read
    state = A(item.state)
    if state in (A.RUNNING, A.CANCELLED_RUNNING):
        hb = item.heartbeat_timeout_seconds
        last = item.heartbeat_epoch
        try:
            moved = store.move_activity(
                aeid, state.value, A.TIMED_OUT.value, now, actor="heartbeat-listener",
                extra=[m.ended_epoch.set(now), m.timer_shard.remove(), m.timer_epoch.remove(),
                       m.error.set(
                           f"no heartbeat for {now - float(last or now):.1f} s "
                           f"(timeout {hb} s)")],
                # The deadline we saw must still hold: a heartbeat that landed after the
                # index read moved timer_epoch forward and wins.
                condition_extra=m.timer_epoch <= now,
            )
        except ConditionFailed:
            return
        report.timed_out.append(aeid)
        engine.after(moved)
        return
    if state is A.REQUESTED:
        wf = engine.store.get_workflow(item.workflow_exec_id)
        if wf is not None and wf.state == W.RUNNING.value:
            _, defn = engine.definition(wf.workflow_name, int(wf.version))
            engine._ready_and_launch(wf, defn, item.activity_name, int(item.attempt))
            report.retries_launched.append(aeid)
        else:
            if engine._stop_activity(item, ask_running=False) is False:
                report.cancelled.append(aeid)
            if wf is not None:
                engine.settle(wf.workflow_exec_id)
        return
    # Any other state with an armed timer is a leftover: disarm it.
    try:
        # Only if still in the state we judged; otherwise leave it to its new owner.
        store.update_activity(aeid, [m.timer_shard.remove(), m.timer_epoch.remove()],
                              m.state == state.value)
    except ConditionFailed:
        pass


def reconcile(engine: Engine, wx: str, now: float | None = None) -> None:
    """Re-derive and redo every follow-up of one workflow execution. Idempotent."""
    now = engine.clock() if now is None else now
    wf = engine.store.get_workflow(wx)
    if wf is None:
        return
    _, defn = engine.definition(wf.workflow_name, int(wf.version))
    state = W(wf.state)
    if state is W.REQUESTED:
        engine.resume_start(wf, defn)
    elif state is W.RUNNING:
        _reconcile_running(engine, wf, now)
    else:
        engine.settle(wx)
    wf = engine.store.get_workflow(wx)
    if wf is not None and not W(wf.state).is_terminal:
        age = max(0.0, now - float(wf.created_epoch))
        interval = min(max(engine.reconcile_grace_seconds, age / 2),
                       MAX_RECONCILE_INTERVAL_SECONDS)
        engine.store.set_workflow_check(
            wx, shard_of(wx, specs.RECONCILE_SHARDS), now + interval,
            [s.value for s in W if not s.is_terminal])
    elif wf is not None:
        engine.store.clear_workflow_check(wx)


def _reconcile_running(engine: Engine, wf: WorkflowExecModel, now: float) -> None:
    _, defn = engine.definition(wf.workflow_name, int(wf.version))
    latest = engine.latest_attempts(wf.workflow_exec_id)
    for name in defn.topological_order():
        act = latest.get(name)
        if act is None:
            continue
        spec = defn.activity(name)
        state = A(act.state)
        if state is A.REQUESTED:
            if act.not_before_epoch is not None and float(act.not_before_epoch) > now:
                continue  # a retry waiting for its time; its timer will fire
            ups = [latest.get(d) for d in spec.depends_on]
            if all(u is not None and u.state == A.COMPLETED.value for u in ups):
                for d in spec.depends_on if len(spec.depends_on) > 1 else ():
                    engine.store.delete_dependency(wf.workflow_exec_id, name, d)
                engine._ready_and_launch(wf, defn, name, int(act.attempt))
        elif state is A.READY and spec.launcher.is_push:
            engine._queue_and_launch(wf, defn, act, A.READY)
        elif state in (A.QUEUED, A.PREPARING):
            if now - float(act.updated_epoch) > spec.start_timeout_seconds:
                _fail_lost_launch(engine, act, spec.start_timeout_seconds)
        elif state.is_terminal:
            engine.after(act)
    fresh = engine.store.get_workflow(wf.workflow_exec_id)
    if fresh is None or fresh.state != W.RUNNING.value:
        return
    latest = engine.latest_attempts(wf.workflow_exec_id)
    if all(latest.get(n) is not None and latest[n].state == A.COMPLETED.value
           for n in defn.names):
        for sink in defn.sinks:
            engine._maybe_complete(fresh, defn, sink)


def _fail_lost_launch(engine: Engine, act: ActivityExecModel, timeout: float) -> None:
    try:
        engine.transition(act.activity_exec_id, Transition.FAILED,
                          error=f"not RUNNING within {timeout:.0f} s of being queued "
                                "(launch lost)", actor="reconciler")
    except WhimbrelError:
        pass  # it moved on meanwhile: nothing lost
