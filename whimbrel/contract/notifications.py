"""The events Whimbrel publishes (docs/events.md): their types, ids, envelope and schema.

Three facts are told to the outside, each exactly once: a workflow ended (COMPLETED,
FAILED, CANCELLED, TIMED_OUT), an activity failed for good (no retry follows), and a
wait started (an attempt became READY with ``waiting_for`` set, e.g. an approval was
requested). On AWS they are put on an EventBridge bus; locally they are JSON lines.
Both carry the envelope EventBridge delivers: ``source`` is ``whimbrel``, ``detail-type``
one of :class:`DetailType`, ``detail`` the fact with ids, names, states and times.

Each event has an ``event_id`` in its detail, derived from the fact alone, so that every
redelivery of the stream record that announces it computes the same id: consumers
dedupe on it. Pure: no I/O, times are arguments.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_FAILED,
    WORKFLOW_TERMINAL,
    WORKFLOW_WAITING,
    ActivityState,
    WorkflowState,
)

__all__ = [
    "EVENT_SCHEMA",
    "EVENT_SOURCE",
    "FAILURE_STATES",
    "MAX_EVENT_ERROR_CHARS",
    "MAX_EVENT_OUTPUT_BYTES",
    "DetailType",
    "Notification",
    "activity_failed",
    "iso_time",
    "wait_started",
    "workflow_ended",
]

#: The ends of an attempt its retry policy answers: with no retry left, they are failures
#: for good (``whimbrel.engine.rules.failed_for_good``) and make an event.
FAILURE_STATES: frozenset[ActivityState] = ACTIVITY_FAILED
#: ``source`` of every event (match it in an EventBridge rule).
EVENT_SOURCE = "whimbrel"
#: Errors in events are cut to this many characters (the item keeps the whole error).
MAX_EVENT_ERROR_CHARS = 2_000
#: A COMPLETED run's output travels in its event only up to this size (JSON bytes);
#: beyond it the event says ``output_truncated`` and the consumer reads the run.
MAX_EVENT_OUTPUT_BYTES = 8_000
#: The envelope ``id`` of a local event is a UUIDv5 of its ``event_id`` in this namespace.
_ID_NAMESPACE = uuid.UUID("0b6e3f1c-5a7d-4f55-9a1e-77686d627265")
#: What a local event says in ``account`` (EventBridge fills in the real one).
LOCAL_ACCOUNT = "000000000000"


class DetailType(StrEnum):
    """The ``detail-type`` of each kind of event."""

    WORKFLOW_ENDED = "Workflow Ended"
    ACTIVITY_FAILED = "Activity Failed"
    WAIT_STARTED = "Wait Started"


def iso_time(epoch: float, *, millis: bool = True) -> str:
    """``2026-11-21T10:00:00.123Z`` (UTC); without ``millis`` to the second."""
    moment = datetime.fromtimestamp(epoch, UTC)
    if not millis:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class Notification:
    """One event: what a publisher sends (EventBridge ``PutEvents`` entry, JSON line)."""

    event_id: str
    detail_type: DetailType
    #: When the fact happened (epoch seconds): the envelope's ``time``.
    time: float
    detail: Mapping[str, Any]
    resources: tuple[str, ...] = field(default=())

    def detail_json(self) -> str:
        return json.dumps(self.detail, sort_keys=True, separators=(",", ":"))

    def envelope(self, *, account: str = LOCAL_ACCOUNT, region: str = "us-east-1",
                 envelope_id: str | None = None) -> dict[str, Any]:
        """The event as EventBridge delivers it to a rule's target. ``id`` is
        EventBridge's own on AWS; locally a UUIDv5 of ``event_id`` (stable)."""
        return {
            "version": "0",
            "id": envelope_id or str(uuid.uuid5(_ID_NAMESPACE, self.event_id)),
            "detail-type": self.detail_type.value,
            "source": EVENT_SOURCE,
            "account": account,
            "time": iso_time(self.time, millis=False),
            "region": region,
            "resources": list(self.resources),
            "detail": dict(self.detail),
        }


# -- the three facts ------------------------------------------------------------------


