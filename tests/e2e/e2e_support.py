"""Helpers of the end-to-end tests: workflows, a raw boto3 client, waits."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import boto3

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, WorkflowDefinition, WorkflowExec
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

PY = LauncherSpec.python("wb_test_activities:echo")

DIAMOND = WorkflowDefinition("diamond", (
    Act("A", launcher=PY), Act("B", ("A",), launcher=PY), Act("C", ("A",), launcher=PY),
    Act("D", ("B", "C"), launcher=PY)))

EXTERNAL_DIAMOND = WorkflowDefinition("ext_diamond", (
    Act("A"), Act("B", ("A",)), Act("C", ("A",)), Act("D", ("B", "C"))))




class RawClient:
    """A client with no Whimbrel code: plain boto3 PutItem on the two API tables."""

    def __init__(self, endpoint_url: str, table_prefix: str) -> None:
        self.ddb = boto3.client("dynamodb", endpoint_url=endpoint_url, region_name="us-east-1")
        self.prefix = table_prefix

    def request(self, workflow_name: str, input: Any = None, **extra: Any) -> str:
        request_id = str(uuid.uuid4())
        item: dict[str, Any] = {
            "workflow_request_id": {"S": request_id},
            "workflow_name": {"S": workflow_name},
            "when_epoch": {"N": str(time.time())},
        }
        if input is not None:
            item["input"] = {"S": json.dumps(input)}
        item.update(extra)
        self.ddb.put_item(TableName=f"{self.prefix}workflow_request", Item=item)
        return request_id

    def event(self, activity_exec_id: str, transition: str, *, output: Any = None,
              error: str | None = None, native_output: bool = False,
              error_type: str | None = None) -> str:
        event_id = str(uuid.uuid4())
        item: dict[str, Any] = {
            "activity_event_id": {"S": event_id},
            "activity_exec_id": {"S": activity_exec_id},
            "transition": {"S": transition},
            "when_epoch": {"N": str(time.time())},
        }
        if output is not None:
            item["output"] = (to_ddb(output) if native_output else {"S": json.dumps(output)})
        if error is not None:
            item["error"] = {"S": error}
        if error_type is not None:
            item["error_type"] = {"S": error_type}
        self.ddb.put_item(TableName=f"{self.prefix}activity_event", Item=item)
        return event_id


    def row(self, transition: str, **attrs: Any) -> str:
        """One raw ``activity_event`` row of any verb (SIGNAL, APPROVE, SUSPEND, …);
        plain values become S/N/M attributes, typed ones (``{"S": …}``) stay as given."""
        event_id = str(uuid.uuid4())
        item: dict[str, Any] = {"activity_event_id": {"S": event_id},
                                "transition": {"S": transition},
                                "when_epoch": {"N": str(time.time())}}
        for key, value in attrs.items():
            typed = isinstance(value, dict) and len(value) == 1 and \
                next(iter(value)) in ("S", "N", "M", "L", "BOOL", "NULL")
            item[key] = value if typed else to_ddb(value)
        self.ddb.put_item(TableName=f"{self.prefix}activity_event", Item=item)
        return event_id


def to_ddb(value: Any) -> dict[str, Any]:
    from decimal import Decimal

    from boto3.dynamodb.types import TypeSerializer

    def fix(v: Any) -> Any:
        if isinstance(v, float):
            return Decimal(str(v))
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    out: dict[str, Any] = TypeSerializer().serialize(fix(value))
    return out


def wait_workflow(rt: LocalRuntime, request_id: str, timeout: float = 15.0) -> WorkflowExec:
    wx = workflow_exec_id_for(request_id)

    def done() -> WorkflowExec | None:
        if rt.client.store.get_workflow(wx) is None:
            return None
        wf = rt.client.get_workflow(wx)
        return wf if wf.state.is_terminal else None

    return wait_until(done, timeout=timeout, message=f"workflow {wx} did not end")


def rejection_about(rt: LocalRuntime, needle: str) -> Any:
    """The rejection row whose record mentions ``needle`` (waited for)."""
    def find() -> Any:
        return next((r for r in rt.client.list_rejections() if needle in json.dumps(r.record)),
                    None)
    return wait_until(find, timeout=15, message=f"no rejection mentions {needle}")


def event_row(rt: LocalRuntime, event_id: str) -> dict[str, Any]:
    """The activity_event row, once Whimbrel marked what it did with it."""
    table = f"{rt.table_prefix}activity_event"
    def marked() -> dict[str, Any] | None:
        item = RawClient(rt.endpoint_url, rt.table_prefix).ddb.get_item(
            TableName=table, Key={"activity_event_id": {"S": event_id}},
            ConsistentRead=True).get("Item")
        return item if item and "outcome" in item else None
    return wait_until(marked, timeout=15, message=f"event {event_id} never marked")


def summary(wf: WorkflowExec) -> dict[str, Any]:
    """What must be equal between two runs of the same scenario."""
    return {
        "state": wf.state.value,
        "activities": sorted((a.activity_name, a.attempt, a.state.value,
                              json.dumps(a.output, sort_keys=True)) for a in wf.activities),
    }


def activity_state(rt: LocalRuntime, activity_exec_id: str) -> str | None:
    """The activity's state, or None while it does not exist yet."""
    item = rt.client.store.get_activity(activity_exec_id)
    return None if item is None else item.state
