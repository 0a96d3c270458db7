"""The ``signal`` table as the wait feature (``engine/signals.py``) uses it: signals kept
for a wait, bound to the wait that takes them. Implemented by
``whimbrel.store.parts.signals.Signals`` (``store.part(SignalPort)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from whimbrel.contract.records import SignalRecord

__all__ = ["SignalPort"]


class SignalPort(Protocol):
    """Signals kept for a wait (``store.part(SignalPort)``)."""

    def put_signal(self, record: SignalRecord) -> bool: ...
    def get_signal(self, workflow_exec_id: str, signal_id: str) -> SignalRecord | None: ...
    def list_signals(self, workflow_exec_id: str) -> list[SignalRecord]: ...
    def bind_signal(self, workflow_exec_id: str, signal_id: str, activity_exec_id: str, *,
                    taking_from: str | None = None,
                    expires_epoch: float | None = None) -> bool: ...
    def release_signal(self, workflow_exec_id: str, signal_id: str,
                       activity_exec_id: str) -> bool: ...
    def expire_signal(self, workflow_exec_id: str, signal_id: str,
                      expires_epoch: float) -> None: ...


if TYPE_CHECKING:  # mypy checks that the store's part implements this port
    from whimbrel.store.parts.signals import Signals

    _PART: type[SignalPort] = Signals
