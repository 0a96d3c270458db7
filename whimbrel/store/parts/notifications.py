"""The ``notification`` table: one marker per published event, so none goes out twice.

The store's part for the ``notification`` table (``store.markers``, holding its
``Tables``); the notify consumer is handed it as a ``MarkerStore``
(``whimbrel/observe/notify.py``).

The notify consumer claims an event's marker before it publishes and marks it sent
after (docs/events.md, "Exactly once"):

* no marker: it is created PENDING (``attribute_not_exists``) and the event is published;
* a SENT marker: the event went out already; a redelivered record publishes nothing;
* a PENDING marker: an earlier delivery claimed it and did not finish (it failed or died
  before or after publishing). Lambda runs one invocation per shard at a time, so that
  delivery is over: the marker is taken over (a compare-and-set on its attempt count, so
  of two deliveries that find it anyway one wins) and the event published again.

A marker costs two writes (claim, sent) and lives ``NOTIFICATION_RETENTION_SECONDS``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from whimbrel.contract.errors import StoreError
from whimbrel.store.codec import Expression, Item
from whimbrel.store.errors import ConditionLost
from whimbrel.store.part import Part
from whimbrel.store.plumbing import CAPACITY
from whimbrel.store.spec_types import Key, TableSpec, attributes

__all__ = ["Claim", "Markers"]

PENDING = "PENDING"
SENT = "SENT"


class Claim(StrEnum):
    """What claiming an event's marker found."""

    #: No marker: created PENDING; publish.
    NEW = "NEW"
    #: A PENDING marker of a delivery that did not finish, taken over; publish again.
    RESUMED = "RESUMED"
    #: Published already; publish nothing.
    SENT = "SENT"


#: How long an event's marker is kept: longer than a stream record can be redelivered
#: (DynamoDB Streams keep records 24 hours).
NOTIFICATION_RETENTION_SECONDS = 2 * 86_400

NOTIFICATION = TableSpec(
    "notification",
    Key("event_id"),
    attributes=attributes("event_id detail_type workflow_exec_id status attempts:I "
                          "claimed_epoch:N sent_epoch:N expires_epoch:N"),
    purpose="One marker per event the notify consumer publishes, created (attribute_not_"
    "exists) before the event is sent and marked sent after: a redelivered stream record "
    "publishes nothing twice. Expires NOTIFICATION_RETENTION_SECONDS after it was written.",
)
_TABLE = NOTIFICATION.logical_name


class Markers(Part):
    """The marker writes, on the store's lean client: the notify consumer's
    ``MarkerStore`` (``observe/notify.py``; ``store.markers``)."""

    PORT = "MarkerStore"
    TABLES = (NOTIFICATION,)

    @property
    def notification_table(self) -> str:
        return NOTIFICATION.table_name(self.tables.prefix)

    def claim_notification(self, event_id: str, *, detail_type: str, workflow_exec_id: str,
                           now: float) -> Claim:
        """Claim the marker of ``event_id`` before publishing it.

        Raises:
            StoreError: (retryable) another delivery took the marker over meanwhile, or
                DynamoDB failed; the record is retried.
        """
        item: Item = {
            "event_id": {"S": event_id},
            "detail_type": {"S": detail_type},
            "workflow_exec_id": {"S": workflow_exec_id},
            "status": {"S": PENDING},
            "attempts": {"N": "1"},
            "claimed_epoch": {"N": str(int(now))},
            "expires_epoch": {"N": str(int(now + NOTIFICATION_RETENTION_SECONDS))},
        }
        expr = Expression()
        # attribute_not_exists: an event id is claimed once; a redelivery finds the marker.
        params = expr.params(TableName=self.notification_table, Item=item,
                             ConditionExpression=expr.missing("event_id"),
                             ReturnValuesOnConditionCheckFailure="ALL_OLD", **CAPACITY)
        try:
            self.tables.write_call("PutItem", _TABLE, params)
            return Claim.NEW
        except ConditionLost as lost:
            current = lost.item or self._marker(event_id)
        if current is None:
            raise StoreError(f"the marker of event {event_id} exists and cannot be read; "
                             "retrying the record", aws_code=None, retryable=True)
        if _text(current, "status") == SENT:
            return Claim.SENT
        return self._take_over(event_id, int(_number(current, "attempts")), now)

    def _take_over(self, event_id: str, attempts: int, now: float) -> Claim:
        expr = Expression()
        update = expr.update({"attempts": attempts + 1, "claimed_epoch": int(now)})
        # Still PENDING with the attempt count we read: of several deliveries that found
        # the same unfinished claim, exactly one takes it over.
        condition = (f"{expr.equals('status', PENDING)} AND "
                     f"{expr.equals('attempts', attempts)}")
        params = expr.params(TableName=self.notification_table,
                             Key={"event_id": {"S": event_id}}, UpdateExpression=update,
                             ConditionExpression=condition,
                             ReturnValuesOnConditionCheckFailure="ALL_OLD", **CAPACITY)
        try:
            self.tables.write_call("UpdateItem", _TABLE, params)
        except ConditionLost as lost:
            if lost.item is None or _text(lost.item, "status") == SENT:
                return Claim.SENT
            raise StoreError(f"event {event_id} is being published by another delivery; "
                             "retrying the record", aws_code=None, retryable=True) from None
        return Claim.RESUMED

    def mark_notification_sent(self, event_id: str, *, now: float) -> None:
        """Record that ``event_id`` was published (its redeliveries then publish nothing)."""
        expr = Expression()
        update = expr.update({"status": SENT, "sent_epoch": int(now)})
        # Only an existing marker: never create a SENT one for an event never claimed.
        params = expr.params(TableName=self.notification_table,
                             Key={"event_id": {"S": event_id}}, UpdateExpression=update,
                             ConditionExpression=expr.exists("event_id"), **CAPACITY)
        try:
            self.tables.write_call("UpdateItem", _TABLE, params)
        except ConditionLost:
            pass

    def get_notification(self, event_id: str) -> dict[str, Any] | None:
        """The marker of ``event_id`` as plain values (tests, operators), or None."""
        item = self._marker(event_id)
        if item is None:
            return None
        return {k: (int(v["N"]) if "N" in v else v.get("S")) for k, v in item.items()}

    def _marker(self, event_id: str) -> Item | None:
        resp = self.tables.client.call("GetItem", {"TableName": self.notification_table,
                                                   "Key": {"event_id": {"S": event_id}},
                                            "ConsistentRead": True, **CAPACITY})
        item: Item | None = resp.get("Item") or None
        return item


def _text(item: Item, name: str) -> str | None:
    value = item.get(name) or {}
    text = value.get("S")
    return text if isinstance(text, str) else None


def _number(item: Item, name: str) -> float:
    value = item.get(name) or {}
    try:
        return float(value.get("N", 0))
    except (TypeError, ValueError):
        return 0.0
