"""Schedules (pure; issue 22): when a schedule fires, which firings are due, backfills,
the request id of a firing, and the overlap policy. Time is always passed in.

* **Cron** strings have the 5 standard fields (minute hour day-of-month month
  day-of-week; names such as ``MON`` and ``JAN``, ``L`` for the last day, and the macros
  ``@hourly`` ``@daily`` ``@weekly`` ``@monthly`` ``@yearly``), read in the schedule's
  time zone by `cronsim <https://pypi.org/project/cronsim/>`_ with Debian cron's
  daylight-saving rules: a job at a fixed time fires **once** a day — in a skipped hour
  (spring forward) at the first minute after the gap, in a repeated hour (fall back)
  only the first time — while a job with ``*`` in its minute or hour fires at every real
  minute or hour it names.
* **Rates** (``every_seconds``) fire at ``anchor + k * every_seconds``, the anchor being
  ``start_at`` (rounded up to a whole second) or the Unix epoch: ``every_seconds=3600``
  fires on the hour, UTC, whenever the schedule was created. Time zones do not apply.
* Every fire time is a whole number of epoch seconds, and a firing starts its run with
  the request id :func:`fire_request_id` — ``<schedule_id>@<fire time, ISO-8601 UTC>``,
  e.g. ``nightly@2026-11-25T02:00:00Z`` — so it starts exactly once however often, and
  by however many sweepers, it is found due.
* **Catch-up**: a firing missed (the sweep did not run, the system was down) is still
  started when it is at most ``catchup_seconds`` old (default one hour); older ones are
  dropped. :func:`due_fires` returns at most :data:`MAX_DUE_FIRES`, the oldest first, so
  a sweep after a long outage does not start a flood; the next sweep goes on from the
  last one it started.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime, tzinfo
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from whimbrel.contract import attributes as run_attributes
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.limits import MAX_INPUT_BYTES, NAME_PATTERN, WORKFLOW_NAME_PATTERN

_NAME = re.compile(NAME_PATTERN)
_WORKFLOW_NAME = re.compile(WORKFLOW_NAME_PATTERN)

#: A missed firing younger than this is still started (an hour: a sweep outage of that
#: long loses nothing, a longer one does not start a day of firings at once).
DEFAULT_CATCHUP_SECONDS = 3600.0
#: Shorter windows would drop firings on a healthy system: the deployed sweep runs
#: every 60 seconds.
MIN_CATCHUP_SECONDS = 60.0
MAX_CATCHUP_SECONDS = 366 * 86400.0
#: The most firings one call of :func:`due_fires` returns.
MAX_DUE_FIRES = 100
#: The most firings one backfill may start.
MAX_BACKFILL_FIRES = 1000
MAX_EVERY_SECONDS = 366 * 86400
#: Separates the schedule id from the fire time in a firing's request id (schedule ids
#: cannot hold it).
FIRE_MARK = "@"
_FIRE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
           "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
           "@hourly": "0 * * * *"}
#: Where "does this cron ever fire?" is asked when the schedule has no ``start_at``.
_PROBE_FROM = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class Overlap(StrEnum):
    """What a firing does while the run of the previous one is still live."""

    SKIP = "skip"              #: it is dropped
    BUFFER_ONE = "buffer_one"  #: it waits for that run to end (one at most; more drop)
    ALLOW = "allow"            #: it starts anyway


class OverlapAction(StrEnum):
    START = "START"
    SKIP = "SKIP"
    BUFFER = "BUFFER"


def overlap_action(overlap: Overlap | str, previous_live: bool,
                   buffered: bool = False) -> OverlapAction:
    """What a due firing does, given whether the previous firing's run is still live and
    whether a firing is already buffered behind it.

    Raises:
        InvalidInput: an unknown overlap policy.
    """
    policy = _enum(Overlap, overlap, "overlap")
    if policy is Overlap.ALLOW or not previous_live:
        return OverlapAction.START
    if policy is Overlap.BUFFER_ONE and not buffered:
        return OverlapAction.BUFFER
    return OverlapAction.SKIP


def _enum(kind: type[Overlap], value: Any, field: str) -> Overlap:
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(v.value for v in kind)
        raise InvalidInput(f"{field} must be one of {known}, not {value!r}"[:200],
                           field=field) from None


def _epoch(value: Any) -> Any:
    """An aware datetime as epoch seconds; anything else as given (checked later)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.timestamp()
    return value


