"""Plain data for ``--json`` output and for the renderers: pure, no I/O.

The JSON shapes are part of the CLI's interface (docs/cli.md); tests pin them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from whimbrel import ActivityExec, WorkflowExec
from whimbrel.cli.datashapes import activity_extras, run_extras
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.durations import duration


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def human_duration(seconds: float | None) -> str:
    """``850ms``, ``12.3s``, ``4m05s``, ``2h03m``; empty for None (the compact style of
    :func:`whimbrel.contract.durations.duration`, which the console shares)."""
    return duration(seconds, "compact")


def workflow_duration(wf: WorkflowExec, now: float) -> float:
    end = wf.ended_epoch if wf.ended_epoch is not None else now
    return max(0.0, end - wf.created_epoch)


def activity_duration(act: ActivityExec, now: float) -> float | None:
    """Run time so far (live for a running attempt)."""
    if act.started_epoch is None:
        return None
    end = act.ended_epoch if act.ended_epoch is not None else now
    return max(0.0, end - act.started_epoch)


def first_line(text: str | None, width: int = 120) -> str:
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def max_attempts(defn: WorkflowDefinition | None, name: str) -> int | None:
    if defn is None:
        return None
    try:
        return defn.activity(name).retry.max_attempts
    except KeyError:
        return None


def activity_dict(act: ActivityExec, *, latest: bool, now: float,
                  defn: WorkflowDefinition | None = None) -> dict[str, Any]:
    return {
        "activity_exec_id": act.activity_exec_id,
        "activity_name": act.activity_name,
        "attempt": act.attempt,
        "max_attempts": max_attempts(defn, act.activity_name),
        "latest": latest,
        "state": act.state.value,
        "created_epoch": act.created_epoch,
        "started_epoch": act.started_epoch,
        "ended_epoch": act.ended_epoch,
        "heartbeat_epoch": act.heartbeat_epoch,
        "heartbeat_details": act.heartbeat_details,
        "duration_seconds": activity_duration(act, now),
        "not_before_epoch": act.not_before_epoch,
        "output": act.output,
        "error": act.error,
        "late_output": act.late_output,
        "late_error": act.late_error,
        **activity_extras(act),
        "waiting_for": act.waiting_for,
    }


def workflow_dict(wf: WorkflowExec, *, now: float, defn: WorkflowDefinition | None = None,
                  with_activities: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "workflow_exec_id": wf.workflow_exec_id,
        "workflow_name": wf.workflow_name,
        "version": wf.version,
        "state": wf.state.value,
        "workflow_request_id": wf.workflow_request_id,
        "created_epoch": wf.created_epoch,
        "updated_epoch": wf.updated_epoch,
        "ended_epoch": wf.ended_epoch,
        "duration_seconds": workflow_duration(wf, now),
        "error": wf.error,
        "attributes": dict(wf.attributes),
    }
    if wf.code:
        out.update(properties=wf.properties, output=wf.output, continued_as=wf.continued_as)
    if with_activities:
        out.update(run_extras(wf))  # (child runs are known from the activities)
        latest = {a.activity_exec_id for a in wf.latest_activities.values()}
        out["input"] = wf.input
        out["activities"] = [
            activity_dict(a, latest=a.activity_exec_id in latest, now=now, defn=defn)
            for a in ordered_attempts(wf, defn)
        ]
    return out


def ordered_attempts(wf: WorkflowExec, defn: WorkflowDefinition | None) -> list[ActivityExec]:
    """Every attempt, in the definition's topological order, the attempts of one
    activity together.

    Without the definition (it could not be read) activities come in the order they
    first started, which is the DAG's order as it ran (every attempt 1 is created at
    the same instant, so creation times cannot tell); those that never started come
    last, by name. Never the alphabetical order of the ids alone.
    """
    order = {n: i for i, n in enumerate(defn.topological_order())} if defn else {}
    began: dict[str, float] = {}
    for a in wf.activities:
        at = a.started_epoch if a.started_epoch is not None else math.inf
        began[a.activity_name] = min(at, began.get(a.activity_name, math.inf))
    return sorted(wf.activities,
                  key=lambda a: (order.get(a.activity_name, len(order)),
                                 began[a.activity_name], a.activity_name, a.attempt))


def ordered_latest(wf: WorkflowExec, defn: WorkflowDefinition | None) -> list[ActivityExec]:
    latest = wf.latest_activities
    return [a for a in ordered_attempts(wf, defn) if latest[a.activity_name] is a]


@dataclass(frozen=True)
class TimelineEntry:
    """One state change of the workflow or of one activity attempt."""

    at: float
    state: str
    by: str | None
    activity_name: str | None = None
    attempt: int | None = None
    activity_exec_id: str | None = None
    error: str | None = None

    @property
    def subject(self) -> str:
        if self.activity_name is None:
            return "workflow"
        return f"{self.activity_name}#{self.attempt}"

    def to_dict(self, start: float) -> dict[str, Any]:
        return {
            "at": self.at,
            "at_iso": iso(self.at),
            "offset_seconds": round(self.at - start, 6),
            "subject": self.subject,
            "activity_name": self.activity_name,
            "attempt": self.attempt,
            "activity_exec_id": self.activity_exec_id,
            "state": self.state,
            "by": self.by,
            "error": self.error,
        }


def timeline(wf: WorkflowExec) -> list[TimelineEntry]:
    """Every recorded state change of the run, oldest first.

    The error of a failed attempt is attached to its terminal entry.
    """
    out = [TimelineEntry(h.at, h.state, h.by) for h in wf.history]
    if wf.error and out and wf.state.is_terminal:
        last = out[-1]
        out[-1] = TimelineEntry(last.at, last.state, last.by, error=wf.error)
    for act in wf.activities:
        for i, h in enumerate(act.history):
            is_last = i == len(act.history) - 1
            out.append(TimelineEntry(
                h.at, h.state, h.by, act.activity_name, act.attempt, act.activity_exec_id,
                act.error if is_last and act.state.is_terminal else None))
    # Python's sort is stable: equal times keep workflow-before-activity order.
    out.sort(key=lambda e: e.at)
    return out


def definition_summary(defn: WorkflowDefinition, version: int) -> dict[str, Any]:
    return {
        "workflow_name": defn.name,
        "version": version,
        "description": defn.description,
        "activities": len(defn.activities),
        "roots": list(defn.roots),
        "sinks": list(defn.sinks),
    }
