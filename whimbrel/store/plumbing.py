"""What every part of the store shares: the transport it calls, the write hooks, and the
few request shapes the hot tables use (create, consistent read, paged Query, conditional
update).

Conditional writes ask for the item as it is when they lose
(``ReturnValuesOnConditionCheckFailure``), so a lost race costs no read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from whimbrel.store import specs
from whimbrel.store.codec import Expression, Item
from whimbrel.store.errors import ConditionLost
from whimbrel.store.lean import RequestObserver, RetryObserver

__all__ = ["CAPACITY", "Client", "Tables", "Write"]


class Client(Protocol):
    """What the tables need of a transport (``whimbrel.store.transport.Transport``)."""

    observers: list[RequestObserver]
    retry_observers: list[RetryObserver]

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]: ...


#: (operation, logical table, thunk) -> result; runs the write-hooks around the thunk.
Write = Callable[[str, str, Callable[[], Any]], Any]

CAPACITY = {"ReturnConsumedCapacity": "INDEXES"}


class Tables:
    """The hot tables' names for one prefix, and the requests they are written with."""

    def __init__(self, client: Client, prefix: str, write: Write) -> None:
        self.client = client
        self._write = write
        self.workflow_table = specs.WORKFLOW_EXEC.table_name(prefix)
        self.data_table = specs.WORKFLOW_EXEC_DATA.table_name(prefix)
        self.activity_table = specs.ACTIVITY_EXEC.table_name(prefix)
        self.item_table = specs.MAP_ITEM.table_name(prefix)
        self.edge_table = specs.ACTIVITY_EXEC_DEPENDENCY.table_name(prefix)

    def _put_new(self, table: str, logical: str, item: Item, key_attr: str) -> bool:
        expr = Expression()
        params = expr.params(TableName=table, Item=item,
                             ConditionExpression=expr.missing(key_attr), **CAPACITY)
        try:
            self._write("PutItem", logical, lambda: self.client.call("PutItem", params))
        except ConditionLost:
            return False
        return True

    def _get(self, table: str, key: Item) -> Item | None:
        resp = self.client.call("GetItem", {"TableName": table, "Key": key,
                                            "ConsistentRead": True, **CAPACITY})
        item: Item | None = resp.get("Item")
        return item

    def _query(self, params: dict[str, Any], limit: int | None = None) -> Iterator[Item]:
        params = {**params, **CAPACITY}
        left = limit
        while True:
            if left is not None:
                params["Limit"] = left
            resp = self.client.call("Query", params)
            items: list[Item] = resp.get("Items", [])
            yield from items
            if left is not None:
                left -= len(items)
                if left <= 0:
                    return
            start = resp.get("LastEvaluatedKey")
            if not start:
                return
            params["ExclusiveStartKey"] = start

    def _update(self, logical: str, table: str, key: Item, expr: Expression, update: str,
                condition: str) -> Item:
        """One conditional UpdateItem; returns the new image.

        Raises:
            ConditionLost: with the item as it is now.
        """
        params = expr.params(TableName=table, Key=key, UpdateExpression=update,
                             ConditionExpression=condition, ReturnValues="ALL_NEW",
                             ReturnValuesOnConditionCheckFailure="ALL_OLD", **CAPACITY)
        resp = self._write("UpdateItem", logical, lambda: self.client.call("UpdateItem", params))
        attributes: Item = resp["Attributes"]
        return attributes
