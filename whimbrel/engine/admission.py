"""Admission (part of the core): where a waiting attempt is served (its claim key's
order, contract/priority.py), whether a move starts its attempt, the features' answer
to ``admit`` (engine/pools.py gives it), and what a write that readies an attempt
carries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.priority import attempt_priority, order_text
from whimbrel.contract.records import REMOVE, ActivityRecord, Changes, WorkflowRecord
from whimbrel.contract.states import ACTIVITY_STARTING, ActivityState
from whimbrel.engine.feature import Admission, Core, Feature
from whimbrel.engine.ports import runs_here, takes_here


def claim_order(spec: ActivityDefinition, wf: WorkflowRecord, since: float | None) -> str:
    """Where an attempt of ``spec`` in ``wf`` that waits since ``since`` (its
    ``ready_epoch``; None: readied before that was kept, its run's creation) is served
    among waiting ones (the ``claimable`` index, a pool's waiters): contract/priority.py."""
    return order_text(attempt_priority(spec.priority, wf.priority),
                      wf.created_epoch if since is None else since)


def claim_intent(spec: ActivityDefinition, wf: WorkflowRecord,
                 since: float | None) -> tuple[Any, ...]:
    """What a ``claimable`` intent carries beside the names: where the attempt is served,
    and its priority (any but the default goes to the shards every claim reads); for
    code only a worker runs, its ``module:function`` too (the store keys it under the
    worker shards by module: store/keys.py)."""
    out: tuple[Any, ...] = (claim_order(spec, wf, since),
                            attempt_priority(spec.priority, wf.priority))
    target = spec.launcher.worker_target
    return out if target is None else (*out, target)


def waiting_since(engine: Core, item: ActivityRecord, changes: Changes) -> float | None:
    """When ``item`` began to wait: the READY write in ``changes``, or its stored
    ``ready_epoch`` (this engine's last image of it, else a read: a caller may pass a
    record that holds only its state). None: not READY yet, or readied before the time
    was kept."""
    written = changes.get("ready_epoch")
    if isinstance(written, float | int):
        return float(written)
    if item.ready_epoch is not None or item.state is not ActivityState.READY:
        return item.ready_epoch
    known = engine.known.remembered(item.activity_exec_id)
    if known is None or known.ready_epoch is None:
        known = engine.store.get_activity(item.activity_exec_id)
    return known.ready_epoch if known is not None else None


def starts(path: Sequence[ActivityState], changes: Changes) -> bool:
    """Whether a move along ``path`` starts its attempt (QUEUED, PREPARING, RUNNING) or
    makes it claimable (READY, in the ``claimable`` index): what a pool admits."""
    claim = changes.get("claimable")
    return path[-1] in ACTIVITY_STARTING or (claim is not None and claim is not REMOVE)


def admission(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
              item: ActivityRecord | None, changes: Changes) -> Admission | None:
    """The first feature's answer to ``admit`` (None: nothing limits it)."""
    return engine.hooks.first_answer(Feature.admit, wf, defn, item, changes)


def ready_changes(engine: Core, spec: ActivityDefinition, wf: WorkflowRecord, now: float,
                  changes: Changes) -> dict[str, Any]:
    """What a write that makes ``spec`` READY carries besides ``rules.changes_for``: where
    a claim serves it (priority, then the oldest run), what the features add (a wait's
    deadline and ``waiting_for``) or take away (no claim while the run is SUSPENDED)."""
    out = dict(changes)
    # Code only a worker runs, written READY, was left for a worker by the caller's one
    # ``leaves_for_worker`` answer (it launches what it keeps): asking again could differ
    # (a thread freed, the scope closed) and strand it READY, claimable by no one.
    if "claimable" not in out and spec.launcher.needs_worker:
        out["claimable"] = (wf.workflow_name, spec.name)  # READY for a worker to claim
    claim = out.get("claimable")
    if isinstance(claim, tuple) and len(claim) == 2:
        out["claimable"] = (*claim, *claim_intent(spec, wf, out.get("ready_epoch", now)))
    engine.hooks.observe(Feature.ready, spec, wf, now, out)
    return out


def leaves_for_worker(engine: Core, spec: ActivityDefinition, *, launch: bool = True) -> bool:
    """Whether this process leaves an attempt of ``spec`` READY and claimable for a
    worker instead of launching it: code only a worker runs (python) that this
    process is not a worker for now (``ports.runs_here``), or has no launcher for."""
    if not spec.launcher.needs_worker:
        return False
    launcher = engine.launchers.get(spec.launcher.kind)
    if launcher is None:
        return True
    config = spec.launcher.config
    # ``launch``: a launch follows a no, so a thread is promised to it (``takes_here``);
    # else only whether this process is a worker for the code at all.
    return not (takes_here(launcher, config) if launch else runs_here(launcher, config))


def unpromise(engine: Core, spec: ActivityDefinition) -> None:
    """Give back the thread ``leaves_for_worker`` promised to a launch that did not
    happen (its write was lost, or a pool held it)."""
    launcher = engine.launchers.get(spec.launcher.kind)
    unreserve = getattr(launcher, "unreserve", None)
    if unreserve is not None and spec.launcher.needs_worker:
        unreserve()
