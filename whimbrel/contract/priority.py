"""Priority and starvation protection (pure; issue 22).

Queued runs (``max_running``), pool admission and ``claim`` all serve waiting work in one
order: **lower priority number first, then the longest waiting**, with **aging** so that nothing
waits forever behind a stream of more urgent work.

The aging rule: a waiting item's *effective priority* improves by one level for every
:data:`AGING_SECONDS` (5 minutes) it has waited, down to 0. So an item of priority ``p``
is served no later than any item enqueued ``p * AGING_SECONDS`` after it (at priority 9:
45 minutes), whatever arrives meanwhile; work that waits less than ``AGING_SECONDS`` is
served in strict priority order.

DynamoDB cannot re-sort an index as time passes, so the stored form is the continuous
version of the same rule, :func:`sort_key` = ``enqueued_at + priority * AGING_SECONDS``:
one level is worth ``AGING_SECONDS`` of waiting. Reading an index in ascending sort-key
order serves exactly by :func:`order_key` up to the rounding of whole levels (within one
level, the older first), and the sort key never needs rewriting.
"""

from __future__ import annotations

import math

from whimbrel.contract.errors import InvalidInput

MIN_PRIORITY = 0
MAX_PRIORITY = 9
DEFAULT_PRIORITY = 5
#: Waiting this long improves an item's effective priority by one level.
AGING_SECONDS = 300.0


def check_priority(value: object, field: str = "priority") -> int:
    """``value`` when it is a priority (an int from 0 to 9; a bool is not one).

    Raises:
        InvalidInput: anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int) \
            or not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise InvalidInput(f"{field} must be an integer from {MIN_PRIORITY} (first) to "
                           f"{MAX_PRIORITY}, not {value!r}"[:200], field=field)
    return value


def effective_priority(priority: int, enqueued_at: float, now: float, *,
                       aging_seconds: float = AGING_SECONDS) -> int:
    """``priority`` improved by one level per ``aging_seconds`` waited, never below 0
    (a clock that reads before ``enqueued_at`` counts as no wait)."""
    waited = max(0.0, now - enqueued_at)
    return max(MIN_PRIORITY, priority - math.floor(waited / aging_seconds))


def order_key(priority: int, enqueued_at: float, now: float, *,
              aging_seconds: float = AGING_SECONDS) -> tuple[int, float]:
    """Sort waiting items by this, ascending, to serve them: effective priority, then
    the oldest first."""
    return (effective_priority(priority, enqueued_at, now, aging_seconds=aging_seconds),
            enqueued_at)


def sort_key(priority: int, enqueued_at: float, *,
             aging_seconds: float = AGING_SECONDS) -> float:
    """The time-free key an index stores: ``enqueued_at + priority * aging_seconds``."""
    return enqueued_at + priority * aging_seconds


def sort_key_text(priority: int, enqueued_at: float, *,
                  aging_seconds: float = AGING_SECONDS) -> str:
    """:func:`sort_key` as fixed-width text that sorts like the number (a DynamoDB
    string sort key): 13 integer digits and 6 decimals, good past the year 30000."""
    return f"{sort_key(priority, enqueued_at, aging_seconds=aging_seconds):020.6f}"


def attempt_priority(activity: int, run: int | None) -> int:
    """The priority an attempt waits with: its activity's, shifted by its run's distance
    from the default (``start_workflow(priority=)``; None: the default), kept within 0-9.
    A default run leaves the activity's; a default activity takes the run's; an urgent
    step of an urgent run is more urgent still."""
    shift = 0 if run is None else run - DEFAULT_PRIORITY
    return max(MIN_PRIORITY, min(MAX_PRIORITY, activity + shift))


def order_text(priority: int, since: float) -> str:
    """Where an attempt or a run waits (pool waiters, QUEUED runs, the ``claimable``
    index): :func:`sort_key_text` of its priority and when its wait began — an
    attempt's READY write (``ready_epoch``), a QUEUED run's creation — so the aging
    counts the wait, not the run's age. Both are stored on the item, so every replay of
    a wait computes the same entry; of two equals, the longer waiting is served first."""
    return sort_key_text(priority, since)


def claim_key_order(claim_key: str | None) -> str:
    """The order part of a ``claimable`` key ``<workflow>/<activity>/<order>/<id>`` ("" for
    a key written before issue 22, ``<workflow>/<activity>/<id>``: served first)."""
    parts = (claim_key or "").split("/")
    return parts[2] if len(parts) >= 4 else ""


def serving_grain(claim_key: str | None, grain_seconds: float) -> float:
    """Where a ``claimable`` entry is served (its key's order: a priority level is worth
    ``AGING_SECONDS`` of waiting) to ``grain_seconds``: entries in one grain are equals
    (a claim tries them in a random order). A key from before priorities comes first."""
    order = claim_key_order(claim_key)
    return float(order) // grain_seconds if order else -1.0
