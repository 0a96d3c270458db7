"""The ``workflow_request`` stream's handler: an inserted request row starts its run.

A row written by the Full Logic API for its trace (``manual``) is ignored. The start's
conditional create says whether this delivery created the run (STARTED) or found it
(DUPLICATE: a redelivery, or a second writer of the same id with the same request), so
no read comes first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.parser import parse

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.engine import tracing
from whimbrel.engine.intake.decode import image_of, row_payload
from whimbrel.engine.intake.items import WorkflowRequestItem
from whimbrel.engine.intake.result import IntakeResult, Outcome
from whimbrel.engine.intake.skeleton import SOURCE_WORKFLOW_REQUEST, Handler, Seen

#: How far in the future a request row's ``when_epoch`` may lie (writers' clock skew).
WHEN_SLACK_SECONDS = 300.0


class RequestRows(Handler):
    """Starts the run each inserted ``workflow_request`` row asks for."""

    source = SOURCE_WORKFLOW_REQUEST
    id_field = "workflow_request_id"
    marks_applied = False

    def mark(self, row_id: str, result: IntakeResult, record: Mapping[str, Any]) -> None:
        self.skeleton.marks.request(row_id, result, record)

    def apply(self, record: Mapping[str, Any], seen: Seen) -> IntakeResult:
        item = parse(event=image_of(record), model=WorkflowRequestItem)
        if item.manual:
            return IntakeResult(Outcome.IGNORED, reason="manual request (Full Logic trace)")
        seen.row_id = request_id = item.workflow_request_id
        refuse_future(item.when_epoch, self.engine.clock())
        wx = workflow_exec_id_for(request_id)
        input_ = row_payload(self.engine.store, item.input, item.input_ref, "input")
        attributes = row_payload(self.engine.store, item.attributes, None, "attributes")
        with tracing.continued(item.traceparent):  # the requester's trace
            # No read first: the start's conditional create says whether the run was
            # there (a redelivered request: DUPLICATE).
            started = self.engine.starting.start(
                item.workflow_name, input_, version=item.version, request_id=request_id,
                source=item.source or "simple-api", write_request=False,
                priority=item.priority, attributes=attributes)
        return IntakeResult(Outcome.STARTED if started.created else Outcome.DUPLICATE,
                            workflow_exec_id=wx)


def refuse_future(when_epoch: float | None, now: float) -> None:
    """A request row starts its run at once: one dated later is refused rather than
    started early (a later start is a schedule's job: docs/schedules.md).

    Raises:
        InvalidInput: ``when_epoch`` more than :data:`WHEN_SLACK_SECONDS` after now.
    """
    if when_epoch is not None and when_epoch > now + WHEN_SLACK_SECONDS:
        raise InvalidInput(
            f"when_epoch {when_epoch:.0f} is in the future (now {now:.0f}): a request row "
            "starts its workflow when it is written, so it is refused rather than started "
            "early; to start later use a schedule (create_schedule with start_at/end_at, "
            "or write the row at that time)", field="when_epoch")
