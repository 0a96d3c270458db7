"""Pools (pure; issue 22): named limits shared by activities of any definitions.

A pool has ``slots`` (at most that many attempts hold one at once: RUNNING, or QUEUED /
PREPARING on their way there) and ``per_second`` (at most that many attempts start per
second, on average, with a burst of one second's worth). ``None`` is no limit of that
kind; a pool with both None limits nothing (it only names a group: ``set_pool`` can
lift its limits without editing definitions). ``slots=0`` closes the pool: nothing new
is admitted until it is raised.

**Storage without a hot key** (the design the engine wiring follows; DESIGN.md §4):

* *Slots* are one item each, ``pool#<name>#<k>`` for ``k`` in ``0..slots-1``: a slot is
  free without a ``holder`` and taken with one. An attempt acquires by probing at most
  :data:`MAX_PROBES` slots in :func:`probe_order` — pseudo-random and fixed by the
  attempt's id, so load spreads evenly and a replay probes the same slots — each a
  conditional write ``attribute_not_exists(holder)`` that sets ``holder`` (the attempt's
  id), ``token`` (unique to this acquisition) and a ``check_at`` in the sparse timers
  index. The slot ``k`` won is written onto the attempt row by the same actor's
  ``→ QUEUED`` / claim write; an actor that loses that write releases its own slot
  (``token = :mine``). Every item is written at most once per admission, so a pool of
  ``S`` slots spreads its writes over ``S`` partition keys.
* A slot is **released** by the attempt's end (any terminal state: completed, failed,
  timed out, cancelled) with a conditional write ``holder = :attempt``; a release
  replayed finds it free and changes nothing. A slot whose holder died before recording
  it, or whose holder ended without releasing it, is freed by the sweep at its
  ``check_at``: free it when the holder's row is terminal, missing, or records another
  slot. So slots are neither leaked (the sweep) nor counted twice (one holder per item).
* When every probed slot is taken the activity stays READY/REQUESTED and is written to
  the pool's *waiters* (``pool_wait#<name>#<shard>`` partitions, sort key
  :func:`whimbrel.contract.priority.sort_key_text`); a release admits the first waiter
  of a shard (lower priority number first, then oldest, with aging).
* *Rate* is a token bucket split over :func:`rate_shards` items
  ``pool#<name>#rate#<j>``, each refilling at ``per_second / shards`` with a capacity of
  one second's worth (at least one token). A start takes one token from a shard chosen
  by :func:`shard_choice` (a second shard if that one is empty) with an optimistic
  conditional write on the ``(tokens, refilled_at)`` it read; each shard sees at most
  :data:`RATE_PER_SHARD` takes per second.
* ``WorkflowDefinition.max_running`` is the same machinery: an implicit pool
  :func:`run_pool` of ``max_running`` slots per definition name, whose holders are
  workflow executions (a run holds a slot from RUNNING to its end; a start that finds
  none waits QUEUED among the pool's waiters).
* **Per-key pools** (``ActivityDefinition.pool_key``, issue 29): an attempt of a keyed
  activity takes its slots and tokens in the *keyed pool* :func:`keyed_pool` — the
  pool's name, ``~`` and the key's value (hashed when it is not short and plain) — so
  each key value has its own ``slots`` items, waiters, rate shards and pacer, and every
  item above is written unchanged under that name: release, wake and the sweep's
  checks need nothing new. Its settings are the pool's (:func:`base_pool`): one
  ``set_pool`` limits every key. Keys spread as pools do (each key's ``S`` slots on
  ``S`` partition keys); a million tenants are a million small pools, never one item.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from whimbrel.contract.conditions import INPUT_KEY, compile_expression, expression_problem
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.limits import NAME_PATTERN

_NAME = re.compile(NAME_PATTERN)

#: The most slots a pool may have (one item each).
MAX_SLOTS = 100_000
#: The highest rate a pool may have (starts per second).
MAX_PER_SECOND = 100_000.0
#: Slots one admission tries before the activity waits for a release.
MAX_PROBES = 4
#: Takes per second one rate shard is sized for (1 WCU each, far below the ~1,000
#: WCU/s of a partition, and few enough that optimistic writes rarely collide).
RATE_PER_SHARD = 100.0
#: The most shards one pool's rate is split over.
MAX_RATE_SHARDS = 1_000
SLOT_PREFIX = "pool#"
WAIT_PREFIX = "wait#"
#: Partitions of one pool's waiters: each waited admission writes its entry twice (put,
#: delete), so 4 keys carry 2,000 waited admissions/s; a release reads the head of each.
WAIT_SHARDS = 4
#: The range key of a pool's settings item, of a slot item and of a rate shard.
SETTINGS_ENTRY = "settings"
SLOT_ENTRY = "slot"
RATE_ENTRY = "rate"
#: A held slot is checked by the sweep this long after it was taken (then backing off
#: with the holder's age, up to :data:`MAX_CHECK_SECONDS`): a holder that ended without
#: releasing it (a crash between two writes) gives it back then.
SLOT_CHECK_SECONDS = 120.0
MAX_CHECK_SECONDS = 3600.0


@dataclass(frozen=True)
class Pool:
    """A named limit (``Whimbrel.set_pool``).

    Attributes:
        name: letters, digits, ``_`` and ``-`` (up to 64), starting with a letter.
        slots: at most this many attempts hold a slot at once; 0 closes the pool;
            None: no limit.
        per_second: at most this many starts per second; None: no limit.
    """

    name: str
    slots: int | None = None
    per_second: float | None = None

    def problems(self) -> list[str]:
        """Every problem with this pool; empty when it is valid."""
        out: list[str] = []
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            out.append(f"pool name must match {NAME_PATTERN}, not {self.name!r}"[:300])
        s = self.slots
        if s is not None and (isinstance(s, bool) or not isinstance(s, int)
                              or not 0 <= s <= MAX_SLOTS):
            out.append(f"slots must be a whole number from 0 (closed) to {MAX_SLOTS}, or "
                       f"None (no limit), not {s!r}"[:300])
        r = self.per_second
        if r is not None and (isinstance(r, bool) or not isinstance(r, int | float)
                              or not 0 < r <= MAX_PER_SECOND):
            out.append(f"per_second must be a number above 0 and at most "
                       f"{MAX_PER_SECOND:.0f}, or None (no limit), not {r!r}"[:300])
        return out

    def validate(self) -> Pool:
        """Return self when valid.

        Raises:
            InvalidInput: naming the problems (``field`` is the first bad one).
        """
        problems = self.problems()
        if problems:
            field = problems[0].split(" ", 1)[0]
            raise InvalidInput(f"pool {self.name!r}: " + "; ".join(problems),
                               field="name" if field == "pool" else field,
                               problems=problems)
        return self

    @property
    def unlimited(self) -> bool:
        return self.slots is None and self.per_second is None


# -- keys and shards -----------------------------------------------------------------------

def slot_key(pool: str, k: int) -> str:
    """The key of slot ``k`` of ``pool``: ``pool#<name>#<k>``."""
    return f"{SLOT_PREFIX}{pool}#{k}"


