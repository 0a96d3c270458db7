"""The ``pool`` table (issue 22): a pool's settings, its slots, its rate's token buckets
and its waiters, each an item of its own (docs/architecture.md, "Pools").

The store's part for the ``pool`` table (``store.part(PoolPort)``, holding its ``Tables``
and the attempts part it admits waiters into); the pools feature sees it as
``PoolPort`` (``whimbrel/engine/pool_port.py``).

No item is written by every admission of a pool: slot ``k`` is the item
``pool#<name>#<k>`` (an admission writes the one it takes, its release the same one), a
rate shard ``pool#<name>#rate#<j>``, a waiter shard ``wait#<name>#<s>``. Slot items are
created by their first acquisition (an UpdateItem on a missing item) and never deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from whimbrel.contract.ids import shard_of
from whimbrel.contract.pools import (
    RATE_ENTRY,
    SETTINGS_ENTRY,
    SLOT_ENTRY,
    WAIT_SHARDS,
    Bucket,
    Pool,
    PoolInfo,
    Slot,
    Waiter,
    rate_shard_key,
    settings_key,
    slot_key,
    wait_key,
    waiter_entry,
)
from whimbrel.contract.records import REMOVE, ActivityRecord, Changes
from whimbrel.contract.states import ActivityState
from whimbrel.store import spec_core
from whimbrel.store.codec import Expression, Item, activity_record, decode_fields, to_ddb
from whimbrel.store.errors import ConditionLost
from whimbrel.store.keys import fan_out
from whimbrel.store.part import Part
from whimbrel.store.plumbing import CAPACITY
from whimbrel.store.spec_types import IndexSpec, Key, TableSpec, attributes

_SETTINGS = ("slots", "per_second", "created_epoch", "updated_epoch", "slots_high")


def _key(pool_key: str, entry: str) -> Item:
    return {"pool_key": {"S": pool_key}, "entry": {"S": entry}}


def pool_info(name: str, item: Mapping[str, Any]) -> PoolInfo:
    data = decode_fields(POOL, item, _SETTINGS)
    return PoolInfo(name=name, slots=data.get("slots"), per_second=data.get("per_second"),
                    created_epoch=data.get("created_epoch", 0.0),
                    updated_epoch=data.get("updated_epoch", 0.0),
                    slots_high=data.get("slots_high"))


POOL = TableSpec(
    "pool",
    Key("pool_key"),
    Key("entry"),
    attributes=attributes(
        "pool_key entry pool_name slots:I slots_high:I per_second:N catalog created_epoch:N "
        "updated_epoch:N holder token since:N check_shard check_epoch:N tokens:N "
        "refilled_at:N kind expires_epoch:N"),
    indexes=(
        IndexSpec(
            "pool_names",
            Key("catalog"),
            Key("pool_name"),
            projection="INCLUDE",
            non_key_attributes=("slots", "slots_high", "per_second", "created_epoch",
                                "updated_epoch"),
            purpose="sparse: the settings item of every pool (Whimbrel.set_pool), by name: "
            "list_pools is one Query",
        ),
        IndexSpec(
            "pool_checks",
            Key("check_shard"),
            Key("check_epoch", "N"),
            purpose="sparse: present only while a slot is held; the sweep frees a slot "
            "whose holder ended or died without releasing it (check_shard: one of "
            "POOL_CHECK_SHARDS, a hash of the slot's key)",
        ),
    ),
    purpose="Pools (issue 22; docs/architecture.md, \"Pools\"): a pool's settings "
    "('pool#<name>', 'settings'), one item per slot ('pool#<name>#<k>', 'slot'; held while "
    "'holder' is set), its rate's token buckets ('pool#<name>#rate#<j>', 'rate') and "
    "its waiters ('wait#<name>#<shard>', '<order>#<holder>'). The implicit pool of a "
    "definition's max_running is 'run:<workflow_name>'.",
)


class Pools(Part):
    """Pools of one table prefix: the engine's ``PoolPort`` (``store.part(PoolPort)``).
    An admitted waiter's attempt is written where the attempts part keeps it
    (``self.attempts``)."""

    PORT = "PoolPort"
    TABLES = (POOL,)

    @property
    def _pool_table(self) -> str:
        return POOL.table_name(self.tables.prefix)

    def _pool_update(self, key: Item, expr: Expression, update: str,
                     condition: str | None, *, new: bool = False) -> Item | None:
        """One UpdateItem of the pool table; None when its condition failed."""
        params = expr.params(TableName=self._pool_table, Key=key, UpdateExpression=update,
                             **({"ConditionExpression": condition} if condition else {}),
                             **({"ReturnValues": "ALL_NEW"} if new else {}), **CAPACITY)
        try:
            resp = self.tables.write_call("UpdateItem", "pool", params)
        except ConditionLost:
            return None
        attributes: Item = resp.get("Attributes", {})
        return attributes

    # -- settings ---------------------------------------------------------------------------

    def put_pool(self, pool: Pool, now: float) -> PoolInfo:
        """Create or change a pool's settings (``None`` limits are removed). An operator's
        upsert: the last writer's limits hold; ``slots_high`` keeps the most slots it
        ever had (held slots above a lowered limit are still counted by ``get_pool``)."""
        before = self.get_pool_settings(pool.name)
        high = max(pool.slots or 0, (before.slots_high or before.slots or 0)
                   if before is not None else 0)
        expr = Expression()
        changes: dict[str, Any] = {
            "pool_name": pool.name, "catalog": spec_core.POOL_CATALOG, "updated_epoch": now,
            "slots": REMOVE if pool.slots is None else pool.slots,
            "per_second": REMOVE if pool.per_second is None else float(pool.per_second),
            "slots_high": high or REMOVE}
        update = expr.update(changes)
        created = expr.name("created_epoch")
        update = update.replace("SET ", f"SET {created} = if_not_exists({created}, "
                                        f"{expr.value(now)}), ", 1)
        # Unconditional: set_pool is an operator's upsert; the last writer's limits hold.
        item = self._pool_update(_key(settings_key(pool.name), SETTINGS_ENTRY), expr,
                                 update, None, new=True)
        return pool_info(pool.name, item or {})

    def settle_slots_high(self, pool: str, high: int, slots: int) -> bool:
        """The slots above a lowered limit have drained: ``slots_high`` comes down to
        ``slots`` (admissions stop checking them); False when the settings changed."""
        expr = Expression()
        update = expr.update({"slots_high": slots})
        # Only the settings that were read: a set_pool since (another limit, another
        # high) keeps its own.
        condition = f"{expr.equals('slots_high', high)} AND {expr.equals('slots', slots)}"
        return self._pool_update(_key(settings_key(pool), SETTINGS_ENTRY), expr, update,
                                 condition) is not None

    def get_pool_settings(self, name: str) -> PoolInfo | None:
        item = self.tables.get(self._pool_table, _key(settings_key(name), SETTINGS_ENTRY))
        return pool_info(name, item) if item else None

    def list_pool_settings(self) -> list[PoolInfo]:
        """Every pool's settings, by name (one Query of the sparse ``pool_names`` index)."""
        return [pool_info(hit["pool_name"]["S"], hit) for hit in self.tables.query({
            "TableName": self._pool_table, "IndexName": "pool_names",
            "KeyConditionExpression": "#c = :c", "ExpressionAttributeNames": {"#c": "catalog"},
            "ExpressionAttributeValues": {":c": {"S": spec_core.POOL_CATALOG}}})]

    # -- slots ------------------------------------------------------------------------------

    def acquire_slot(self, pool: str, k: int, holder: str, token: str, now: float,
                     check_epoch: float) -> bool:
        """Take slot ``k`` for ``holder`` (a new ``token``); False when another holds it."""
        key = slot_key(pool, k)
        expr = Expression()
        update = expr.update({"holder": holder, "token": token, "since": now,
                              "check_epoch": check_epoch,
                              "check_shard": shard_of(key, spec_core.POOL_CHECK_SHARDS)})
        # Free (never taken, or released), or already this holder's: an admission
        # replayed (or a second actor admitting the same attempt) finds its own slot
        # instead of a second one. One holder per item: a slot is never counted twice.
        condition = f"({expr.missing('holder')} OR {expr.equals('holder', holder)})"
        return self._pool_update(_key(key, SLOT_ENTRY), expr, update, condition) is not None

    def release_slot(self, pool: str, k: int, holder: str, token: str | None = None) -> bool:
        """Free slot ``k`` if ``holder`` holds it (with ``token``: only that acquisition
        of it); False when it does not."""
        expr = Expression()
        update = expr.update({"holder": REMOVE, "token": REMOVE, "since": REMOVE,
                              "check_epoch": REMOVE, "check_shard": REMOVE})
        # Only the holder's own slot: a release replayed, or one racing a new holder,
        # changes nothing. With a token, only the acquisition that wrote it: an actor
        # whose move lost never frees a slot another actor re-took for the same holder.
        condition = expr.equals("holder", holder)
        if token is not None:
            condition += " AND " + expr.equals("token", token)
        return self._pool_update(_key(slot_key(pool, k), SLOT_ENTRY), expr, update,
                                 condition) is not None

    def recheck_slot(self, pool: str, k: int, holder: str, token: str,
                     check_epoch: float) -> bool:
        """Push a held slot's next check to ``check_epoch`` (still held as read)."""
        key = slot_key(pool, k)
        expr = Expression()
        update = expr.update({"check_epoch": check_epoch,
                              "check_shard": shard_of(key, spec_core.POOL_CHECK_SHARDS)})
        # The acquisition the sweep judged alive: a release or a new holder since wins.
        condition = f"{expr.equals('holder', holder)} AND {expr.equals('token', token)}"
        return self._pool_update(_key(key, SLOT_ENTRY), expr, update, condition) is not None

    def get_slot(self, pool: str, k: int) -> Slot:
        item = self.tables.get(self._pool_table, _key(slot_key(pool, k), SLOT_ENTRY)) or {}
        return self._slot(pool, k, item)

    @staticmethod
    def _slot(pool: str, k: int, item: Mapping[str, Any]) -> Slot:
        data = decode_fields(POOL, item, ("holder", "token", "since", "check_epoch"))
        return Slot(pool, k, **data)

    def held_slots(self, pool: str, slots: int) -> list[Slot]:
        """The held slots among ``0..slots-1`` (BatchGetItem, 100 at a time; an operator's
        read: ``get_pool``)."""
        held: list[Slot] = []
        for start in range(0, slots, 100):
            keys = [_key(slot_key(pool, k), SLOT_ENTRY)
                    for k in range(start, min(slots, start + 100))]
            request: dict[str, Any] = {self._pool_table: {"Keys": keys,
                                                          "ConsistentRead": True}}
            while request:
                resp = self.tables.client.call("BatchGetItem", {"RequestItems": request,
                                                                **CAPACITY})
                for item in resp.get("Responses", {}).get(self._pool_table, []):
                    k = int(item["pool_key"]["S"].rpartition("#")[2])
                    slot = self._slot(pool, k, item)
                    if slot.holder is not None:
                        held.append(slot)
                request = resp.get("UnprocessedKeys") or {}
        return sorted(held, key=lambda s: s.k)

    #: Shards of the sparse ``pool_checks`` index.
    pool_check_shards: tuple[str, ...] = tuple(str(j) for j in range(spec_core.POOL_CHECK_SHARDS))

    def due_pool_check_shards(self, now: float) -> set[str] | None:
        """The ``pool_checks`` shards with a check due at ``now``, in one request
        (``due_keys``); None: ask them shard by shard."""
        return self.tables.due_keys(self._pool_table, "pool_checks", "check_shard", "check_epoch",
                                    self.pool_check_shards, now)

    def due_pool_checks(self, now: float, limit: int,
                        shard: str | None = None) -> list[tuple[str, str, int]]:
        """``(pool, kind, number)`` of the checks due at ``now`` (the sparse
        ``pool_checks`` index: shard ``shard``, or every shard at once when None):
        ``("slot", k)`` a held slot, ``("rate", 0)`` the pacer of a pool whose waiters
        wait for its rate."""
        def one(j: str) -> list[tuple[str, str, int]]:
            out = []
            for hit in self.tables.query({
                    "TableName": self._pool_table, "IndexName": "pool_checks",
                    "KeyConditionExpression": "check_shard = :s AND check_epoch <= :n",
                    "ExpressionAttributeValues": {":s": {"S": j}, ":n": to_ddb(now)}},
                    limit=limit):
                rest = hit["pool_key"]["S"].removeprefix("pool#")
                head, _, number = rest.rpartition("#")
                if hit["entry"]["S"] == RATE_ENTRY:
                    out.append((head.removesuffix("#rate"), RATE_ENTRY, int(number)))
                else:
                    out.append((head, SLOT_ENTRY, int(number)))
            return out
        shards = self.pool_check_shards if shard is None else (shard,)
        return [d for part in fan_out(one, shards) for d in part]

    def free_among(self, pool: str, ks: Sequence[int]) -> list[int]:
        """Which of slots ``ks`` are free now (one consistent BatchGetItem: a waiter's
        look after it entered the queue reads, it does not write)."""
        if not ks:
            return []
        keys = [_key(slot_key(pool, k), SLOT_ENTRY) for k in ks]
        held: set[int] = set()
        request: dict[str, Any] = {self._pool_table: {"Keys": keys, "ConsistentRead": True}}
        while request:
            resp = self.tables.client.call("BatchGetItem", {"RequestItems": request, **CAPACITY})
            for item in resp.get("Responses", {}).get(self._pool_table, []):
                if "holder" in item:
                    held.add(int(item["pool_key"]["S"].rpartition("#")[2]))
            request = resp.get("UnprocessedKeys") or {}
        return [k for k in ks if k not in held]

    def arm_pacer(self, pool: str, at: float) -> bool:
        """Ask the sweep to look at ``pool``'s waiters at ``at`` (when its rate has a
        token again); an earlier look already asked for stays."""
        key = rate_shard_key(pool, 0)
        expr = Expression()
        update = expr.update({"check_epoch": at,
                              "check_shard": shard_of(key, spec_core.POOL_CHECK_SHARDS)})
        # One look per pool at the earliest time asked: a later one changes nothing.
        condition = f"({expr.missing('check_epoch')} OR {expr.name('check_epoch')} > " \
                    f"{expr.value(at)})"
        return self._pool_update(_key(key, RATE_ENTRY), expr, update, condition) is not None

    def disarm_pacer(self, pool: str, seen: float) -> bool:
        """Take the pacer look the sweep is acting on off the index (it re-arms it if
        waiters are left)."""
        expr = Expression()
        update = expr.update({"check_epoch": REMOVE, "check_shard": REMOVE})
        # Only the look that was due: one armed since (a new hold) stays.
        condition = expr.equals("check_epoch", seen)
        return self._pool_update(_key(rate_shard_key(pool, 0), RATE_ENTRY), expr, update,
                                 condition) is not None

    def get_pacer(self, pool: str) -> float | None:
        item = self.tables.get(self._pool_table, _key(rate_shard_key(pool, 0), RATE_ENTRY)) or {}
        return decode_fields(POOL, item, ("check_epoch",)).get("check_epoch")

    # -- waiters ----------------------------------------------------------------------------

    def put_waiter(self, pool: str, holder: str, order: str, *, kind: str,
                   expires_epoch: float | None) -> Waiter:
        """Enter ``holder`` among the pool's waiters (idempotent: its entry is fixed by
        its order and id)."""
        shard = shard_of(holder, WAIT_SHARDS)
        entry = waiter_entry(order, holder)
        item: Item = {**_key(wait_key(pool, shard), entry), "holder": {"S": holder},
                      "kind": {"S": kind}}
        if expires_epoch is not None:
            item["expires_epoch"] = to_ddb(expires_epoch)

        # Unconditional: the entry is the same whoever writes it, however often.
        def put() -> Any:
            return self.tables.client.call("PutItem", {"TableName": self._pool_table,
                                                       "Item": item, **CAPACITY})
        self.tables.write("PutItem", "pool", put)
        return Waiter(pool, shard, entry, holder)

    def waiter_heads(self, pool: str, per_shard: int = 2) -> list[Waiter]:
        """The first waiters of each shard (consistent), merged in serving order."""
        def shard(j: int) -> list[Waiter]:
            return [Waiter(pool, str(j), hit["entry"]["S"], hit["holder"]["S"])
                    for hit in self.tables.query({
                        "TableName": self._pool_table, "ConsistentRead": True,
                        "KeyConditionExpression": "pool_key = :k",
                        "ExpressionAttributeValues": {":k": {"S": wait_key(pool, j)}}},
                        limit=per_shard)]
        heads = [w for part in fan_out(shard, range(WAIT_SHARDS)) for w in part]
        return sorted(heads, key=lambda w: w.entry)

    def delete_waiter(self, waiter: Waiter) -> None:
        params = {"TableName": self._pool_table, **CAPACITY,
                  "Key": _key(wait_key(waiter.pool, waiter.shard), waiter.entry)}
        # Unconditional: deleting a gone entry is a no-op.
        self.tables.write_call("DeleteItem", "pool", params)

    def count_waiters(self, pool: str) -> int:
        def shard(j: int) -> int:
            total = 0
            params: dict[str, Any] = {
                "TableName": self._pool_table, "Select": "COUNT",
                "KeyConditionExpression": "pool_key = :k",
                "ExpressionAttributeValues": {":k": {"S": wait_key(pool, j)}}, **CAPACITY}
            while True:
                resp = self.tables.client.call("Query", params)
                total += int(resp.get("Count", 0))
                if not resp.get("LastEvaluatedKey"):
                    return total
                params["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        return sum(fan_out(shard, range(WAIT_SHARDS)))

    # -- rate -------------------------------------------------------------------------------

    def get_bucket(self, pool: str, j: int) -> Bucket | None:
        item = self.tables.get(self._pool_table, _key(rate_shard_key(pool, j), RATE_ENTRY))
        if not item or "tokens" not in item:
            return None
        data = decode_fields(POOL, item, ("tokens", "refilled_at"))
        return Bucket(float(data["tokens"]), float(data.get("refilled_at", 0.0)))

    def put_bucket(self, pool: str, j: int, new: Bucket, seen: Bucket | None) -> bool:
        """Write a rate shard's bucket if it still holds what was read (``seen``)."""
        expr = Expression()
        update = expr.update({"tokens": new.tokens, "refilled_at": new.refilled_at})
        # Optimistic: exactly what this actor read (or nothing yet), so of two takers of
        # the same token one loses and reads again; a take is never counted twice.
        if seen is None:
            condition = expr.missing("tokens")
        else:
            condition = (f"{expr.equals('tokens', seen.tokens)} AND "
                         f"{expr.equals('refilled_at', seen.refilled_at)}")
        return self._pool_update(_key(rate_shard_key(pool, j), RATE_ENTRY), expr, update,
                                 condition) is not None

    # -- attempts ---------------------------------------------------------------------------

    def admit_waiting(self, activity_exec_id: str, changes: Changes) -> ActivityRecord:
        """Admit a READY attempt that waits for its pool (it becomes claimable with its
        slot recorded) in one write.

        Raises:
            StateConflict: it is no longer a READY waiter (``current`` says where it is).
        """
        expr = Expression()
        update = expr.update(self.attempts.indexed(changes, activity_exec_id))
        # READY with no slot yet (waiting for its pool, or readied while its run was
        # SUSPENDED): of two actors admitting it, one writes; the other's slot is given
        # back (it is not the one recorded).
        condition = (f"{expr.equals('state', ActivityState.READY.value)} AND "
                     f"{expr.missing('pool_slot')}")
        try:
            return activity_record(self.attempts.update_attempt(activity_exec_id, expr, update,
                                                                condition))
        except ConditionLost as lost:
            raise self.attempts.activity_conflict(lost, activity_exec_id, ActivityState.READY.value,
                                                  None) from None

