"""The stream consumers: which handler consumes which table's stream, how (batching,
retries, filters), and the scheduled heartbeat listener.

The CDK event source mappings and the local runtime (``whimbrel dev``) read the same
values from here, so the local stack behaves like the deployed one. The tables
themselves are in :mod:`whimbrel.store.specs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from whimbrel.contract.notifications import FAILURE_STATES
from whimbrel.contract.states import WORKFLOW_TERMINAL, ActivityState
from whimbrel.store.specs import (
    ACTIVITY_EVENT,
    ACTIVITY_EXEC,
    MAP_ITEM,
    WORKFLOW_EXEC,
    WORKFLOW_REQUEST,
    TableSpec,
)


@dataclass(frozen=True)
class StreamConsumerSpec:
    """How a stream-triggered handler consumes its table's stream.

    The CDK event source mappings and the local runtime (``whimbrel dev``) read the same
    values from here, so the local stack behaves like the deployed one.
    """

    name: str
    table: TableSpec
    handler: str
    batch_size: int = 10
    max_batching_window_seconds: int = 0
    max_retry_attempts: int = 3
    max_record_age_seconds: int = 3600
    bisect_batch_on_error: bool = True
    report_batch_item_failures: bool = True
    starting_position: str = "TRIM_HORIZON"
    parallelization_factor: int = 1
    #: Lambda event filter patterns (OR-ed), in Lambda's JSON filter syntax.
    filter_patterns: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    #: The function this mapping feeds; several consumers (one per table) may share one.
    #: Empty: a function of its own, named after the consumer.
    function: str = ""

    @property
    def function_name(self) -> str:
        return self.function or self.name


#: A row written again by a client (to be rejected as a re-used id), not Whimbrel's own
#: bookkeeping on it: Whimbrel's updates always set ``processed_epoch`` or
#: ``expires_epoch``, a client's re-put carries neither.
REWRITTEN_BY_CLIENT = {
    "eventName": ["MODIFY"],
    "dynamodb": {"NewImage": {"processed_epoch": {"N": [{"exists": False}]},
                              "expires_epoch": {"N": [{"exists": False}]}}},
}

WORKFLOW_REQUEST_CONSUMER = StreamConsumerSpec(
    name="workflow_request",
    table=WORKFLOW_REQUEST,
    handler="lambdas.workflow_request.handler",
    # Inserts that are not a Full Logic trace (manual = true), and rewrites.
    filter_patterns=(
        {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"manual": {"BOOL": [False]}}}},
        {
            "eventName": ["INSERT"],
            "dynamodb": {"NewImage": {"manual": {"BOOL": [{"exists": False}]}}},
        },
        REWRITTEN_BY_CLIENT,
    ),
)

ACTIVITY_EVENT_CONSUMER = StreamConsumerSpec(
    name="activity_event",
    table=ACTIVITY_EVENT,
    handler="lambdas.activity_event.handler",
    filter_patterns=({"eventName": ["INSERT"]}, REWRITTEN_BY_CLIENT),
)

_ENDED = sorted(s.value for s in WORKFLOW_TERMINAL)
_FAILED = sorted(s.value for s in FAILURE_STATES)
_READY = [ActivityState.READY.value]
_WAITING = {"state": {"S": _READY}, "waiting_for": {"S": [{"exists": True}]}}

#: The function that publishes events (docs/events.md), fed by two tables' streams. Its
#: filters let through only the writes that can be events; the handler decides for good.
NOTIFY_FUNCTION = "notify"
NOTIFY_HANDLER = "lambdas.notify.handler"

NOTIFY_WORKFLOW_CONSUMER = StreamConsumerSpec(
    name="notify_workflow",
    table=WORKFLOW_EXEC,
    handler=NOTIFY_HANDLER,
    function=NOTIFY_FUNCTION,
    # The write that ended a run (not the bookkeeping on an ended one, not TTL deletes).
    filter_patterns=(
        {"eventName": ["MODIFY"],
         "dynamodb": {"NewImage": {"state": {"S": _ENDED}},
                      "OldImage": {"state": {"S": [{"anything-but": _ENDED}]}}}},
    ),
)

#: Which writes of an attempt can be events (``activity_exec`` and ``map_item`` alike).
_ATTEMPT_EVENTS: tuple[Mapping[str, Any], ...] = (
    # The write that failed or timed out an attempt, unless it had been asked to stop
    # (CANCELLED_RUNNING) or had ended already (a late attribute update).
    {"eventName": ["MODIFY"],
     "dynamodb": {"NewImage": {"state": {"S": _FAILED}},
                  "OldImage": {"state": {"S": [{"anything-but": [
                      *_FAILED, ActivityState.CANCELLED_RUNNING.value]}]}}}},
    # The write that made a wait READY (waiting_for set), or created it READY.
    {"eventName": ["MODIFY"],
     "dynamodb": {"NewImage": _WAITING,
                  "OldImage": {"state": {"S": [{"anything-but": _READY}]}}}},
    {"eventName": ["INSERT"], "dynamodb": {"NewImage": _WAITING}},
)

NOTIFY_ACTIVITY_CONSUMER = StreamConsumerSpec(
    name="notify_activity",
    table=ACTIVITY_EXEC,
    handler=NOTIFY_HANDLER,
    function=NOTIFY_FUNCTION,
    filter_patterns=_ATTEMPT_EVENTS,
)

NOTIFY_MAP_ITEM_CONSUMER = StreamConsumerSpec(
    name="notify_map_item",
    table=MAP_ITEM,
    handler=NOTIFY_HANDLER,
    function=NOTIFY_FUNCTION,
    filter_patterns=_ATTEMPT_EVENTS,
)

#: The consumers of the events feature (deployed with it; local only with an events file).
NOTIFY_CONSUMERS: tuple[StreamConsumerSpec, ...] = (
    NOTIFY_WORKFLOW_CONSUMER,
    NOTIFY_ACTIVITY_CONSUMER,
    NOTIFY_MAP_ITEM_CONSUMER,
)

#: The consumers that run the engine (the Simple Lambda API).
ENGINE_CONSUMERS: tuple[StreamConsumerSpec, ...] = (
    WORKFLOW_REQUEST_CONSUMER,
    ACTIVITY_EVENT_CONSUMER,
)

#: A run item removed by TTL (its retention ran out): its payload objects are deleted
#: (store/blob_expiry.py says why TTL removals only, and why twice is harmless).
PAYLOAD_EXPIRY_CONSUMER = StreamConsumerSpec(
    name="payload_expiry",
    table=WORKFLOW_EXEC,
    handler="lambdas.payload_expiry.handler",
    # Deleting a prefix is a listing and one request per 1,000 keys: a batch of runs
    # per invocation, and more time to reach them than a record of the engine gets.
    batch_size=25,
    max_record_age_seconds=6 * 3600,
    filter_patterns=(
        {"eventName": ["REMOVE"],
         "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}},
    ),
)

#: The consumers of the payload bucket (deployed, and run locally, with a bucket).
PAYLOAD_CONSUMERS: tuple[StreamConsumerSpec, ...] = (PAYLOAD_EXPIRY_CONSUMER,)

STREAM_CONSUMERS: tuple[StreamConsumerSpec, ...] = (
    ENGINE_CONSUMERS + NOTIFY_CONSUMERS + PAYLOAD_CONSUMERS)

#: The scheduled heartbeat listener (sweep + reconcile).
HEARTBEAT_HANDLER = "lambdas.heartbeat.handler"
HEARTBEAT_RATE_SECONDS_AWS = 60
HEARTBEAT_RATE_SECONDS_LOCAL = 5.0
