"""The ``lease`` table: leases that divide work between processes (sweep shards, the one
``whimbrel dev`` of a prefix). One item per lease; every write is conditional, so of
two takers exactly one gets it, and a holder that stopped renewing loses it once its
``until_epoch`` has passed (docs/architecture.md, "Scale").

The store's part for the ``lease`` table (``store.part(LeasePort)``, also ``store.leases``;
holding its ``Tables``); the sweep and the dev lease see it as ``LeasePort``
(``whimbrel/engine/lease_port.py``).

A lease never guards correctness (every move of the engine stays a conditional write);
it keeps processes from doing the same work twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from whimbrel.contract.records import LeaseRecord
from whimbrel.store import spec_core
from whimbrel.store.codec import Expression, Item, decode_fields, encode_fields, to_ddb
from whimbrel.store.errors import ConditionLost
from whimbrel.store.part import Part
from whimbrel.store.plumbing import CAPACITY
from whimbrel.store.spec_types import Key, TableSpec, attributes

__all__ = ["LEASE_KEEP_SECONDS", "Leases", "lease_record"]

#: A lease item outlives its last ``until_epoch`` by this much before TTL deletes it
#: (an abandoned lease, e.g. of a dev that was killed, does not stay forever).
LEASE_KEEP_SECONDS = 86_400.0

_FIELDS = tuple(LeaseRecord.__dataclass_fields__)


def lease_record(item: Mapping[str, Any]) -> LeaseRecord:
    """A ``lease`` item as a record."""
    return LeaseRecord(**decode_fields(LEASE, item, _FIELDS))


LEASE = TableSpec(
    "lease",
    Key("lease_id"),
    attributes=attributes("lease_id owner host pid:I acquired_epoch:N until_epoch:N "
                          "endpoint expires_epoch:N"),
    purpose="Leases that divide work between processes: 'sweep#<k>' (SWEEP_LEASES of them) "
    "gives one sweeper shard k of every sparse index (timers, reconcile, due_schedules: "
    "index shard j belongs to lease j % SWEEP_LEASES) for one pass; 'dev' is held by the "
    "one `whimbrel dev` that pumps this prefix's streams. Taken with a conditional write "
    "when absent, expired (until_epoch passed) or already the taker's; renewed while "
    "held; deleted at the end. Leases divide work, they do not guard it: every move stays "
    "a conditional write, so two holders (clocks apart) only waste reads.",
)


class Leases(Part):
    """Leases of one table prefix: the engine's ``LeasePort`` (``store.part(LeasePort)``)."""

    PORT = "LeasePort"
    TABLES = (LEASE,)

    @property
    def _lease_table(self) -> str:
        return LEASE.table_name(self.tables.prefix)

    @staticmethod
    def _lease_key(lease_id: str) -> Item:
        return {"lease_id": {"S": lease_id}}

    @staticmethod
    def sweep_lease_id(shard: str) -> str:
        """The lease whose holder sweeps shard ``shard`` of every sparse index."""
        return spec_core.sweep_lease_id(int(shard))

    def acquire_lease(self, lease: LeaseRecord, now: float, *,
                      replacing: str | None = None) -> LeaseRecord:
        """Take (or keep) ``lease`` for ``lease.owner`` until ``lease.until_epoch``; also
        from the holder ``replacing``, known dead (its process is gone), before its lease
        lapses.

        Returns the lease as it is now: ``lease`` itself when taken, else the holder's
        (``owner`` differs), read from the failed write without a second request.
        """
        item = encode_fields(lease)
        item["expires_epoch"] = to_ddb(float(int(lease.until_epoch + LEASE_KEEP_SECONDS)))
        expr = Expression()
        # Free (no item: never taken, or released), expired (its holder stopped renewing:
        # it died, or lost touch), or already ours (taken again within our own lease);
        # or still held by exactly the holder the caller found dead (not one that took
        # it meanwhile).
        clauses = [expr.missing("lease_id"), f"{expr.name('until_epoch')} < {expr.value(now)}",
                   expr.equals("owner", lease.owner)]
        if replacing is not None:
            clauses.append(expr.equals("owner", replacing))
        condition = " OR ".join(clauses)
        params = expr.params(TableName=self._lease_table, Item=item,
                             ConditionExpression=condition,
                             ReturnValuesOnConditionCheckFailure="ALL_OLD", **CAPACITY)
        try:
            self.tables.write_call("PutItem", "lease", params)
        except ConditionLost as lost:
            if lost.item is None:  # no image came back: not ours, holder unknown
                return LeaseRecord(lease.lease_id, owner="", until_epoch=now,
                                   acquired_epoch=now)
            return lease_record(lost.item)
        return lease

    def renew_lease(self, lease_id: str, owner: str, until_epoch: float) -> bool:
        """Push ``owner``'s lease out to ``until_epoch``; False if it is no longer theirs
        (it expired and another took it, or it was released)."""
        expr = Expression()
        update = expr.update({"until_epoch": until_epoch, "expires_epoch": float(
            int(until_epoch + LEASE_KEEP_SECONDS))})
        # Only our own lease: one taken over after it expired is the new holder's.
        params = expr.params(TableName=self._lease_table, Key=self._lease_key(lease_id),
                             UpdateExpression=update,
                             ConditionExpression=expr.equals("owner", owner), **CAPACITY)
        try:
            self.tables.write_call("UpdateItem", "lease", params)
        except ConditionLost:
            return False
        return True

    def release_lease(self, lease_id: str, owner: str) -> bool:
        """Give ``owner``'s lease up (delete it); False if it was not theirs any more."""
        expr = Expression()
        # Only our own lease: one taken over after it expired is the new holder's.
        params = expr.params(TableName=self._lease_table, Key=self._lease_key(lease_id),
                             ConditionExpression=expr.equals("owner", owner), **CAPACITY)
        try:
            self.tables.write_call("DeleteItem", "lease", params)
        except ConditionLost:
            return False
        return True

    def get_lease(self, lease_id: str) -> LeaseRecord | None:
        """The lease item as it is (consistent read), None when nobody holds it."""
        item = self.tables.get(self._lease_table, self._lease_key(lease_id))
        return lease_record(item) if item else None
