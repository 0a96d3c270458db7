"""Engine metrics as CloudWatch embedded metric format (EMF) lines.

:class:`EmfMetrics` implements the engine's metrics port
(:class:`whimbrel.engine.metrics.EngineMetrics`): one JSON line per workflow end and
per attempt end, written to stdout (Lambda ships stdout to CloudWatch Logs, which turns
EMF lines into metrics) or to any text stream (a file the CloudWatch agent tails).

Every metric carries the deployment's table prefix as a dimension (``TablePrefix``), so
two deployments in one account keep apart, in two dimension sets: one for alarms and
dashboards over all workflows, one per workflow (or activity):

=====================  =========  ==================================================
metric                 unit       dimension sets
=====================  =========  ==================================================
``WorkflowsEnded``     Count      (TablePrefix, State), (TablePrefix, WorkflowName, State)
``WorkflowDuration``   Seconds    the same
``ActivitiesEnded``    Count      (TablePrefix, State), (TablePrefix, WorkflowName,
                                  ActivityName, State)
``ActivityDuration``   Seconds    the same; only attempts that started running
``SweepErrors``        Count      (TablePrefix), (TablePrefix, Part): one item of a
                                  sweep pass raised (``Part``: timer or reconcile)
=====================  =========  ==================================================

Powertools' ``Metrics`` keeps one metric set per process, flushed by the handler
decorator, with a ``service`` dimension from the environment; the engine reports from
any process and thread, one point at a time, so it writes the (published, small) EMF
document itself.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from whimbrel.contract.records import ActivityRecord, WorkflowRecord

__all__ = [
    "ACTIVITIES_ENDED",
    "ACTIVITY_DURATION",
    "NAMESPACE",
    "SWEEP_ERRORS",
    "WORKFLOWS_ENDED",
    "WORKFLOW_DURATION",
    "EmfMetrics",
    "emf_document",
]

NAMESPACE = "Whimbrel"
WORKFLOWS_ENDED = "WorkflowsEnded"
WORKFLOW_DURATION = "WorkflowDuration"
ACTIVITIES_ENDED = "ActivitiesEnded"
ACTIVITY_DURATION = "ActivityDuration"
SWEEP_ERRORS = "SweepErrors"
DIM_PART = "Part"
DIM_PREFIX = "TablePrefix"
DIM_STATE = "State"
DIM_WORKFLOW = "WorkflowName"
DIM_ACTIVITY = "ActivityName"


def emf_document(namespace: str, dimensions: Mapping[str, str],
                 dimension_sets: Sequence[Sequence[str]],
                 metrics: Sequence[tuple[str, str, float]], *,
                 timestamp_ms: int) -> dict[str, Any]:
    """One EMF document: ``metrics`` as ``(name, unit, value)``, reported under each of
    ``dimension_sets`` (names of ``dimensions``)."""
    return {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [list(s) for s in dimension_sets],
                "Metrics": [{"Name": name, "Unit": unit} for name, unit, _ in metrics],
            }],
        },
        **dimensions,
        **{name: value for name, _, value in metrics},
    }


class EmfMetrics:
    """Writes the engine's ends as EMF lines (see the module docstring).

    Args:
        table_prefix: the ``TablePrefix`` dimension (the deployment's table prefix).
        stream: where lines go; stdout (at each write) when None.
        namespace: the CloudWatch namespace.
    """

    def __init__(self, table_prefix: str, *, stream: TextIO | None = None,
                 namespace: str = NAMESPACE) -> None:
        self.table_prefix = table_prefix
        self.stream = stream
        self.namespace = namespace
        self._lock = threading.Lock()

    def workflow_ended(self, wf: WorkflowRecord) -> None:
        ended = wf.ended_epoch if wf.ended_epoch is not None else wf.updated_epoch
        dims = {DIM_PREFIX: self.table_prefix, DIM_STATE: wf.state.value,
                DIM_WORKFLOW: wf.workflow_name}
        self._write(dims, [(DIM_PREFIX, DIM_STATE), (DIM_PREFIX, DIM_WORKFLOW, DIM_STATE)],
                    [(WORKFLOWS_ENDED, "Count", 1.0),
                     (WORKFLOW_DURATION, "Seconds", max(0.0, ended - wf.created_epoch))],
                    ended)

    def activity_ended(self, item: ActivityRecord) -> None:
        ended = item.ended_epoch if item.ended_epoch is not None else item.updated_epoch
        state = item.state.value if item.state else "UNKNOWN"
        dims = {DIM_PREFIX: self.table_prefix, DIM_STATE: state,
                DIM_WORKFLOW: item.workflow_name, DIM_ACTIVITY: item.activity_name}
        metrics: list[tuple[str, str, float]] = [(ACTIVITIES_ENDED, "Count", 1.0)]
        if item.started_epoch is not None:
            metrics.append((ACTIVITY_DURATION, "Seconds",
                            max(0.0, ended - item.started_epoch)))
        self._write(dims, [(DIM_PREFIX, DIM_STATE),
                           (DIM_PREFIX, DIM_WORKFLOW, DIM_ACTIVITY, DIM_STATE)],
                    metrics, ended)

    def sweep_failed(self, part: str, item: str, error_type: str) -> None:
        dims = {DIM_PREFIX: self.table_prefix, DIM_PART: part}
        self._write(dims, [(DIM_PREFIX,), (DIM_PREFIX, DIM_PART)],
                    [(SWEEP_ERRORS, "Count", 1.0)], time.time())

    def _write(self, dims: Mapping[str, str], sets: Sequence[Sequence[str]],
               metrics: Sequence[tuple[str, str, float]], at: float) -> None:
        # The end's own time, unless the clock is far off (CloudWatch drops points more
        # than two weeks old or two hours ahead): then the time of writing.
        now = time.time()
        when = at if now - 14 * 86_400 < at < now + 2 * 3600 else now
        doc = emf_document(self.namespace, dims, sets, metrics,
                           timestamp_ms=int(when * 1000))
        line = json.dumps(doc, separators=(",", ":")) + "\n"
        with self._lock:
            out = self.stream if self.stream is not None else sys.stdout
            out.write(line)
            out.flush()