def settings_key(pool: str) -> str:
    """The key of a pool's settings item: ``pool#<name>``."""
    return f"{SLOT_PREFIX}{pool}"


def wait_key(pool: str, shard: int | str) -> str:
    """The key of waiter shard ``shard`` of ``pool``: ``wait#<name>#<shard>``."""
    return f"{WAIT_PREFIX}{pool}#{shard}"


def waiter_entry(order: str, holder: str) -> str:
    """A waiter's range key: its order (:func:`whimbrel.contract.priority.sort_key_text`)
    then its holder's id, so a shard reads in serving order and an entry is unique."""
    return f"{order}#{holder}"


def slot_ref(pool: str, k: int | None) -> str:
    """What an admitted holder's row records (``pool_slot``): ``<pool>#<k>``, the slot it
    holds, or ``<pool>`` alone when it was admitted without one (a pool with a rate and
    no ``slots``, or no limit at all): "admitted" is always "``pool_slot`` is set"."""
    return pool if k is None else f"{pool}#{k}"


def parse_slot_ref(ref: str) -> tuple[str, int | None]:
    """``(pool, k)`` of a :func:`slot_ref` (``k`` None: admitted without a slot).

    Raises:
        InvalidInput: not a slot reference.
    """
    pool, sep, k = ref.rpartition("#")
    if not sep:
        pool, k = ref, ""
    if not pool or (k and not k.isdigit()):
        raise InvalidInput(f"not a pool slot: {ref!r}"[:200], field="pool_slot")
    return pool, int(k) if k else None


