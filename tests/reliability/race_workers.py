"""Code run in separate processes by test_races.py (importable by spawned children)."""

from __future__ import annotations

import time
from typing import Any

from whimbrel import Whimbrel
from whimbrel.contract.errors import WhimbrelError
from whimbrel.contract.states import Transition


def claim_until_done(endpoint: str, prefix: str, workflow_name: str,
                     workflow_ids: list[str], barrier: Any, deadline_s: float) -> list[str]:
    """Claim and complete activities until every workflow has finished."""
    wb = Whimbrel(endpoint_url=endpoint, table_prefix=prefix)
    claimed: list[str] = []
    barrier.wait()
    deadline = time.monotonic() + deadline_s
    try:
        while time.monotonic() < deadline:
            got = wb.claim(workflow_name=workflow_name)
            if got is None:
                if all(wb.engine.get_workflow(wx, with_activities=False).state.is_terminal
                       for wx in workflow_ids):
                    break
                time.sleep(0.01)  # poll interval of an idle worker, not a wait for a result
                continue
            claimed.append(got.activity_exec_id)
            wb.transition_activity(got.activity_exec_id, Transition.COMPLETED, output=len(claimed))
    finally:
        wb.close()
    return claimed


def move_once(endpoint: str, prefix: str, aeids: list[str], transition: str,
              barrier: Any) -> list[str]:
    """Try ``transition`` on each id right after the others are ready; report each result."""
    wb = Whimbrel(endpoint_url=endpoint, table_prefix=prefix)
    out: list[str] = []
    try:
        for aeid in aeids:
            barrier.wait()
            try:
                wb.transition_activity(aeid, Transition(transition))
                out.append("won")
            except WhimbrelError as exc:
                out.append(type(exc).__name__)
    finally:
        wb.close()
    return out
