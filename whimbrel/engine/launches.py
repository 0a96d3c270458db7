"""Launching (part of the core): handing a QUEUED (or, in-process, RUNNING) attempt to
its launcher, and failing the attempt when the hand-over fails."""

from __future__ import annotations

import logging
from concurrent.futures import Future

from whimbrel.contract.conditions import ExpressionFailed
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import LaunchHandedBack, WhimbrelError
from whimbrel.contract.launching import LAUNCH_FAILED
from whimbrel.contract.outcomes import HANDED_BACK
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, Transition
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.ports import LaunchRequest

log = logging.getLogger("whimbrel.engine")

A = ActivityState


class Launches:
    """The hand-over of a QUEUED attempt to its launcher (a failed one fails it). A part
    of the engine: ``engine.launches.op(…)``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def launch(self, wf: WorkflowRecord, defn: WorkflowDefinition,
               item: ActivityRecord) -> None:
        """Hand a QUEUED (or, in-process, RUNNING) attempt to its launcher; a launch that
        fails fails the attempt, with the error recorded."""
        spec = defn.activity(item.activity_name)
        launcher = self.core.launchers.get(spec.launcher.kind)
        request = self.launch_request(defn, item)
        try:
            if launcher is None:
                raise RuntimeError(
                    f"no {spec.launcher.kind!r} launcher is configured in this process")
            if item.state is A.RUNNING:
                # Moved straight to RUNNING for an in-process launcher: the run finds the
                # image remembered and the workflow item here, and reads nothing first.
                done: Future[WorkflowRecord] = Future()
                done.set_result(wf)
                self.core.known.prefetched_workflow(item.activity_exec_id, done)
            launcher.launch(request)
        except LaunchHandedBack as exc:  # this process is going: a worker runs it
            log.info("launch of %s handed back: %s", item.activity_exec_id, exc)
            self.fail_attempt(item, f"handed back: {exc}", HANDED_BACK)
            return
        except Exception as exc:  # any launch failure fails this attempt, recorded
            log.warning("launch of %s failed: %s", item.activity_exec_id, exc)
            # A child run's input_from failed: its documented error type, as in a worker.
            kind = exc.error_type if isinstance(exc, ExpressionFailed) else type(exc).__name__
            self.fail_attempt(item, f"{LAUNCH_FAILED}{type(exc).__name__}: {exc}", kind)
            return
        self.core.hooks.observe(Feature.launched, item)

    def launch_request(self, defn: WorkflowDefinition,
                       item: ActivityRecord) -> LaunchRequest:
        """What a launcher (or a worker that claimed ``item``) needs to start it."""
        spec = defn.activity(item.activity_name)
        return LaunchRequest(
            activity_exec_id=item.activity_exec_id, activity_name=item.activity_name,
            workflow_exec_id=item.workflow_exec_id, workflow_name=item.workflow_name,
            attempt=item.attempt, config=dict(spec.launcher.config),
            endpoint_url=self.core.store.endpoint_url, table_prefix=self.core.store.table_prefix)

    def fail_attempt(self, item: ActivityRecord, error: str, error_type: str | None) -> None:
        """FAILED (from QUEUED/PREPARING/RUNNING) with its follow-ups; quiet if it moved on."""
        try:
            self.core.flow.apply(item, Transition.FAILED, error=error, error_type=error_type)
        except WhimbrelError as exc:
            log.info("%s not failed: %s", item.activity_exec_id, exc)