def is_run_pool(pool: str) -> bool:
    """Whether ``pool`` is a definition's ``max_running`` pool (its holders are runs)."""
    return pool.startswith(_RUN_POOL)


def held_after_time_out(*, late: bool, now: float, heartbeat_epoch: float | None,
                        heartbeat_timeout: float | None, started_epoch: float | None,
                        close_epoch: float | None) -> float | None:
    """Until when a TIMED_OUT attempt keeps its slot (None: give it back now).

    The system gave up on it, but its code may still run (DESIGN §1): its slot is held
    until the code stops — its late report (``late``) — or shows no sign of life. With
    a heartbeat, a sign of life is a heartbeat (a timed-out attempt's heartbeats are
    still recorded), so it keeps the slot while it beats. Without one, nothing can say
    it lives: it keeps the slot as long again as its ``start_to_close_seconds`` past its
    close deadline, then the slot is given back (give such work a heartbeat timeout to
    hold it exactly).
    """
    if late:
        return None
    if heartbeat_timeout:
        last = heartbeat_epoch if heartbeat_epoch is not None else started_epoch
        until = None if last is None else last + heartbeat_timeout
    elif close_epoch is not None and started_epoch is not None:
        until = close_epoch + (close_epoch - started_epoch)
    else:
        until = None
    return until if until is not None and until > now else None


def check_after(held_for: float) -> float:
    """Seconds until a held slot's next check: :data:`SLOT_CHECK_SECONDS`, then half its
    holder's age, at most :data:`MAX_CHECK_SECONDS` (a long run costs a few checks)."""
    return min(max(SLOT_CHECK_SECONDS, held_for / 2), MAX_CHECK_SECONDS)


@dataclass(frozen=True)
class PoolInfo:
    """A pool as ``get_pool`` / ``list_pools`` report it.

    Attributes:
        in_use: slots held now (counted on request: ``get_pool``; None in a listing).
        waiting: attempts (or runs) waiting for it (likewise).
    """

    name: str
    slots: int | None
    per_second: float | None
    created_epoch: float
    updated_epoch: float
    in_use: int | None = None
    waiting: int | None = None
    #: The most slots it ever had (slots above a lowered limit drain as they end).
    slots_high: int | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "slots": self.slots,
                                  "per_second": self.per_second,
                                  "created_epoch": self.created_epoch,
                                  "updated_epoch": self.updated_epoch}
        if self.in_use is not None:
            out["in_use"] = self.in_use
        if self.waiting is not None:
            out["waiting"] = self.waiting
        return out


@dataclass(frozen=True)
class Slot:
    """One slot item as stored (``holder`` None: free)."""

    pool: str
    k: int
    holder: str | None = None
    token: str | None = None
    since: float | None = None
    check_epoch: float | None = None


@dataclass(frozen=True)
class Waiter:
    """One waiter entry: ``holder`` (an attempt's or a run's id) waits for ``pool``."""

    pool: str
    shard: str
    entry: str
    holder: str


_RUN_POOL = "run:"


