"""Whether a slot's holder still holds it (engine/pools.py): the sweep's check of a held
slot, and the rule for a holder the system gave up on while its code may still run."""

from __future__ import annotations

from whimbrel.contract.pools import (
    check_after,
    held_after_time_out,
    is_run_pool,
    slot_ref,
)
from whimbrel.contract.records import ActivityRecord
from whimbrel.contract.states import ACTIVITY_NOT_LAUNCHED, WORKFLOW_WAITING, ActivityState
from whimbrel.engine.feature import Core

A = ActivityState


def kept_until(core: Core, item: ActivityRecord, now: float) -> float | None:
    """Until when a TIMED_OUT ``item`` keeps its slot (None: not TIMED_OUT, or give it
    back now): contract/pools.py ``held_after_time_out``."""
    if item.state is not A.TIMED_OUT:
        return None
    hb = item.heartbeat_timeout_seconds
    if not hb and item.workflow_version is not None:
        defn = core.definitions.definition(item.workflow_name, item.workflow_version)[1]
        hb = defn.activity(item.activity_name).heartbeat_timeout_seconds
    return held_after_time_out(late=item.late_epoch is not None, now=now,
                               heartbeat_epoch=item.heartbeat_epoch, heartbeat_timeout=hb,
                               started_epoch=item.started_epoch,
                               close_epoch=item.close_epoch)


def next_check(core: Core, pool: str, k: int, holder: str, now: float,
               held_for: float, in_flight: float) -> float | None:
    """When to check slot ``k`` next while ``holder`` still holds it, or None to free it
    now. A holder holds it while live and recording it (a timed-out attempt while its
    code may still run: :func:`kept_until`), or while live, not launched and recording
    nothing for less than ``in_flight`` seconds (its admitting write may still come)."""
    ref = slot_ref(pool, k)
    later = now + check_after(held_for)
    if is_run_pool(pool):
        wf = core.store.get_workflow(holder)
        if wf is None or wf.state.is_terminal:
            return None
        if wf.pool_slot is None:
            return later if wf.state in WORKFLOW_WAITING and held_for < in_flight else None
        return later if wf.pool_slot == ref else None
    item = core.store.get_activity(holder)
    if item is None or item.state is None:
        return None
    if item.state.is_terminal:
        return kept_until(core, item, now) if item.pool_slot == ref else None
    if item.pool_slot is None:
        return later if item.state in ACTIVITY_NOT_LAUNCHED and held_for < in_flight \
            else None
    return later if item.pool_slot == ref else None
