"""Schedules on the public facade (mixed into :class:`whimbrel.Whimbrel`); docs/schedules.md."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.schedule_info import ScheduleInfo
from whimbrel.contract.schedules import DEFAULT_CATCHUP_SECONDS, Schedule
from whimbrel.engine import Engine
from whimbrel.engine import Schedules as ScheduleFeature

When = float | datetime | None


def _epoch(value: float | datetime, name: str) -> float:
    """An aware datetime as epoch seconds; anything else as given (the engine checks)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidInput(f"{name} must be an aware datetime (with a tzinfo)",
                               field=name)
        return value.timestamp()
    return value


class Schedules:
    """Schedules: create, pause, resume, delete, list, backfill."""

    engine: Engine

    @property
    def _schedules(self) -> ScheduleFeature:
        return self.engine.feature(ScheduleFeature)

    def create_schedule(self, schedule_id: str, workflow_name: str, *,
                        cron: str | None = None, every_seconds: int | None = None,
                        input: Any = None, timezone: str = "UTC", overlap: str = "skip",
                        catchup_seconds: float = DEFAULT_CATCHUP_SECONDS,
                        start_at: When = None, end_at: When = None,
                        attributes: Mapping[str, Any] | None = None) -> ScheduleInfo:
        """Start ``workflow_name`` on a cron (in ``timezone``) or every ``every_seconds``.
        Each firing starts its run with the request id ``<schedule_id>@<fire time>``
        (ISO-8601 UTC), exactly once, with ``attributes`` (as ``start_workflow``'s). A new
        schedule does not fire for the past.
        Creating the same id with the same spec again returns it unchanged.

        Raises:
            InvalidInput: a bad id, cron, time zone, overlap, window or input (the
                message names each problem); nothing is stored.
            DefinitionNotFound: ``workflow_name`` is not registered.
            ScheduleConflict: ``schedule_id`` exists with another spec (delete it first).
        """
        schedule = Schedule(schedule_id, workflow_name, cron=cron,
                            every_seconds=every_seconds, input=input, timezone=timezone,
                            overlap=overlap, catchup_seconds=catchup_seconds,
                            start_at=start_at,  # type: ignore[arg-type]  # datetime: epoch
                            end_at=end_at,  # type: ignore[arg-type]
                            attributes=dict(attributes) if attributes else None)
        return self._schedules.create(schedule)

    def apply_schedule(self, schedule: Schedule) -> ScheduleInfo:
        """``create_schedule`` from a :class:`~whimbrel.contract.schedules.Schedule`
        (a YAML file's entry)."""
        return self._schedules.create(schedule)

    def get_schedule(self, schedule_id: str) -> ScheduleInfo:
        """Raises: ScheduleNotFound."""
        return self._schedules.get(schedule_id)

    def pause_schedule(self, schedule_id: str) -> ScheduleInfo:
        """Stop firing (idempotent). Raises: ScheduleNotFound."""
        return self._schedules.pause(schedule_id)

    def resume_schedule(self, schedule_id: str) -> ScheduleInfo:
        """Fire again from the first fire time after now; the firings of the paused time
        are not started (``backfill_schedule`` starts them). Raises: ScheduleNotFound."""
        return self._schedules.resume(schedule_id)

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule; runs it started go on. Raises: ScheduleNotFound."""
        self._schedules.delete(schedule_id)

    def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by id."""
        return self._schedules.listed()

    def backfill_schedule(self, schedule_id: str, start: float | datetime,
                          end: float | datetime) -> list[str]:
        """Start the firings in ``[start, end]`` (no later than now), ignoring overlap
        and catch-up; each with its firing's request id, so one already started is not
        started twice. Returns the run ids, oldest first.

        Raises:
            ScheduleNotFound: no such schedule.
            InvalidInput: an empty range, one ending after now, more than 1000 firings.
        """
        return self._schedules.backfill(schedule_id, _epoch(start, "start"),
                                        _epoch(end, "end"))