def _common(workflow_exec_id: str, workflow_name: str,
            version: int | None) -> dict[str, Any]:
    return {"workflow_exec_id": workflow_exec_id, "workflow_name": workflow_name,
            "workflow_version": version}


def _attempt(item: ActivityRecord, event_id: str) -> dict[str, Any]:
    return {"event_id": event_id,
            **_common(item.workflow_exec_id, item.workflow_name, item.workflow_version),
            "activity_exec_id": item.activity_exec_id, "activity_name": item.activity_name,
            "attempt": item.attempt, "state": item.state.value if item.state else None}


def _error(error: str | None) -> str | None:
    text = error
    if text is not None and len(text) > MAX_EVENT_ERROR_CHARS:
        keep = MAX_EVENT_ERROR_CHARS - 40
        text = text[:keep] + f"... [{len(text) - keep} characters cut]"
    return text


def _duration(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return round(max(0.0, end - start), 3)


def queued_seconds(wf: WorkflowRecord, ended: float) -> float | None:
    """How long a run waited QUEUED for a slot of its definition's ``max_running`` (until
    it started, or ended without starting); None: it never waited."""
    waiting = {s.value for s in WORKFLOW_WAITING}
    since = next((h.at for h in wf.history if h.state in waiting), None)
    if since is None:
        return None
    started = next((h.at for h in wf.history if h.at >= since and h.state
                    == WorkflowState.RUNNING.value), None)
    return _duration(since, started if started is not None else ended)


def workflow_ended(wf: WorkflowRecord, *, previous: str | None, redrive_count: int = 0,
                   output: Mapping[str, Any] | None = None) -> Notification:
    """A run reached a terminal state (``wf`` is the item its terminal write left).

    ``redrive_count`` tells the ends of one run apart (a redriven run ends again);
    ``output`` (a COMPLETED run's sink outputs) goes in only while it is small.

    Raises:
        ValueError: ``wf`` is not terminal.
    """
    if not wf.state.is_terminal:
        raise ValueError(f"workflow {wf.workflow_exec_id} is {wf.state}, not ended")
    ended = wf.ended_epoch if wf.ended_epoch is not None else wf.updated_epoch
    event_id = f"{wf.workflow_exec_id}/ended/{redrive_count}"
    detail: dict[str, Any] = {
        "event_id": event_id,
        **_common(wf.workflow_exec_id, wf.workflow_name, wf.version),
        "workflow_request_id": wf.workflow_request_id or None,
        "state": wf.state.value,
        "previous_state": previous,
        "created_at": iso_time(wf.created_epoch),
        "ended_at": iso_time(ended),
        "duration_seconds": _duration(wf.created_epoch, ended),
        "error": _error(wf.error),
        "redrive_count": redrive_count,
    }
    queued = queued_seconds(wf, ended)
    if queued is not None:  # it waited QUEUED for a run slot (max_running)
        detail["queued_seconds"] = queued
    if output is not None:
        text = json.dumps(output, sort_keys=True, separators=(",", ":"))
        if len(text.encode()) <= MAX_EVENT_OUTPUT_BYTES:
            detail["output"] = dict(output)
        else:
            detail["output_truncated"] = True
    return Notification(event_id, DetailType.WORKFLOW_ENDED, ended, detail)


def activity_failed(item: ActivityRecord, *, previous: str | None,
                    max_attempts: int) -> Notification:
    """An attempt failed or timed out and no retry follows (``rules.failed_for_good``)."""
    ended = item.ended_epoch if item.ended_epoch is not None else item.updated_epoch
    event_id = f"{item.activity_exec_id}/failed"
    detail: dict[str, Any] = {
        **_attempt(item, event_id),
        "max_attempts": max_attempts,
        "previous_state": previous,
        "started_at": iso_time(item.started_epoch) if item.started_epoch is not None else None,
        "ended_at": iso_time(ended),
        "duration_seconds": _duration(item.started_epoch, ended),
        "error": _error(item.error),
        "error_type": item.error_type,
    }
    return Notification(event_id, DetailType.ACTIVITY_FAILED, ended, detail)


def wait_started(item: ActivityRecord, *, waiting_for: str,
                 approvers: Sequence[str] | None = None) -> Notification:
    """An attempt became READY to wait (``waiting_for``: ``approval``, ``signal:…``,
    ``timer:…``); ``approvers`` when the item names them."""
    event_id = f"{item.activity_exec_id}/waiting"
    detail: dict[str, Any] = {
        **_attempt(item, event_id),
        "waiting_for": waiting_for,
        "started_at": iso_time(item.updated_epoch),
        "deadline_at": iso_time(item.timer_epoch) if item.timer_epoch is not None else None,
    }
    if approvers is not None:
        detail["approvers"] = [str(a) for a in approvers]
    return Notification(event_id, DetailType.WAIT_STARTED, item.updated_epoch, detail)


# -- the schema (docs/events.md prints it; tests validate every local event) -------------

_STR = {"type": "string", "minLength": 1}
_TEXT_OR_NULL = {"type": ["string", "null"]}
_TIME = {"type": "string", "format": "date-time"}
_TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}
_SECONDS = {"type": ["number", "null"], "minimum": 0}
_RUN = {"event_id": _STR, "workflow_exec_id": _STR, "workflow_name": _STR,
        "workflow_version": {"type": ["integer", "null"], "minimum": 1}}
