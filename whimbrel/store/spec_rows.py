"""The Simple API's tables: the rows a raw client writes (a start, an activity's event),
marked with their outcome once processed, and the rejections of rows that can never
succeed. Re-exported by :mod:`whimbrel.store.specs`."""

from __future__ import annotations

from whimbrel.store.spec_types import Key, TableSpec, attributes

#: Written by Whimbrel on a Simple API row after processing it.
_OUTCOME = "outcome processed_epoch:N result_state reason"


WORKFLOW_REQUEST = TableSpec(
    "workflow_request",
    Key("workflow_request_id"),
    attributes=attributes("workflow_request_id workflow_name version:I input:J manual:BOOL "
                          "source when_epoch:N workflow_exec_id expires_epoch:N traceparent "
                          "priority:I input_ref attributes:J " + _OUTCOME),
    # Old images too: a row written again under the same id is rejected with what it
    # held before (the content that started the run).
    stream="NEW_AND_OLD_IMAGES",
    purpose="Simple Lambda API: one item starts a workflow (manual=true items are traces).",
)

ACTIVITY_EVENT = TableSpec(
    "activity_event",
    Key("activity_event_id"),
    attributes=attributes("activity_event_id activity_exec_id activity_name workflow_exec_id "
                          "workflow_name transition output:J error:J source when_epoch:N "
                          "error_type expires_epoch:N traceparent output_ref " + _OUTCOME),
    stream="NEW_AND_OLD_IMAGES",
    purpose="Simple Lambda API: one item reports one activity transition.",
)

REJECTION = TableSpec(
    "rejection",
    Key("rejection_day"),
    Key("rejection_id"),
    attributes=attributes("rejection_day rejection_id source reason error_type record "
                          "when_epoch:N expires_epoch:N"),
    purpose="Records that can never succeed, with the reason; listed by `whimbrel rejections`.",
)