def run_pool(workflow_name: str) -> str:
    """The implicit pool of a definition's ``max_running``: ``run:<workflow_name>``
    (``:`` is in no pool name a user can give, so the two never collide)."""
    return f"{_RUN_POOL}{workflow_name}"


def rate_shard_key(pool: str, j: int) -> str:
    """The key of rate shard ``j`` of ``pool``: ``pool#<name>#rate#<j>``."""
    return f"{SLOT_PREFIX}{pool}#rate#{j}"


def _draw(seed: str, i: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}#{i}".encode()).digest()[:8], "big")


def probe_order(slots: int, seed: str, probes: int = MAX_PROBES) -> tuple[int, ...]:
    """The slots an admission tries, in order: ``min(probes, slots)`` distinct numbers in
    ``0..slots-1``, spread evenly and fixed by ``seed`` (the attempt's id) — hashing, not
    :mod:`random`, so every version of every process computes the same order."""
    if slots <= 0 or probes <= 0:
        return ()
    if slots <= probes:
        return tuple(sorted(range(slots), key=lambda k: (_draw(seed, k), k)))
    out: list[int] = []
    i = 0
    while len(out) < probes:
        k = _draw(seed, i) % slots
        i += 1
        if k not in out:
            out.append(k)
    return tuple(out)


def rate_shards(per_second: float) -> int:
    """How many items a rate of ``per_second`` is split over (1 up to
    :data:`MAX_RATE_SHARDS`); each shard refills at least one token per second, so a
    shard can always admit."""
    return max(1, min(MAX_RATE_SHARDS, math.ceil(per_second / RATE_PER_SHARD)))


def shard_choice(shards: int, seed: str, attempt: int = 0) -> int:
    """The rate shard an admission takes from (``attempt`` 1 gives its second choice,
    another shard when there are several)."""
    first = _draw(seed, -1) % shards
    if attempt == 0 or shards == 1:
        return first
    return (first + 1 + _draw(seed, -2 - attempt) % (shards - 1)) % shards


# -- per-key pools ------------------------------------------------------------------------

#: Between a pool's name and its key in a keyed pool's name (in no pool name, nor in a
#: definition's name: ``run:`` pools never collide either).
KEY_SEPARATOR = "~"
#: A key value written as it is: short, plain text (anything else is hashed).
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: The error type of an attempt whose ``pool_key`` gave no key (the attempt fails).
POOL_KEY_ERROR = "PoolKeyFailed"


class PoolKeyFailed(InvalidInput):
    """An attempt's ``pool_key`` gave no usable key on its document (it failed, read
    ``null``, or read a list or an object): the attempt fails with :data:`POOL_KEY_ERROR`."""

    def __init__(self, message: str, *, expression: str) -> None:
        super().__init__(message[:500], field="pool_key", expression=expression[:500],
                         error_type=POOL_KEY_ERROR)
        self.expression = expression
        self.error_type = POOL_KEY_ERROR


def pool_key_problem(pool: Any, pool_key: Any, depends_on: Iterable[str] = ()) -> str | None:
    """What is wrong with an activity's ``pool_key``, or None: not JMESPath, or reading a
    name that is neither ``input`` nor one of ``depends_on`` (it would always read null)."""
    if pool_key is None:
        return None
    if pool is None:
        return "pool_key needs a pool (it names which of the pool's keys an attempt takes)"
    problem = expression_problem(pool_key)
    if problem is None:
        problem = expression_problem(pool_key, {INPUT_KEY, *depends_on})
    return None if problem is None else f"pool_key {problem}"[:1000]


