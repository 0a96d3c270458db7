"""The ``schedule`` table as the schedules feature (``engine/schedules.py``) uses it.
Implemented by ``whimbrel.store.parts.schedules.Schedules`` (``store.part(SchedulePort)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from whimbrel.contract.records import Changes
from whimbrel.contract.schedule_info import ScheduleInfo

__all__ = ["SchedulePort"]


class SchedulePort(Protocol):
    """Schedules (``store.part(SchedulePort)``)."""

    #: Partitions of the sparse ``due_schedules`` index; a sweep asks them all at once.
    schedule_shards: tuple[str, ...]

    def due_schedule_shards(self, now: float) -> set[str] | None: ...
    def put_schedule(self, info: ScheduleInfo, now: float) -> bool: ...
    def get_schedule(self, schedule_id: str) -> ScheduleInfo | None: ...
    def list_schedules(self) -> Iterable[ScheduleInfo]: ...
    def due_schedules(self, shard: str, now: float, limit: int) -> list[str]: ...
    def update_schedule(self, schedule_id: str, changes: Changes, *,
                        expect: Mapping[str, object]) -> ScheduleInfo | None: ...
    def delete_schedule(self, schedule_id: str) -> bool: ...


if TYPE_CHECKING:  # mypy checks that the store's part implements this port
    from whimbrel.store.parts.schedules import Schedules

    _PART: type[SchedulePort] = Schedules
