"""Whether a slot's holder still holds it (engine/pools.py): the sweep's pass over one
shard of due slot checks and rate pacers, its check of a held slot, and the rule for a
holder the system gave up on while its code may still run."""

from __future__ import annotations

import logging
from collections.abc import Callable

from whimbrel.contract.pools import (
    RATE_ENTRY,
    check_after,
    held_after_time_out,
    is_run_pool,
    slot_ref,
)
from whimbrel.contract.records import ActivityRecord
from whimbrel.contract.states import ACTIVITY_NOT_LAUNCHED, WORKFLOW_WAITING, ActivityState
from whimbrel.engine.feature import Core
from whimbrel.engine.pool_port import PoolPort

log = logging.getLogger("whimbrel.pools")

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


def sweep_shard(core: Core, port: PoolPort, wake: Callable[[str, int | None], None],
                now: float, shard: str, in_flight: float) -> None:
    """One due shard of the ``pool_checks`` index in a sweep pass: a rate's pacer looks
    whether a token is there for its waiters, a held slot whose holder is gone is freed
    (:func:`next_check`); ``wake(pool, k)`` lets the next waiter in."""
    for pool, kind, number in port.due_pool_checks(now, 1000, shard):
        try:
            if kind == RATE_ENTRY:
                _pace(port, wake, pool, now)
            else:
                _check_slot(core, port, wake, pool, number, now, in_flight)
        except Exception as exc:  # one bad item never stops the pass (as sweep.py)
            log.warning("pool check %s#%s: %s: %s", pool, number, type(exc).__name__, exc)


def _pace(port: PoolPort, wake: Callable[[str, int | None], None], pool: str,
          now: float) -> None:
    seen = port.get_pacer(pool)
    if seen is None or seen > now or not port.disarm_pacer(pool, seen):
        return
    wake(pool, None)


def _check_slot(core: Core, port: PoolPort, wake: Callable[[str, int | None], None],
                pool: str, k: int, now: float, in_flight: float) -> None:
    slot = port.get_slot(pool, k)
    if slot.holder is None or slot.token is None or slot.check_epoch is None \
            or slot.check_epoch > now:
        return
    since = slot.since if slot.since is not None else now
    later = next_check(core, pool, k, slot.holder, now, now - since, in_flight)
    if later is not None:
        port.recheck_slot(pool, k, slot.holder, slot.token, later)
        return
    log.info("pool %s: slot %d freed (holder %s is gone)", pool, k, slot.holder)
    if port.release_slot(pool, k, slot.holder, slot.token):
        wake(pool, k)
