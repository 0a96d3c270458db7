"""Index keys derived from the engine's intent (the engine never spells a shard).

A change set carrying ``timer_epoch`` arms the sparse ``timers`` index (its shard is
added), ``check_epoch`` the ``reconcile`` index, and ``claimable`` (``(workflow_name,
activity_name)`` or ``REMOVE``) the ``claimable`` index; a run's state change moves its
``by_name_state`` key.
"""

from __future__ import annotations

from typing import Any

from whimbrel.contract.ids import shard_of
from whimbrel.contract.records import REMOVE, Changes
from whimbrel.store import specs

__all__ = ["index_changes", "name_state_key"]


def name_state_key(workflow_name: str, state: str) -> str:
    """The ``by_name_state`` hash key of a run of ``workflow_name`` in ``state``."""
    return specs.name_state_key(workflow_name, state)


def index_changes(changes: Changes, activity_exec_id: str | None = None,
                  workflow_exec_id: str | None = None) -> dict[str, Any]:
    """``changes`` with the sparse-index keys derived from the engine's intent: a change
    set carrying ``timer_epoch`` arms the sparse ``timers`` index (its shard is added),
    ``check_epoch`` the ``reconcile`` index, and ``claimable`` (``(workflow_name,
    activity_name)`` or ``REMOVE``) the ``claimable`` index."""
    out = dict(changes)
    if "timer_epoch" in out and activity_exec_id:
        out["timer_shard"] = (REMOVE if out["timer_epoch"] is REMOVE
                              else shard_of(activity_exec_id, specs.TIMER_SHARDS))
    if "check_epoch" in out and workflow_exec_id:
        out["check_shard"] = (REMOVE if out["check_epoch"] is REMOVE
                              else shard_of(workflow_exec_id, specs.RECONCILE_SHARDS))
    if "claimable" in out:
        claim = out.pop("claimable")
        if claim is REMOVE or not claim or not activity_exec_id:
            out["claim_shard"] = out["claim_key"] = REMOVE
        else:
            workflow_name, activity_name = claim
            out["claim_shard"] = shard_of(activity_exec_id, specs.CLAIM_SHARDS)
            out["claim_key"] = f"{workflow_name}/{activity_name}/{activity_exec_id}"
    return out