def key_text(value: Any) -> str:
    """A key value as text: a string as it is, a number or a boolean as JSON writes it.

    Raises:
        ValueError: ``null``, a list or an object (saying which).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    what = "null" if value is None else \
        "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) \
        else type(value).__name__
    raise ValueError(f"read {what}; a key must be a string, a number or a boolean")


def evaluate_pool_key(expr: str, doc: Any) -> str:
    """The key ``expr`` reads from ``doc`` (``{"input": ..., "<upstream>": ...}``), as
    text (:func:`key_text`).

    Raises:
        PoolKeyFailed: the expression failed on the document, or read ``null``, a list
            or an object.
    """
    try:
        value = compile_expression(expr).search(doc)
        return key_text(value)
    except ValueError as exc:
        raise PoolKeyFailed(f"pool_key {expr!r} {exc}", expression=expr) from None
    except Exception as exc:  # jmespath raises plain errors too (conditions._search)
        raise PoolKeyFailed(f"pool_key {expr!r} failed on this document: "
                            f"{type(exc).__name__}: {exc}", expression=expr) from None


def keyed_pool(pool: str, key: str) -> str:
    """The pool an attempt of ``pool`` keyed ``key`` takes: ``<pool>~<key>``, or
    ``<pool>~~<hash>`` for a key that is not short plain text (``#``, spaces, other
    scripts, long ids): slot items, waiters and records hold only the name alphabet,
    and ``#`` separates the parts of the keys they are stored under."""
    if _PLAIN_KEY.match(key):
        return f"{pool}{KEY_SEPARATOR}{key}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return f"{pool}{KEY_SEPARATOR}{KEY_SEPARATOR}{digest}"


def base_pool(pool: str) -> str:
    """The pool whose settings ``pool`` has: itself, or a keyed pool's pool."""
    return pool.split(KEY_SEPARATOR, 1)[0]


def is_keyed_pool(pool: str) -> bool:
    return KEY_SEPARATOR in pool


# -- token buckets -------------------------------------------------------------------------

@dataclass(frozen=True)
class Bucket:
    """A rate shard's state: tokens left when last written, and when that was."""

    tokens: float
    refilled_at: float


def shard_limits(per_second: float) -> tuple[float, float]:
    """``(rate, capacity)`` of each shard of a pool's rate: its part of the rate, and a
    burst of one second's worth (at least one token)."""
    rate = per_second / rate_shards(per_second)
    return rate, max(1.0, rate)


def refill(bucket: Bucket, now: float, rate: float, capacity: float) -> Bucket:
    """The bucket at ``now``: tokens grown by ``rate`` per second since ``refilled_at``,
    capped at ``capacity``. A clock behind ``refilled_at`` adds nothing and does not move
    it back."""
    if now <= bucket.refilled_at:
        return Bucket(min(bucket.tokens, capacity), bucket.refilled_at)
    grown = bucket.tokens + (now - bucket.refilled_at) * rate
    return Bucket(min(capacity, grown), now)


#: Tokens a take may be short of a whole one and still have it: epoch seconds near 1.8e9
#: are floats to about 2.4e-7 s, so a take at the very time its token is due computed
#: 0.9999976 tokens at 10/s and waited for the next look (a 10/s pool paced short work
#: at half its rate on a clock stepped by its token times). A ten-thousandth of a token
#: is far above that and far below anything the limit could notice.
TOKEN_SLACK = 1e-4


def take(bucket: Bucket, now: float, rate: float, capacity: float,
         n: float = 1.0) -> tuple[bool, Bucket]:
    """Try to take ``n`` tokens at ``now``: ``(True, the bucket after)`` or ``(False,
    the bucket refilled)``; the store writes the result only if the shard still holds
    what was read."""
    cur = refill(bucket, now, rate, capacity)
    if cur.tokens + TOKEN_SLACK >= n:
        return True, Bucket(max(0.0, cur.tokens - n), cur.refilled_at)
    return False, cur


def wait_seconds(bucket: Bucket, now: float, rate: float, capacity: float,
                 n: float = 1.0) -> float:
    """How long until ``n`` tokens are there (0 when they are now; ``inf`` when the
    bucket can never hold that many)."""
    if n > capacity:
        return math.inf
    cur = refill(bucket, now, rate, capacity)
    missing = n - cur.tokens
    return 0.0 if missing <= TOKEN_SLACK else missing / rate