_ATTEMPT = {"activity_exec_id": _STR, "activity_name": _STR,
            "attempt": {"type": "integer", "minimum": 1}}
_WORKFLOW_END_STATES = sorted(s.value for s in WORKFLOW_TERMINAL)


def _object(properties: Mapping[str, Any], optional: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False,
            "required": [k for k in properties if k not in optional],
            "properties": dict(properties)}


#: JSON Schema (2020-12) of one event, as EventBridge delivers it and as the local
#: events file holds it (one per line).
EVENT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Whimbrel event",
    "type": "object",
    "required": ["version", "id", "detail-type", "source", "account", "time", "region",
                 "resources", "detail"],
    "properties": {
        "version": {"const": "0"},
        "id": _STR,
        "detail-type": {"enum": [t.value for t in DetailType]},
        "source": {"const": EVENT_SOURCE},
        "account": {"type": "string"},
        "time": _TIME,
        "region": {"type": "string"},
        "resources": {"type": "array", "items": {"type": "string"}},
        "detail": {"type": "object"},
    },
    "allOf": [
        {"if": {"properties": {"detail-type": {"const": t.value}}},
         "then": {"properties": {"detail": {"$ref": f"#/$defs/{t.name}"}}}}
        for t in DetailType
    ],
    "$defs": {
        DetailType.WORKFLOW_ENDED.name: _object({
            **_RUN,
            "workflow_request_id": _TEXT_OR_NULL,
            "state": {"enum": _WORKFLOW_END_STATES},
            "previous_state": _TEXT_OR_NULL,
            "created_at": _TIME,
            "ended_at": _TIME,
            "duration_seconds": _SECONDS,
            "error": _TEXT_OR_NULL,
            "redrive_count": {"type": "integer", "minimum": 0},
            "queued_seconds": _SECONDS,
            "output": {"type": "object"},
            "output_truncated": {"const": True},
        }, optional=("output", "output_truncated", "queued_seconds")),
        DetailType.ACTIVITY_FAILED.name: _object({
            **_RUN, **_ATTEMPT,
            "max_attempts": {"type": "integer", "minimum": 1},
            "state": {"enum": sorted(s.value for s in FAILURE_STATES)},
            "previous_state": _TEXT_OR_NULL,
            "started_at": _TIME_OR_NULL,
            "ended_at": _TIME,
            "duration_seconds": _SECONDS,
            "error": _TEXT_OR_NULL,
            "error_type": _TEXT_OR_NULL,
        }),
        DetailType.WAIT_STARTED.name: _object({
            **_RUN, **_ATTEMPT,
            "state": {"const": "READY"},
            "waiting_for": _STR,
            "started_at": _TIME,
            "deadline_at": _TIME_OR_NULL,
            "approvers": {"type": "array", "items": {"type": "string"}},
        }, optional=("approvers",)),
    },
}