@dataclass(frozen=True)
class Schedule:
    """A workflow started on a cron or a rate (``Whimbrel.create_schedule``).

    Attributes:
        schedule_id: letters, digits, ``_`` and ``-`` (up to 64), starting with a letter.
        workflow_name: the registered workflow each firing starts.
        cron: a 5-field cron string (or a macro) in ``timezone``; exactly one of
            ``cron`` and ``every_seconds``.
        every_seconds: a whole number of seconds between firings.
        input: the run input of every firing (JSON).
        timezone: an IANA zone name the cron is read in.
        overlap: ``skip``, ``buffer_one`` or ``allow`` (:class:`Overlap`).
        catchup_seconds: how old a missed firing may be and still start.
        start_at: no firing before this (epoch seconds or an aware datetime).
        end_at: no firing after this. Fire times are whole seconds: ``start_at`` is
            rounded up to one, and an ``end_at`` in that same second with it, so
            ``start_at == end_at`` fires once.
        attributes: every firing's run's attributes (contract/attributes.py).
    """

    schedule_id: str
    workflow_name: str
    cron: str | None = None
    every_seconds: int | None = None
    input: Any = None
    timezone: str = "UTC"
    overlap: str = Overlap.SKIP.value
    catchup_seconds: float = DEFAULT_CATCHUP_SECONDS
    start_at: float | None = None
    end_at: float | None = None
    attributes: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "start_at", _epoch(self.start_at))
        object.__setattr__(self, "end_at", _epoch(self.end_at))
        if isinstance(self.cron, str):
            object.__setattr__(self, "cron", " ".join(self.cron.split()))

    # -- validation --------------------------------------------------------------------

    def problems(self) -> list[str]:
        """Every problem with this schedule; empty when it is valid."""
        out = self.field_problems()
        if not out:
            out.extend(self._window_problems())
        return out

    def field_problems(self) -> list[str]:
        """The problems of its fields one by one (types, names, the zone, the cron):
        what a stored schedule is checked for when it is read back (its window is not:
        an ended schedule's window may lie in the past)."""
        out: list[str] = []
        if not isinstance(self.schedule_id, str) or not _NAME.match(self.schedule_id):
            out.append(f"schedule_id must match {NAME_PATTERN}, not {self.schedule_id!r}"[:300])
        if not isinstance(self.workflow_name, str) or not _WORKFLOW_NAME.match(
                self.workflow_name):
            out.append(f"workflow_name must match {WORKFLOW_NAME_PATTERN}, "
                       f"not {self.workflow_name!r}"[:300])
        if (self.cron is None) == (self.every_seconds is None):
            out.append("give exactly one of cron and every_seconds")
        zone_ok = self._zone_problem(out)
        if self.cron is not None and zone_ok:
            self._cron_problems(out)
        ev = self.every_seconds
        if ev is not None and (isinstance(ev, bool) or not isinstance(ev, int)
                               or not 1 <= ev <= MAX_EVERY_SECONDS):
            out.append(f"every_seconds must be a whole number from 1 to {MAX_EVERY_SECONDS}, "
                       f"not {ev!r}"[:300])
        if self.overlap not in [o.value for o in Overlap]:  # a list: it may be unhashable
            out.append(f"overlap must be one of {', '.join(o.value for o in Overlap)}, "
                       f"not {self.overlap!r}"[:300])
        cu = self.catchup_seconds
        if isinstance(cu, bool) or not isinstance(cu, int | float) \
                or not MIN_CATCHUP_SECONDS <= cu <= MAX_CATCHUP_SECONDS:
            out.append(f"catchup_seconds must be a number from {MIN_CATCHUP_SECONDS:.0f} to "
                       f"{MAX_CATCHUP_SECONDS:.0f}, not {cu!r}"[:300])
        for name in ("start_at", "end_at"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                                  or not math.isfinite(v)):
                out.append(f"{name} must be epoch seconds or an aware datetime, not {v!r}"
                           [:300])
        try:
            text = json.dumps(self.input, allow_nan=False)
            if len(text.encode()) > MAX_INPUT_BYTES:
                out.append(f"input is {len(text.encode())} bytes of JSON, more than the "
                           f"limit of {MAX_INPUT_BYTES}")
        except (TypeError, ValueError, RecursionError) as exc:
            out.append(f"input is not JSON: {exc}"[:300])
        try:
            run_attributes.check(self.attributes)
        except InvalidInput as exc:
            out.append(exc.message)
        return out

    def _zone_problem(self, out: list[str]) -> bool:
        try:
            zone_of(self.timezone)
        except InvalidInput as exc:
            out.append(exc.message)
            return False
        return True

    def _cron_problems(self, out: list[str]) -> None:
        if not isinstance(self.cron, str):
            out.append(f"cron must be a string, not {self.cron!r}"[:300])
            return
        if len(self.cron) > 200:
            out.append(f"cron is {len(self.cron)} characters long, more than 200")
            return
        expr = _MACROS.get(self.cron.lower(), self.cron)
        if len(expr.split()) != 5:
            out.append(f"cron {self.cron!r} must have 5 fields (minute hour day-of-month "
                       f"month day-of-week) or be one of {', '.join(_MACROS)}"[:300])
            return
        probe = datetime.fromtimestamp(_PROBE_FROM, UTC)
        try:
            CronSim(expr, probe)
        except (CronSimError, ValueError, KeyError, IndexError) as exc:
            parts = expr.split()
            try:  # valid with any month: its days exist in none of the months it names
                CronSim(" ".join([*parts[:3], "*", parts[4]]), probe)
            except (CronSimError, ValueError, KeyError, IndexError):
                detail = f": {exc}" if str(exc) else ""
                out.append(f"cron {self.cron!r} is not a valid cron string{detail}"[:300])
            else:
                out.append(f"cron {self.cron!r} never fires: no month it names has a day "
                           f"{parts[2]!r}"[:300])

    def _window_problems(self) -> list[str]:
        if self.start_at is not None and self.end_at is not None \
                and self.end_at < self.start_at:
            return ["end_at is before start_at"]
        probe = self.start_at if self.start_at is not None else _PROBE_FROM
        first = next_fire(self, probe - 1)
        if first is None:
            where = "before end_at" if self.end_at is not None else "in 50 years"
            how = f"cron {self.cron!r}" if self.cron is not None else \
                f"every {self.every_seconds} s from {self.start_at}"
            return [f"this schedule never fires {where} ({how})"]
        return []

    def validate(self) -> Schedule:
        """Return self when valid.

        Raises:
            InvalidInput: naming the first bad field; ``problems`` lists them all.
        """
        problems = self.problems()
        if problems:
            raise InvalidInput(f"schedule {self.schedule_id!r}: " + "; ".join(problems),
                               field="schedule", problems=problems)
        return self

    # -- (de)serialisation -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The schedule as plain data (defaults left out), for YAML, JSON and the store."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("schedule_id", "workflow_name") or value != f.default:
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schedule:
        """Build and validate a schedule from plain data (a YAML file's mapping).

        Raises:
            InvalidInput: unknown fields, or what :meth:`validate` finds.
        """
        if not isinstance(data, Mapping):
            raise InvalidInput("a schedule must be a mapping", field="schedule")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in set(data) - known)
        if unknown:
            raise InvalidInput(f"schedule: unknown field(s) {', '.join(unknown)}"[:300],
                               field="schedule")
        missing = [k for k in ("schedule_id", "workflow_name") if k not in data]
        if missing:
            raise InvalidInput(f"schedule: missing {', '.join(missing)}", field="schedule")
        return cls(**data).validate()


