"""Failure handlers (a feature): ``on_failure`` takes over an activity that failed for good.

Step Functions' Catch with Next, on the same tables. When an attempt fails for good
(FAILED or TIMED_OUT with no retry left):

* ``on_failure: continue`` — the activity counts as *resolved*: its dependents are
  released as if it had completed (they see no output, and the error);
* ``on_failure: <handler>`` — the handler (an activity of the same definition that runs
  only when called on) gets a new attempt whose input is the error, recording the
  failed attempt it runs for (``called_by``). When it completes, the failed activity is
  resolved and its dependents run with the handler's output in its place;
* neither — the workflow fails, as before.

Calling the handler is idempotent: a replay finds the attempt called for the same
failure (``called_by``), and two callers compute the same next attempt id, which only
one creates.
"""

from __future__ import annotations

import json
import logging

from whimbrel.contract.dataflow import CONTINUE, handlers
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.limits import MAX_INPUT_BYTES
from whimbrel.contract.outcomes import resolution
from whimbrel.contract.records import ActivityRecord, WorkflowRecord, latest_of
from whimbrel.engine.feature import Core, Feature

log = logging.getLogger("whimbrel.engine")


def error_input(item: ActivityRecord) -> str:
    """A handler's input: the failure it handles (JSON text, at most MAX_INPUT_BYTES)."""
    doc = {"activity": item.activity_name, "activity_exec_id": item.activity_exec_id,
           "state": item.state.value if item.state else None, "error": item.error,
           "error_type": item.error_type}
    text = json.dumps(doc, ensure_ascii=False)
    if len(text.encode()) > MAX_INPUT_BYTES:  # errors are clipped; this is a backstop
        doc["error"] = (item.error or "")[:1000]
        text = json.dumps(doc, ensure_ascii=False)
    return text


class FailureHandlers(Feature):
    """``on_failure``: continue past a failure, or call its handler."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def failed_for_good(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                        item: ActivityRecord, why: str) -> bool:
        spec = defn.activity(item.activity_name)
        if spec.on_failure == CONTINUE:
            log.info("workflow %s: %s; continuing (on_failure: continue)",
                     wf.workflow_exec_id, why)
            self.core.flow.after_completed(wf, defn, item.activity_name)
        elif spec.on_failure is not None:
            self.call_handler(wf, defn, item, spec.on_failure)
        else:
            return False
        return True

    def call_handler(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     failed: ActivityRecord, handler: str) -> None:
        """Create (once) the handler's attempt for ``failed`` and move it on."""
        core = self.core
        current = latest_of(core.store.list_activities(wf.workflow_exec_id)).get(handler)
        if current is not None and current.called_by == failed.activity_exec_id:
            attempt = current.attempt  # called already (a replay): only move it on
        else:
            attempt = current.attempt + 1 if current is not None else 1
            record = core.flow.new_attempt(wf, defn, handler, attempt, core.clock()).with_changes(
                input=error_input(failed), called_by=failed.activity_exec_id,
                retry_base=attempt - 1)
            core.store.create_activity(record)
        core.flow.advance(wf, defn, handler, attempt)

    def completed(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str) -> None:
        handled = handlers(defn).get(name)
        if handled is None:
            return
        # A handler completed: the failure it was called for is resolved, and the
        # dependents of the failed activity run with its output in that one's place.
        latest = latest_of(self.core.store.list_activities(wf.workflow_exec_id))
        res = resolution(defn, latest, handled)
        if res is not None and res.handled_by is not None:
            self.core.flow.after_completed(wf, defn, handled)
