"""The ``lease`` table as the sweep's leases (``engine/leases.py``) and the local dev
lease use it. Implemented by ``whimbrel.store.parts.leases.Leases`` (``store.part(LeasePort)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from whimbrel.contract.records import LeaseRecord

__all__ = ["LeasePort"]


class LeasePort(Protocol):
    """Sweep leases (``store.part(LeasePort)``)."""

    def sweep_lease_id(self, shard: str) -> str: ...
    def acquire_lease(self, lease: LeaseRecord, now: float, *,
                      replacing: str | None = None) -> LeaseRecord: ...
    def renew_lease(self, lease_id: str, owner: str, until_epoch: float) -> bool: ...
    def release_lease(self, lease_id: str, owner: str) -> bool: ...
    def get_lease(self, lease_id: str) -> LeaseRecord | None: ...


if TYPE_CHECKING:  # mypy checks that the store's part implements this port
    from whimbrel.store.parts.leases import Leases

    _PART: type[LeasePort] = Leases