def zone_of(name: Any) -> tzinfo:
    """The time zone named ``name`` (``"UTC"`` or an IANA name such as
    ``"Europe/Berlin"``).

    Raises:
        InvalidInput: not a known zone.
    """
    if name == "UTC":
        return UTC
    try:
        # Only a name of the IANA database: ZoneInfo also opens any other file of the
        # system's zone folder ("localtime", "posixrules", "right/UTC"), whose meaning
        # is the host's, so two sweepers could fire one schedule at different times.
        if not isinstance(name, str) or name not in iana_zone_names():
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: "America" (a folder)
        raise InvalidInput(f"timezone {repr(name)[:80]} is not a known IANA time zone "
                           "(such as 'UTC' or 'Europe/Berlin')", field="timezone") from None


@functools.cache
def iana_zone_names() -> frozenset[str]:
    """The zone names of the IANA database: the list the ``tzdata`` package ships (a
    dependency), else what the system's zone folder holds, less its host link."""
    try:
        text = importlib.resources.files("tzdata").joinpath("zones").read_text()
    except (ModuleNotFoundError, OSError):
        return frozenset(available_timezones() - {"localtime"})
    return frozenset(text.split())


# -- firing times --------------------------------------------------------------------------

def _next_raw(s: Schedule, after: float) -> float | None:
    """The first fire time strictly after ``after``, ignoring start_at/end_at."""
    if s.every_seconds is not None:
        every = s.every_seconds
        anchor = math.ceil(s.start_at) if s.start_at is not None else 0
        if after < anchor:
            return float(anchor)
        return float(anchor + (math.floor((after - anchor) / every) + 1) * every)
    if s.cron is None:
        return None
    expr = _MACROS.get(s.cron.lower(), s.cron)
    it = CronSim(expr, datetime.fromtimestamp(math.floor(after), zone_of(s.timezone)))
    # In a repeated hour (fall back) a fixed-time cron is read on the wall clock, so its
    # first answer may lie before ``after``: step on (a few steps at most).
    for _ in range(8):
        try:
            fire = next(it).timestamp()
        except StopIteration:  # nothing in 50 years
            return None
        if fire > after:
            return float(fire)
    return None


