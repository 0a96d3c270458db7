"""Index keys derived from the engine's intent (the engine never spells a shard).

A change set carrying ``timer_epoch`` arms the sparse ``timers`` index (its shard is
added), ``check_epoch`` the ``reconcile`` index, and ``claimable`` (``(workflow_name,
activity_name[, order, priority])`` or ``REMOVE``) the ``claimable`` index; a run's
state change moves its ``by_name_state`` key. Every key that many items share carries a
write shard derived from the item's id (``spec_core.*_SHARDS``), so no one key value takes a
hot share of its index (docs/architecture.md, "Scale").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from whimbrel.contract.dataflow import split_item
from whimbrel.contract.ids import parse_activity_exec_id, shard_of
from whimbrel.contract.priority import DEFAULT_PRIORITY
from whimbrel.contract.records import REMOVE, Changes
from whimbrel.store import spec_core

__all__ = ["day_key", "fan_out", "index_changes", "item_partition", "latest_key",
           "name_state_key", "rejection_key"]


def name_state_key(workflow_name: str, state: str, workflow_exec_id: str) -> str:
    """The ``by_name_state`` hash key of run ``workflow_exec_id`` of ``workflow_name`` in
    ``state``: its write shard is fixed by its id, so a state change moves it between
    keys of the same shard."""
    return spec_core.name_state_key(workflow_name, state,
                                shard_of(workflow_exec_id, spec_core.NAME_STATE_SHARDS))


def state_key(state: str, workflow_exec_id: str) -> str:
    """The ``by_state`` hash key of run ``workflow_exec_id`` in ``state`` (its write shard
    fixed by its id, as for ``by_name_state``)."""
    return spec_core.state_key(state, shard_of(workflow_exec_id, spec_core.STATE_SHARDS))


def day_key(workflow_exec_id: str) -> str:
    """The ``by_day`` hash key of a run (its write shard; the day is not in it)."""
    return spec_core.by_day_key(shard_of(workflow_exec_id, spec_core.BY_DAY_SHARDS))


def latest_key(workflow_name: str, copy: int) -> str:
    """The key of copy ``copy`` of a definition name's latest-version pointer (a name
    never holds ``#``, so it is never a definition's own key)."""
    return f"{workflow_name}#latest#{copy:02d}"


def rejection_key(day: str, rejection_id: str) -> str:
    """The ``rejection`` table's hash key of a rejection of ``day``."""
    return spec_core.day_key(day, shard_of(rejection_id, spec_core.REJECTION_SHARDS))


def item_partition(workflow_exec_id: str, map_name: str, index: int) -> str:
    """The ``map_item`` hash key of item ``index`` of a run's map (all its attempts):
    consecutive items, which run at the same time, land on different keys."""
    return spec_core.map_item_key(workflow_exec_id, map_name, index % spec_core.MAP_ITEM_PARTITIONS)


def index_changes(changes: Changes, activity_exec_id: str | None = None,
                  workflow_exec_id: str | None = None) -> dict[str, Any]:
    """``changes`` with the sparse-index keys derived from the engine's intent: a change
    set carrying ``timer_epoch`` arms the sparse ``timers`` index (its shard is added),
    ``check_epoch`` the ``reconcile`` index, and ``claimable`` (``(workflow_name,
    activity_name)`` or ``REMOVE``) the ``claimable`` index."""
    out = dict(changes)
    if "timer_epoch" in out and activity_exec_id:
        out["timer_shard"] = (REMOVE if out["timer_epoch"] is REMOVE
                              else attempt_shard(activity_exec_id, spec_core.TIMER_SHARDS))
    if "check_epoch" in out and workflow_exec_id:
        out["check_shard"] = (REMOVE if out["check_epoch"] is REMOVE
                              else shard_of(workflow_exec_id, spec_core.RECONCILE_SHARDS))
    if "claimable" in out:
        claim = out.pop("claimable")
        if claim is REMOVE or not claim or not activity_exec_id:
            out["claim_shard"] = out["claim_key"] = REMOVE
        else:
            workflow_name, activity_name, *rest = claim
            order = rest[0] if rest else None
            ordered = len(rest) > 1 and rest[1] != DEFAULT_PRIORITY
            target = rest[2] if len(rest) > 2 else None
            shard = priority_claim_shard(activity_exec_id) if ordered \
                else attempt_shard(activity_exec_id, spec_core.CLAIM_SHARDS)
            if target:
                # Code for a worker (python): its own shards, keyed by module and
                # function, so an external claim never takes it and a worker reads
                # only its modules' entries.
                module, _, function = str(target).partition(":")
                out["claim_shard"] = WORKER_SHARD_PREFIX + shard
                out["claim_key"] = claim_key(module, function, activity_exec_id, order)
            else:
                out["claim_shard"] = shard
                out["claim_key"] = claim_key(workflow_name, activity_name,
                                             activity_exec_id, order)
    return out


def attempt_shard(activity_exec_id: str, shards: int) -> str:
    """The ``timers``/``claimable`` shard of an attempt: of ``shards``, or of
    ``MAP_ITEM_INDEX_SHARDS`` for a map's item (``map_item``'s indexes have fewer). A
    legacy item in its run's partition gets the same shard, one of ``activity_exec``'s."""
    try:
        name = parse_activity_exec_id(activity_exec_id).activity_name
    except ValueError:
        name = ""  # not an id the engine makes: no map item
    if split_item(name)[1] is not None:
        shards = spec_core.MAP_ITEM_INDEX_SHARDS
    return shard_of(activity_exec_id, shards)


def claim_key(workflow_name: str, activity_name: str, activity_exec_id: str,
              order: str | None) -> str:
    """The ``claimable`` index's sort key: ``<workflow>/<activity>/<order>/<id>`` — a
    claim filtered by workflow (and activity) reads its candidates in serving order
    (priority, then the oldest run: contract/priority.py ``order_text``; read back by
    ``claim_key_order``)."""
    middle = f"{order}/" if order else ""
    return f"{workflow_name}/{activity_name}/{middle}{activity_exec_id}"


#: What begins the ``claimable`` shard of an attempt left for a worker (``w3``, ``wp1``).
WORKER_SHARD_PREFIX = "w"


def priority_claim_shard(activity_exec_id: str) -> str:
    """The ``claimable`` shard of an attempt whose priority is not the default (one of
    ``PRIORITY_CLAIM_SHARDS``, read a window at a time: engine/claims.py)."""
    return f"p{shard_of(activity_exec_id, spec_core.PRIORITY_CLAIM_SHARDS)}"


def is_priority_entry(changes: dict[str, Any]) -> bool:
    """Whether ``changes`` (as :func:`index_changes` made them) put an attempt on a
    priority shard, an external attempt's (``p3``) or a worker's (``wp3``)."""
    shard = changes.get("claim_shard")
    return isinstance(shard, str) and shard.removeprefix(WORKER_SHARD_PREFIX).startswith("p")


_T = TypeVar("_T")
_R = TypeVar("_R")
#: Threads that read the shards of one index at once (a read of every shard takes one
#: round trip, not N).
_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="whimbrel-shards")


def fan_out(read: Callable[[_T], _R], shards: Iterable[_T]) -> list[_R]:
    """``read`` of every shard, in parallel, results in the order of ``shards``."""
    todo = list(shards)
    if len(todo) <= 1:
        return [read(s) for s in todo]
    try:
        futures = [_POOL.submit(read, s) for s in todo]
    except RuntimeError:  # the interpreter exits and takes no new work: one at a time
        return [read(s) for s in todo]
    return [f.result() for f in futures]
