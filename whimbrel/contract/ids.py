"""Deterministic identifiers (docs/architecture.md, "Exactly-once under at-least-once"):
a retry must find the same row.

* ``workflow_exec_id`` is derived from the request id, so a request delivered twice
  starts one execution.
* ``activity_exec_id`` is ``<workflow_exec_id>:<activity_name>:<attempt>``: it names the
  workflow partition it lives in, and a replayed retry computes the same id.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import TypeGuard

from whimbrel.contract.errors import InvalidInput

#: DynamoDB keeps sort keys under 1,024 bytes; no id Whimbrel issues comes close.
MAX_ACTIVITY_EXEC_ID_BYTES = 1023

#: Fan-in edges of the workflow's end (its sinks) are kept under this downstream name.
END_NODE = "__end__"

_NAMESPACE = uuid.UUID("6f1c1f0e-4f1e-4a0b-9b7e-77686d6272c1")


def new_request_id() -> str:
    return str(uuid.uuid4())


def _is_text(value: object) -> TypeGuard[str]:
    """A str DynamoDB can store: UTF-8 encodable (no lone surrogates)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def workflow_exec_id_for(request_id: str) -> str:
    """The one execution id a given request id may ever produce.

    Raises:
        InvalidInput: ``request_id`` is not a non-empty string of valid Unicode.
    """
    if not _is_text(request_id) or not request_id:
        raise InvalidInput(
            f"workflow_request_id must be a non-empty string of valid Unicode, "
            f"not {request_id!r}"[:300],
            field="workflow_request_id",
        )
    return str(uuid.uuid5(_NAMESPACE, f"request:{request_id}"))


@dataclass(frozen=True)
class ActivityExecKey:
    workflow_exec_id: str
    activity_name: str
    attempt: int

    @property
    def activity_exec_id(self) -> str:
        return f"{self.workflow_exec_id}:{self.activity_name}:{self.attempt}"

    def next_attempt(self) -> ActivityExecKey:
        return ActivityExecKey(self.workflow_exec_id, self.activity_name, self.attempt + 1)


def activity_exec_id(workflow_exec_id: str, activity_name: str, attempt: int) -> str:
    return ActivityExecKey(workflow_exec_id, activity_name, attempt).activity_exec_id


def parse_activity_exec_id(value: object) -> ActivityExecKey:
    """Split an activity execution id into its parts.

    Raises:
        InvalidInput: the value is not an id Whimbrel issued.
    """
    if not _is_text(value) or value.count(":") < 2:
        raise InvalidInput(
            f"activity_exec_id {value!r} is not of the form "
            "<workflow_exec_id>:<activity>:<attempt>",
            field="activity_exec_id",
        )
    if len(value.encode("utf-8")) > MAX_ACTIVITY_EXEC_ID_BYTES:
        raise InvalidInput(
            f"activity_exec_id {value[:60]!r}... is {len(value.encode('utf-8'))} bytes, more "
            f"than the {MAX_ACTIVITY_EXEC_ID_BYTES} an id Whimbrel issues can have",
            field="activity_exec_id")
    head, attempt_text = value.rsplit(":", 1)
    workflow_exec_id, _, name = head.rpartition(":")
    if (not workflow_exec_id or not name or not attempt_text.isascii()
            or not attempt_text.isdigit() or int(attempt_text) < 1):
        raise InvalidInput(
            f"activity_exec_id {value!r} is not of the form "
            "<workflow_exec_id>:<activity>:<attempt>",
            field="activity_exec_id",
        )
    return ActivityExecKey(workflow_exec_id, name, int(attempt_text))


def unit_random(seed: str) -> float:
    """A number in [0, 1) fixed by ``seed``: jitter that every replay computes alike."""
    digest = hashlib.sha256(seed.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def shard_of(value: str, shards: int) -> str:
    """Spread sparse-index keys over ``shards`` partitions, stably."""
    digest = hashlib.sha256(value.encode()).digest()
    return str(int.from_bytes(digest[:4], "big") % shards)
