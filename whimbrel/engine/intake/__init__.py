"""The engine-side adapter of the Simple Lambda API: one stream record in, one engine call.

The Lambda handlers (``lambdas/``) and the local runtime hand each DynamoDB-stream
record (Lambda's JSON shape) to :class:`Intake`, which has one handler per stream —
``requests.py`` (a ``workflow_request`` row starts its run) and ``events.py`` (an
``activity_event`` row reports a transition or a command, ``rows.py``) — over one
skeleton (``skeleton.py``): decode the whole item first (``items.py``, ``decode.py``:
ids, verb, payload sizes), apply it through the engine (whose guards hold for rows as
for every caller), and, whatever cannot succeed, reject it with a recorded message and
go on, so no record blocks the ones behind it; a retryable error is raised again for
Lambda to retry the record.

Every processed row is marked with what happened to it (``outcome``, ``result_state``,
``reason``, ``processed_epoch``) and when it expires, so its sender can read it back
(``marks.py``). A row written again under the same id (a MODIFY record) is rejected as
a re-used id; the run keeps what started it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from whimbrel.engine.engine import Engine
from whimbrel.engine.intake.decode import (
    REJECTION_TTL_SECONDS,
    image_of,
    record_keys,
    record_rejection,
)
from whimbrel.engine.intake.events import IMPLIED_RUNNING, EventRows
from whimbrel.engine.intake.requests import RequestRows
from whimbrel.engine.intake.result import IntakeResult, Outcome
from whimbrel.engine.intake.skeleton import (
    SOURCE_ACTIVITY_EVENT,
    SOURCE_DEAD_LETTER,
    SOURCE_WORKFLOW_REQUEST,
    Skeleton,
)

__all__ = [
    "IMPLIED_RUNNING",
    "REJECTION_TTL_SECONDS",
    "SOURCE_ACTIVITY_EVENT",
    "SOURCE_DEAD_LETTER",
    "SOURCE_WORKFLOW_REQUEST",
    "Intake",
    "IntakeResult",
    "Outcome",
    "image_of",
    "record_keys",
    "record_rejection",
]


class Intake:
    """Turns stream records of the two Simple Lambda API tables into engine calls."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        skeleton = Skeleton(engine)
        self._requests = RequestRows(skeleton)
        self._events = EventRows(skeleton)

    def workflow_request(self, record: Mapping[str, Any]) -> IntakeResult:
        """Start the workflow an inserted request asks for (requests.py).

        Raises:
            WhimbrelError: only retryable ones (the record should be retried).
        """
        return self._requests.handle(record)

    def activity_event(self, record: Mapping[str, Any]) -> IntakeResult:
        """Apply the transition (or command) an inserted event reports, with follow-ups
        (events.py).

        Raises:
            WhimbrelError: only retryable ones (the record should be retried).
        """
        return self._events.handle(record)
