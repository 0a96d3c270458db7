"""The two Simple API items as a raw client writes them (docs/simple-api.md), parsed
with the Powertools parser (pydantic) before anything is applied."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from whimbrel.contract.commands import Command
from whimbrel.contract.states import Transition

#: Every verb a row may carry: the contract's transitions, then the commands. Built from
#: the two enums (never spelled twice), so a bad verb gets one message listing them all.
RowVerb = cast(type[StrEnum], StrEnum(
    "RowVerb", [(v.value, v.value) for v in (*Transition, *Command)]))


#: Row verbs that act on a whole run, named by ``workflow_exec_id``.
RUN_VERBS = frozenset({Command.REDRIVE})


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
    manual: StrictBool = False
    source: str | None = None
    when_epoch: float | None = None


class ActivityEventItem(BaseModel):
    """One ``activity_event`` item."""

    model_config = ConfigDict(extra="ignore")

    activity_event_id: str = Field(min_length=1, max_length=512)
    #: Required, except for a row that acts on a whole run (``REDRIVE``: then
    #: ``workflow_exec_id`` names it).
    activity_exec_id: str | None = Field(default=None, min_length=1, max_length=1024)
    #: A contract verb, or a :class:`~whimbrel.contract.commands.Command` (see ``verb``).
    transition: RowVerb  # type: ignore[valid-type]
    activity_name: str | None = None
    workflow_exec_id: str | None = None
    workflow_name: str | None = None
    #: A JSON string or a native DynamoDB value.
    output: Any = None
    error: Any = None
    #: The type name of the error (e.g. an exception class), for retry policies.
    error_type: str | None = Field(default=None, max_length=256)
    source: str | None = None
    when_epoch: float | None = None

    @property
    def verb(self) -> Transition | Command:
        return row_verb(self.transition)

    @model_validator(mode="after")
    def _names_its_subject(self) -> ActivityEventItem:
        if self.verb in RUN_VERBS:
            if not self.workflow_exec_id:
                raise ValueError(f"a {self.verb.value} row needs workflow_exec_id (the run "
                                 "it acts on)")
        elif not self.activity_exec_id:
            raise ValueError("activity_exec_id is required (only a row acting on a whole "
                             f"run, {', '.join(v.value for v in RUN_VERBS)}, goes without)")
        return self