def next_fire(schedule: Schedule, after_epoch: float) -> float | None:
    """The schedule's first fire time strictly after ``after_epoch``, within
    ``start_at``/``end_at``; None when it fires no more."""
    after = float(after_epoch)
    if schedule.start_at is not None:
        after = max(after, math.ceil(schedule.start_at) - 1.0)
    fire = _next_raw(schedule, after)
    end = schedule.end_at
    if end is not None and schedule.start_at is not None:
        # Rounding the start up to a whole second never empties the window: an end in
        # that same second goes with it (start_at == end_at fires once, the one-firing
        # recipe of docs/schedules.md).
        end = max(end, math.ceil(schedule.start_at))
    if fire is None or (end is not None and fire > end):
        return None
    return fire


def due_fires(schedule: Schedule, last_fire: float | None, now: float, *,
              limit: int = MAX_DUE_FIRES) -> list[float]:
    """The firings to start now: after ``last_fire`` (the last one started; None: none
    yet — the wiring records the creation time, so a new schedule does not fire for the
    past), at or before ``now``, and no older than ``now - catchup_seconds``. Sorted,
    unique, at most ``limit`` of them, the oldest first."""
    window = math.ceil(now - schedule.catchup_seconds) - 1.0  # fires are whole seconds
    after = window if last_fire is None else max(window, float(last_fire))
    out: list[float] = []
    while len(out) < limit:
        fire = next_fire(schedule, after)
        if fire is None or fire > now:
            break
        out.append(fire)
        after = fire
    return out


def backfill_fires(schedule: Schedule, start: float, end: float, *,
                   limit: int = MAX_BACKFILL_FIRES) -> list[float]:
    """The fire times in ``[start, end]``, ignoring ``catchup_seconds``, ``start_at`` and
    ``end_at`` (a backfill asks for exactly that range).

    Raises:
        InvalidInput: ``end`` before ``start``, or more than ``limit`` firings in the
            range (split it).
    """
    if not (math.isfinite(start) and math.isfinite(end)) or end < start:
        raise InvalidInput(f"backfill range [{start}, {end}] is empty or not finite",
                           field="end")
    out: list[float] = []
    after = math.ceil(start) - 1.0
    while True:
        fire = _next_raw(schedule, after)
        if fire is None or fire > end:
            return out
        if len(out) == limit:
            raise InvalidInput(f"backfill of {schedule.schedule_id!r} from {start} to {end} "
                               f"has more than {limit} firings; split the range",
                               field="end", limit=limit)
        out.append(fire)
        after = fire


# -- request ids ---------------------------------------------------------------------------

def fire_request_id(schedule_id: str, fire: float) -> str:
    """``<schedule_id>@<fire time as ISO-8601 UTC, whole seconds>``."""
    stamp = datetime.fromtimestamp(math.floor(fire), UTC).strftime(_FIRE_FORMAT)
    return f"{schedule_id}{FIRE_MARK}{stamp}"


def parse_fire_request_id(request_id: str) -> tuple[str, float] | None:
    """``(schedule_id, fire)`` of a firing's request id; None for any other id."""
    sid, mark, stamp = request_id.rpartition(FIRE_MARK)
    if not mark or not _NAME.match(sid):
        return None
    try:
        when = datetime.strptime(stamp, _FIRE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    return sid, when.timestamp()
