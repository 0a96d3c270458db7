"""How attempts count (pure): retries left, failures handled, what an activity's
dependents see in its place, and a map's progress and output.

An activity is **resolved** when its dependents may be decided: its latest attempt
COMPLETED or was SKIPPED (issue 22: its dependents follow their ``trigger``), or it
failed for good (no retry left) and its ``on_failure`` took over — ``continue``,
or a handler called for that very attempt that is resolved itself. A workflow completes
when every activity (handlers aside) is resolved and nothing is left running.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from whimbrel.contract import waits
from whimbrel.contract.dataflow import CONTINUE, handlers, is_map_node, split_item
from whimbrel.contract.definitions import ActivityDefinition, WorkflowDefinition
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ACTIVITY_FAILED, ACTIVITY_UNSUCCESSFUL, ActivityState

A = ActivityState
#: Ends an attempt's retry policy applies to.
RETRIED = ACTIVITY_FAILED
#: The ends of an attempt that are not COMPLETED.
UNSUCCESSFUL = ACTIVITY_UNSUCCESSFUL


def generation(item: ActivityRecord) -> int:
    """The redrive an attempt belongs to (0: the run's first go)."""
    return item.redrive_count or 0


#: The error type of an attempt a closing process had launched but never started
#: (engine/handover.py): it never ran, so a next attempt always follows, at once.
HANDED_BACK = "HandedBack"


def retries_left(item: ActivityRecord, spec: ActivityDefinition) -> bool:
    """True when the policy gives a FAILED or TIMED_OUT attempt another one: attempts of
    this generation under ``max_attempts`` and an error type not ``non_retryable`` (a
    map's own attempt never: its policy is its items'; a rejected approval never: it is a
    decision, not a fault)."""
    if item.state not in RETRIED:
        return False
    if is_map_node(spec, item.activity_name):
        return False  # a map never retries as a whole: its items did
    if waits.rejected(spec, item):
        return False
    if item.error_type == HANDED_BACK:
        return True
    used = item.attempt - (item.retry_base or 0)
    return used < spec.retry.max_attempts and spec.retry.retries(item.error_type)


def failed_for_good(item: ActivityRecord, spec: ActivityDefinition) -> bool:
    """FAILED or TIMED_OUT with no retry left."""
    return item.state in RETRIED and not retries_left(item, spec)


@dataclass(frozen=True)
class Resolution:
    """What a resolved activity's dependents see in its place."""

    #: JSON text of the output (the handler's, for a handled failure; None: no output).
    output: str | None
    #: The failure dependents see past (``on_failure: continue``).
    error: str | None = None
    error_type: str | None = None
    #: The handler whose output stands in, if any.
    handled_by: str | None = None
    #: True when dependents run past a failure (``continue``): no output, an error.
    passed: bool = False
    #: True when it ended SKIPPED (issue 22): no output; dependents decide by ``trigger``.
    skipped: bool = False


def resolution(defn: WorkflowDefinition, latest: Mapping[str, ActivityRecord],
               name: str) -> Resolution | None:
    """How ``name`` counts for its dependents now, or None while it is unresolved."""
    seen: set[str] = set()
    cur, handled_by = name, None
    while cur not in seen:  # handler chains are acyclic (validated); guard anyway
        seen.add(cur)
        act = latest.get(cur)
        if act is None or act.state is None:
            return None
        if act.state is A.COMPLETED:
            return Resolution(act.output, handled_by=handled_by)
        if act.state is A.SKIPPED and handled_by is None:
            return Resolution(None, skipped=True)
        spec = defn.activity(cur)
        if not failed_for_good(act, spec) or spec.on_failure is None:
            return None
        if spec.on_failure == CONTINUE:
            return Resolution(None, act.error, act.error_type, handled_by, passed=True)
        handler = latest.get(spec.on_failure)
        if handler is None or handler.called_by != act.activity_exec_id:
            return None  # not called for this failure (yet)
        cur = handled_by = spec.on_failure
    return None


def unresolved(defn: WorkflowDefinition, latest: Mapping[str, ActivityRecord]) -> list[str]:
    """The activities (handlers aside) that are not resolved."""
    skip = handlers(defn)
    return [n for n in defn.names if n not in skip and resolution(defn, latest, n) is None]


def open_activities(defn: WorkflowDefinition,
                    latest: Mapping[str, ActivityRecord]) -> list[str]:
    """What keeps a run from completing: unresolved activities, and any latest attempt
    (map items and handlers included) that has not ended."""
    live = [n for n, a in latest.items() if a.state is None or not a.state.is_terminal]
    return [*unresolved(defn, latest), *(n for n in live if n not in defn.names)]


def upstream_view(defn: WorkflowDefinition, latest: Mapping[str, ActivityRecord],
                  name: str) -> tuple[dict[str, Any], dict[str, str]]:
    """What ``name``'s run sees of its upstreams: outputs by name (a handler's in place of
    the failure it handled, None past a ``continue``) and the errors it runs past."""
    outputs: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for dep in defn.activity(name).depends_on:
        res = resolution(defn, latest, dep)
        if res is None:
            continue
        outputs[dep] = _decoded(res.output)
        if res.passed:
            errors[dep] = res.error or f"{dep} failed"
    return outputs, errors


def _decoded(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


# -- maps ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class MapProgress:
    """A map's items: how many completed, run (or wait to run), failed for good, of all."""

    total: int
    done: int
    running: int
    failed: int

    @property
    def pending(self) -> int:
        """Items not created yet (they start as others end)."""
        return max(0, self.total - self.done - self.running - self.failed)

    def __str__(self) -> str:
        text = f"{self.done}/{self.total} done"
        if self.running:
            text += f", {self.running} running"
        if self.failed:
            text += f", {self.failed} failed"
        return text

    def to_dict(self) -> dict[str, int]:
        return {"total": self.total, "done": self.done, "running": self.running,
                "failed": self.failed, "pending": self.pending}


def map_items(acts: Iterable[ActivityRecord], map_name: str) -> dict[int, ActivityRecord]:
    """The latest attempt of each item of ``map_name``, by index."""
    out: dict[int, ActivityRecord] = {}
    for act in acts:
        base, index = split_item(act.activity_name)
        if index is None or base != map_name:
            continue
        cur = out.get(index)
        if cur is None or act.attempt > cur.attempt:
            out[index] = act
    return out


def item_failed(item: ActivityRecord, spec: ActivityDefinition) -> bool:
    """An item that ended for good without completing (CANCELLED included)."""
    return item.state is A.CANCELLED or failed_for_good(item, spec)


def map_progress(items: Mapping[int, ActivityRecord], total: int,
                 spec: ActivityDefinition) -> MapProgress:
    done = sum(1 for a in items.values() if a.state is A.COMPLETED)
    failed = sum(1 for a in items.values() if item_failed(a, spec))
    return MapProgress(total, done, len(items) - done - failed, failed)


def map_output(items: Mapping[int, ActivityRecord], total: int) -> list[Any]:
    """The map's output: each item's output in element order (None for a failed one)."""
    return [_decoded(items[i].output) if i in items and items[i].state is A.COMPLETED
            else None for i in range(total)]


def carry(record: ActivityRecord, wf: WorkflowRecord,
          previous: ActivityRecord | None = None) -> ActivityRecord:
    """A new attempt as its run and its predecessor shape it: the run's redrive count,
    and, for a retry, the predecessor's own input, handler call and retry budget."""
    changes: dict[str, Any] = {}
    if wf.redrives:
        changes["redrive_count"] = wf.redrives
    if previous is not None:
        changes.update(input=previous.input, called_by=previous.called_by,
                       retry_base=previous.retry_base, step=previous.step)
    return record.with_changes(**changes) if changes else record
