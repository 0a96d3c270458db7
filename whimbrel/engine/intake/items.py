"""The two Simple API items as a raw client writes them (docs/simple-api.md), parsed
with the Powertools parser (pydantic) before anything is applied."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from whimbrel.contract.commands import Command
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.states import Transition

#: Every verb a row may carry: the contract's transitions, then the commands. Built from
#: the two enums (never spelled twice), so a bad verb gets one message listing them all.
RowVerb = cast(type[StrEnum], StrEnum(
    "RowVerb", [(v.value, v.value) for v in (*Transition, *Command)]))


def row_verb(value: StrEnum) -> Transition | Command:
    """The parsed verb as its own enum."""
    text = str(value)
    return Command(text) if text in Command.__members__ else Transition(text)

#: Attributes only Whimbrel writes on these rows after they are processed; a MODIFY
#: record that changes nothing else is Whimbrel's own bookkeeping, not a re-used id.
BOOKKEEPING = frozenset({"expires_epoch", "processed_epoch", "outcome", "result_state",
                         "reason", "workflow_exec_id"})


class WorkflowRequestItem(BaseModel):
    """One ``workflow_request`` item."""

    model_config = ConfigDict(extra="ignore")

    workflow_request_id: str = Field(min_length=1, max_length=512)
    workflow_name: str = Field(min_length=1, max_length=128)
    version: int | None = Field(default=None, ge=1)
    #: A JSON string or a native DynamoDB map/list/scalar.
    input: Any = None
    #: Instead of ``input``: ``s3://bucket/key`` of an object holding the input's JSON
    #: (read when the row is processed; docs/simple-api.md, "Large payloads").
    input_ref: str | None = Field(default=None, min_length=1, max_length=2048)
    manual: StrictBool = False
    source: str | None = None
    when_epoch: float | None = None
    #: The requester's W3C trace context, continued by the run (engine/tracing.py).
    traceparent: str | None = Field(default=None, max_length=1024)
    #: The run's priority: 0 (first) to 9 (absent: 5); contract/priority.py.
    priority: int | None = Field(default=None, ge=0, le=9, strict=True)
    #: The run's attributes: a JSON string or a native map (contract/attributes.py).
    attributes: Any = None


class ActivityEventItem(BaseModel):
    """One ``activity_event`` item."""

    model_config = ConfigDict(extra="ignore")

    activity_event_id: str = Field(min_length=1, max_length=512)
    #: Every verb but SIGNAL, SUSPEND, RESUME and REDRIVE (those name
    #: ``workflow_exec_id``).
    activity_exec_id: str | None = Field(default=None, min_length=1, max_length=1024)
    #: A contract verb, or a :class:`~whimbrel.contract.commands.Command` (see ``verb``).
    transition: RowVerb  # type: ignore[valid-type]
    activity_name: str | None = None
    workflow_exec_id: str | None = None
    workflow_name: str | None = None
    #: A JSON string or a native DynamoDB value.
    output: Any = None
    #: Instead of ``output``: ``s3://bucket/key`` of an object holding its JSON.
    output_ref: str | None = Field(default=None, min_length=1, max_length=2048)
    error: Any = None
    #: The type name of the error (e.g. an exception class), for retry policies.
    error_type: str | None = Field(default=None, max_length=256)
    source: str | None = None
    when_epoch: float | None = None
    #: The reporter's W3C trace context: the move's spans join that trace.
    traceparent: str | None = Field(default=None, max_length=1024)
    #: SIGNAL: the signal's name, its payload (JSON text or a native value) and its id
    #: (default: the row's ``activity_event_id``).
    signal: str | None = Field(default=None, max_length=256)
    payload: Any = None
    signal_id: str | None = Field(default=None, min_length=1, max_length=512)
    #: HEARTBEAT: the attempt's progress (JSON text or a native value), kept on it for
    #: its next attempt (``ActivityRun.previous_details``).
    details: Any = None
    #: APPROVE / REJECT: who decides, and why.
    by: str | None = Field(default=None, max_length=256)
    comment: str | None = Field(default=None, max_length=4000)

    @property
    def verb(self) -> Transition | Command:
        return row_verb(self.transition)

    def check_ids(self, workflow_exec_id: str, activity_name: str) -> None:
        """The optional ``workflow_exec_id`` and ``activity_name`` agree with the
        ``activity_exec_id`` (whose parts are given).

        Raises:
            InvalidInput: naming the attribute that disagrees.
        """
        if self.workflow_exec_id is not None and self.workflow_exec_id != workflow_exec_id:
            raise InvalidInput(f"workflow_exec_id {self.workflow_exec_id!r} does not match "
                               f"activity_exec_id {self.activity_exec_id!r}",
                               field="workflow_exec_id")
        if self.activity_name is not None and self.activity_name != activity_name:
            raise InvalidInput(f"activity_name {self.activity_name!r} does not match "
                               f"activity_exec_id {self.activity_exec_id!r}",
                               field="activity_name")
