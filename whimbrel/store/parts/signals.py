"""The ``signal`` table: signals sent to a run before a wait of their name was READY.

The store's part for the ``signal`` table (``store.part(SignalPort)``, holding its
``Tables``); the waits feature sees it as ``SignalPort`` (``whimbrel/engine/signal_port.py``).

One item per signal, in its run's partition (key ``workflow_exec_id``, ``signal_id``), so
a run's signals are one consistent Query. A signal is given to exactly one wait by one
conditional write that sets ``consumed_by`` (docs/architecture.md, "Signals").
"""

from __future__ import annotations

from typing import Any

from whimbrel.contract.records import REMOVE, SignalRecord
from whimbrel.store.codec import Expression, Item, from_ddb, to_ddb
from whimbrel.store.errors import ConditionLost
from whimbrel.store.part import Part
from whimbrel.store.plumbing import CAPACITY
from whimbrel.store.spec_types import Key, TableSpec, attributes

_FIELDS = tuple(SignalRecord.__dataclass_fields__)


def _record(item: Item) -> SignalRecord:
    data: dict[str, Any] = {k: from_ddb(v) for k, v in item.items() if k in _FIELDS}
    for name in ("sent_epoch", "expires_epoch"):
        if data.get(name) is not None:
            data[name] = float(data[name])
    return SignalRecord(**data)


SIGNAL = TableSpec(
    "signal",
    Key("workflow_exec_id"),
    Key("signal_id"),
    attributes=attributes("workflow_exec_id signal_id signal_name sent_epoch:N payload:J "
                          "consumed_by expires_epoch:N"),
    purpose="Signals sent to a run before a wait of their name was READY, kept until one "
    "is (a run's signals are one Query of its partition); a signal_id names one signal.",
)


class Signals(Part):
    """Signals of one table prefix: the engine's ``SignalPort`` (``store.part(SignalPort)``)."""

    PORT = "SignalPort"
    TABLES = (SIGNAL,)

    @property
    def signal_table(self) -> str:
        return SIGNAL.table_name(self.tables.prefix)

    def _signal_key(self, workflow_exec_id: str, signal_id: str) -> Item:
        return {"workflow_exec_id": {"S": workflow_exec_id}, "signal_id": {"S": signal_id}}

    def put_signal(self, record: SignalRecord) -> bool:
        """Keep a signal; False when its id is kept already (a resend)."""
        item = {k: to_ddb(getattr(record, k)) for k in _FIELDS
                if getattr(record, k) is not None}
        # A signal_id names one signal of the run forever: a resend must not add another.
        return self.tables.put_new(self.signal_table, "signal", item, "signal_id")

    def get_signal(self, workflow_exec_id: str, signal_id: str) -> SignalRecord | None:
        item = self.tables.get(self.signal_table, self._signal_key(workflow_exec_id, signal_id))
        return _record(item) if item else None

    def list_signals(self, workflow_exec_id: str) -> list[SignalRecord]:
        """Every signal kept for the run (one consistent Query of its partition)."""
        return [_record(i) for i in self.tables.query({
            "TableName": self.signal_table, "ConsistentRead": True,
            "KeyConditionExpression": "workflow_exec_id = :w",
            "ExpressionAttributeValues": {":w": {"S": workflow_exec_id}}})]

    def bind_signal(self, workflow_exec_id: str, signal_id: str, activity_exec_id: str, *,
                    taking_from: str | None = None,
                    expires_epoch: float | None = None) -> bool:
        """Give the signal to ``activity_exec_id``; False when it belongs to another.

        ``taking_from`` names an attempt it was given to that can never receive it (it
        ended otherwise); the write takes it only if it is still given to that one.
        """
        expr = Expression()
        changes: dict[str, Any] = {"consumed_by": activity_exec_id}
        if expires_epoch is not None:
            changes["expires_epoch"] = expires_epoch
        # Exactly one wait receives a signal: only a free one is taken (or one already
        # given to this very attempt, so a replay of the same hand-over succeeds, or one
        # given to an attempt known dead, if it still is); the item must exist.
        condition = (f"{expr.exists('signal_id')} AND ({expr.missing('consumed_by')} OR "
                     f"{expr.equals('consumed_by', activity_exec_id)}")
        if taking_from is not None:
            condition += f" OR {expr.equals('consumed_by', taking_from)}"
        return self._update_signal(workflow_exec_id, signal_id, expr, changes,
                                   condition + ")")

    def release_signal(self, workflow_exec_id: str, signal_id: str,
                       activity_exec_id: str) -> bool:
        """Free a signal given to an attempt that did not receive it after all."""
        expr = Expression()
        # Only while it is still given to that attempt (never free another's).
        condition = expr.equals("consumed_by", activity_exec_id)
        return self._update_signal(workflow_exec_id, signal_id, expr,
                                   {"consumed_by": REMOVE}, condition)

    def expire_signal(self, workflow_exec_id: str, signal_id: str,
                      expires_epoch: float) -> None:
        """Push out a kept signal's expiry (a long run's reconcile visit)."""
        expr = Expression()
        # Only an existing item: an expired one is not revived.
        self._update_signal(workflow_exec_id, signal_id, expr,
                            {"expires_epoch": expires_epoch}, expr.exists("signal_id"))

    def _update_signal(self, workflow_exec_id: str, signal_id: str, expr: Expression,
                       changes: dict[str, Any], condition: str) -> bool:
        """One conditional UpdateItem of a signal; False when the condition failed."""
        params = expr.params(TableName=self.signal_table,
                             Key=self._signal_key(workflow_exec_id, signal_id),
                             UpdateExpression=expr.update(changes),
                             ConditionExpression=condition, **CAPACITY)
        try:
            self.tables.write_call("UpdateItem", "signal", params)
        except ConditionLost:
            return False
        return True
