"""The engine's metrics port: what it reports when a workflow or an activity attempt ends,
and when one item of a sweep pass failed.

The engine calls the port right after the write that won the move (so each end is
reported once, by the one actor that made it), from every path that runs the engine —
the Lambdas and an in-process client alike. Adapters live above the engine
(``whimbrel.observe.emf`` writes CloudWatch embedded-metric-format lines); the default
reports nothing. Metrics are best effort: an adapter that fails is logged and ignored,
never allowed to fail the move it reports.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Protocol

from whimbrel.contract.records import ActivityRecord, WorkflowRecord

__all__ = ["NO_METRICS", "EngineMetrics", "Incidents", "NoMetrics", "report_activity_end",
           "report_sweep_error", "report_workflow_end"]

log = logging.getLogger("whimbrel.engine")


class EngineMetrics(Protocol):
    """Receives the ends the engine made."""

    def workflow_ended(self, wf: WorkflowRecord) -> None:
        """``wf`` is the item as the terminal write left it (state, created, ended)."""
        ...

    def activity_ended(self, item: ActivityRecord) -> None:
        """``item`` is the attempt as its terminal write left it."""
        ...

    def sweep_failed(self, part: str, item: str, error_type: str) -> None:
        """One item of a sweep pass raised (``part``: ``"timer"`` or ``"reconcile"``;
        ``item``: its activity or workflow execution id); the pass went on."""
        ...


class NoMetrics:
    """Reports nothing (the default: tests and clients that did not opt in)."""

    def workflow_ended(self, wf: WorkflowRecord) -> None:
        return None

    def activity_ended(self, item: ActivityRecord) -> None:
        return None

    def sweep_failed(self, part: str, item: str, error_type: str) -> None:
        return None


NO_METRICS = NoMetrics()


def report_workflow_end(metrics: EngineMetrics, wf: WorkflowRecord) -> None:
    try:
        metrics.workflow_ended(wf)
    except Exception as exc:  # best effort: a metric must never undo a move's follow-ups
        log.warning("metrics: workflow end of %s not reported: %s", wf.workflow_exec_id, exc)


def report_activity_end(metrics: EngineMetrics, item: ActivityRecord) -> None:
    try:
        metrics.activity_ended(item)
    except Exception as exc:  # best effort, as above
        log.warning("metrics: end of %s not reported: %s", item.activity_exec_id, exc)


def report_sweep_error(metrics: EngineMetrics, part: str, item: str, exc: BaseException) -> None:
    # An adapter written before sweep_failed existed reports ends only.
    report = getattr(metrics, "sweep_failed", None)
    if report is None:
        return
    try:
        report(part, item, type(exc).__name__)
    except Exception as err:  # best effort, as above
        log.warning("metrics: sweep error of %s not reported: %s", item, err)


class Incidents:
    """Thread-safe counts of trouble the engine and its workers survived or gave up on,
    by kind (each also logged where it happens): ``finish_retried`` (an attempt's end
    write tried again after retryable store trouble), ``finish_landed`` (a retried end
    write found already written: its follow-ups were run again), ``finish_given_up``,
    ``followup_failed`` (a follow-up raised; its run's reconcile visit was moved
    forward), ``schedule_skipped_odd`` (a due schedule whose stored item this version
    cannot act on was skipped: ``ScheduleInfo.problem``). Read them with
    :meth:`snapshot`."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def __getitem__(self, kind: str) -> int:
        with self._lock:
            return self._counts[kind]

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
