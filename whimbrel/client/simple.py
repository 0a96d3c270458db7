"""The Simple Lambda API, client side: one item in, the stream-triggered Lambdas do the rest.

Each function writes exactly one item, in the format any language can write with one
raw ``PutItem`` (docs/simple-api.md). Nothing here runs workflow logic.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from whimbrel.contract import attributes as run_attributes
from whimbrel.contract import checks
from whimbrel.contract.errors import InvalidInput, RequestIdReused
from whimbrel.contract.ids import new_request_id, parse_activity_exec_id, workflow_exec_id_for
from whimbrel.contract.payloads import clip_error, payload_digest
from whimbrel.contract.priority import check_priority
from whimbrel.contract.records import EventRecord, RequestRecord
from whimbrel.contract.states import Transition
from whimbrel.engine import Clock, StorePort, tracing
from whimbrel.settings import ENV_ACTIVITY_EXEC_ID, ENV_WORKFLOW_NAME

__all__ = ["Rejection", "list_rejections", "request_workflow", "send_activity_event"]


def request_workflow(store: StorePort, clock: Clock, name: str, input: Any = None, *,
                     version: int | None = None, source: str | None = None,
                     request_id: str | None = None,
                     require_definition: Callable[[str, int | None], object] | None = None,
                     priority: int | None = None,
                     attributes: Mapping[str, Any] | None = None) -> str:
    """Write one ``workflow_request`` item; returns its ``workflow_request_id``.

    ``request_id`` is the idempotency key, as for ``start_workflow``: writing it again
    writes nothing and names the same single run. ``require_definition(name, version)``
    is called once the arguments are valid and before the write; it raises when the
    definition does not exist, so a request that could only be rejected is never written.

    Raises:
        InvalidInput: empty name, bad version, bad request id, input not JSON / too
            large, a priority that is not 0-9, or bad attributes.
        RequestIdReused: ``request_id`` already asked for another workflow, or with
            another input (the same request again writes nothing).
        DefinitionNotFound: from ``require_definition``.
    """
    checks.workflow_name(name)
    if priority is not None:
        check_priority(priority)
    checks.version(version)
    checks.optional_text(source, "source")
    payload = store.payload_limits.encode(input, "input", run_input=True)
    attrs = run_attributes.encode(run_attributes.check(attributes))
    if request_id is None:
        request_id = new_request_id()
    else:
        workflow_exec_id_for(request_id)  # the check start_workflow's id goes through
    if require_definition is not None:
        require_definition(name, version)
    if not store.cold.put_request(RequestRecord(request_id, name, clock(), version=version,
                                                input=payload, manual=False, source=source,
                                                traceparent=tracing.current(),
                                                priority=priority, attributes=attrs)):
        existing = store.cold.get_request(request_id)
        why = None if existing is None else \
            f"of workflow {existing.workflow_name!r}, not {name!r}" \
            if existing.workflow_name != name else "with another input" \
            if payload_digest(existing.input) != payload_digest(payload) else None
        if why is not None:
            raise RequestIdReused(request_id=request_id,
                                  workflow_exec_id=workflow_exec_id_for(request_id), why=why)
    return request_id


def send_activity_event(store: StorePort, clock: Clock, activity_exec_id: str,
                        transition: Transition | str, *, output: Any = None,
                        error: Any = None) -> str:
    """Write one ``activity_event`` item; returns its ``activity_event_id``.

    ``activity_name`` and ``workflow_exec_id`` are filled from the id itself, and
    ``workflow_name`` from the activity's environment (``WHIMBREL_WORKFLOW_NAME``) when
    this process runs as that activity.

    Raises:
        InvalidInput: malformed id, unknown transition, or output not JSON / too large.
    """
    key = parse_activity_exec_id(activity_exec_id)
    try:
        verb = Transition(transition)
    except ValueError as exc:
        raise InvalidInput(f"unknown transition {transition!r}", field="transition") from exc
    if verb is Transition.TIME_OUT:
        # The contract leaves TIME_OUT to the heartbeat listener; the Lambda would
        # reject the event anyway, so refuse it here where the caller can see why.
        raise InvalidInput("TIME_OUT is applied only by the heartbeat listener; report "
                           "FAILED (or stop heartbeating) instead", field="transition")
    workflow_name = None
    if os.environ.get(ENV_ACTIVITY_EXEC_ID) == activity_exec_id:
        workflow_name = os.environ.get(ENV_WORKFLOW_NAME) or None
    event_id = new_request_id()
    store.cold.put_event(EventRecord(
        event_id, activity_exec_id, verb.value, clock(), activity_name=key.activity_name,
        workflow_exec_id=key.workflow_exec_id, workflow_name=workflow_name,
        output=store.payload_limits.encode(output, "output"),
        error=clip_error(error), source="simple-api", traceparent=tracing.current()))
    return event_id


@dataclass(frozen=True)
class Rejection:
    """A stream record that could never succeed, and why."""

    rejection_id: str
    day: str
    source: str
    reason: str
    error_type: str
    record: Any
    when_epoch: float


def list_rejections(store: StorePort, day: str | None = None, *, limit: int | None = 100,
                    clock: Clock | None = None) -> list[Rejection]:
    """Rejections recorded on ``day`` (``YYYY-MM-DD``, UTC; today when None), newest first."""
    if day is None:
        now = clock() if clock else datetime.now(UTC).timestamp()
        day = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")
    checks.day(day)
    checks.limit(limit)
    out = []
    for row in store.cold.list_rejections(day, limit=limit):
        try:
            record = json.loads(row.record)
        except ValueError:
            record = row.record
        out.append(Rejection(row.rejection_id, row.rejection_day, row.source, row.reason,
                             row.error_type, record, float(row.when_epoch)))
    return out

