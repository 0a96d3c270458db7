"""What the console's pages show, shaped from the facade's views: pure, no I/O.

Templates get these rows and the filters registered in :func:`filters`; they never
compute anything themselves.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from whimbrel import ActivityExec, WorkflowExec
from whimbrel.contract import waits
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.durations import duration
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.states import ACTIVITY_UNSUCCESSFUL, ActivityState, WorkflowState
from whimbrel.engine import HEARTBEAT_WRITE_SHARE
from whimbrel.ui import actions
from whimbrel.ui.dag import NodeInfo

MAX_JSON_CHARS = 20_000


def when(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def span(seconds: float | None) -> str:
    """``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``, ``3 d 04 h`` (the spaced
    style of :func:`whimbrel.contract.durations.duration`, which the CLI shares)."""
    return duration(seconds, "spaced")


def ago(epoch: float | None, now: float) -> str:
    if epoch is None:
        return ""
    gap = now - epoch
    return "just now" if gap < 1 else f"{span(gap)} ago"


def pretty(value: Any) -> str:
    """Indented JSON, cut at MAX_JSON_CHARS characters."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) > MAX_JSON_CHARS:
        text = text[:MAX_JSON_CHARS] + f"\n… ({len(text) - MAX_JSON_CHARS} more characters)"
    return text


def first_line(text: str | None, width: int = 140) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def filters(now: Callable[[], float]) -> dict[str, Callable[..., str]]:
    """Jinja filters: ``{{ t | when }}``, ``{{ s | span }}``, ``{{ t | ago }}``, …"""
    return {"when": when, "span": span, "ago": lambda t: ago(t, now()), "pretty": pretty,
            "first_line": first_line, "short": lambda s: s[:8]}


# -- a run -------------------------------------------------------------------------------

@dataclass(frozen=True)
class AttemptRow:
    act: ActivityExec
    latest: bool
    max_attempts: int | None
    duration: float | None
    heartbeat_late: bool
    #: "in 4 min 51 s" / "due" for an attempt waiting for its retry back-off.
    retry_in: str
    waiting_for: str | None
    progress: str | None
    actions: list[actions.Action]
    #: The attempt within its generation: a redrive starts a fresh retry budget, so
    #: its first attempt shows as 1 of the maximum (``attempt`` counts them all).
    shown_attempt: int = 0

    @property
    def anchor(self) -> str:
        return f"act-{self.act.activity_name}" if self.latest else ""


@dataclass(frozen=True)
class TimelineRow:
    at: float
    offset: float
    subject: str
    state: str
    by: str | None
    error: str | None


def attempts(wb: object, wf: WorkflowExec, defn: WorkflowDefinition | None,
             now: float) -> list[AttemptRow]:
    """Every attempt: activities in the definition's order, newest attempt first."""
    order = {n: i for i, n in enumerate(defn.topological_order())} if defn else {}
    latest = wf.latest_activities
    bases = _generation_bases(wf)
    rows = []
    for act in sorted(wf.activities, key=lambda a: (order.get(a.activity_name, len(order)),
                                                    a.activity_name, -a.attempt)):
        spec = defn.activity(act.activity_name) if defn and act.activity_name in order else None
        end = act.ended_epoch if act.ended_epoch is not None else now
        late = bool(act.state is ActivityState.RUNNING and act.heartbeat_timeout_seconds
                    and act.heartbeat_epoch is not None
                    and now - act.heartbeat_epoch
                    > act.heartbeat_timeout_seconds * HEARTBEAT_WRITE_SHARE)  # one is overdue
        rows.append(AttemptRow(
            act=act, latest=latest[act.activity_name] is act,
            max_attempts=spec.retry.max_attempts if spec else None,
            duration=None if act.started_epoch is None else max(0.0, end - act.started_epoch),
            heartbeat_late=late, retry_in=_retry_in(act, now),
            waiting_for=actions.waiting_for(act),
            progress=_progress(act, wf),
            actions=actions.available(wb, wf, act, "activity"),
            shown_attempt=act.attempt - bases.get(act.activity_exec_id, 0)))
    return rows


def redrive_times(wf: WorkflowExec) -> list[float]:
    """When the run was redriven: each time its history goes from an end (FAILED,
    CANCELLED, TIMED_OUT) back to a live state."""
    out, ended = [], False
    for h in wf.history:
        try:
            state = WorkflowState(h.state)
        except ValueError:
            continue
        if ended and not state.is_terminal:
            out.append(h.at)
        ended = state.is_terminal
    return out


def _generation_bases(wf: WorkflowExec) -> dict[str, int]:
    """Per attempt, how many attempts of its activity came before its generation (the
    redrive it was created after): attempt minus that is its number in its retry
    budget."""
    times = redrive_times(wf)
    if not times:
        return {}
    out = {}
    for act in wf.activities:
        start = max((t for t in times if t <= act.created_epoch), default=None)
        if start is None:
            continue
        out[act.activity_exec_id] = max(
            (o.attempt for o in wf.activities
             if o.activity_name == act.activity_name and o.created_epoch < start),
            default=0)
    return out


#: Every state an activity (a DAG node) can be in, for the graph's legend.
LEGEND = tuple(s.value for s in ActivityState)


def queued_why(wf: WorkflowExec, defn: WorkflowDefinition | None) -> str:
    """Why a QUEUED run waits ("" for any other state)."""
    if wf.state is not WorkflowState.QUEUED:
        return ""
    limit = getattr(defn, "max_running", None)
    if limit:
        return (f"at most {limit} run{'s' if limit != 1 else ''} of {wf.workflow_name} "
                f"may be RUNNING at once (max_running); it starts when one ends")
    return "it starts when a running slot of its definition frees (max_running)"


def _retry_in(act: ActivityExec, now: float) -> str:
    if act.state is not ActivityState.REQUESTED or act.not_before_epoch is None:
        return ""
    wait = act.not_before_epoch - now
    return f"in {span(wait)}" if wait > 0 else "due"


#: Item states that mean a worker has it (launched or running); READY and REQUESTED
#: items wait for one and are not "running".
_CLAIMED = (ActivityState.QUEUED, ActivityState.PREPARING, ActivityState.RUNNING,
            ActivityState.CANCELLED_RUNNING)


def _progress(act: ActivityExec, wf: WorkflowExec) -> str | None:
    """A map's progress: ``"120/500 done, 8 running, 40 waiting, 2 failed"``.

    "running" counts the items a worker has claimed; created items that wait for one
    (READY, REQUESTED) and items not created yet are "waiting".
    """
    progress = act.progress
    if progress is None:
        return None
    items = wf.map_items(act.activity_name)
    running = sum(1 for i in items.values() if i.state in _CLAIMED)
    waiting = max(0, progress.total - progress.done - progress.failed - running)
    text = f"{progress.done}/{progress.total} done"
    for n, word in ((running, "running"), (waiting, "waiting"), (progress.failed, "failed")):
        if n:
            text += f", {n} {word}"
    return text


#: Failed items a run page lists per map; the rest are counted.
MAX_FAILED_ITEMS = 50


@dataclass(frozen=True)
class MapRow:
    """A map of a run: its progress and the items that ended without completing."""

    name: str
    progress: str
    failed: tuple[ActivityExec, ...]
    more_failed: int


def map_rows(wf: WorkflowExec, defn: WorkflowDefinition | None) -> list[MapRow]:
    """Every expanded map of the run, with its failed items (latest attempts that ended
    FAILED, TIMED_OUT or CANCELLED) and their errors."""
    out = []
    for name, act in wf.latest_activities.items():
        line = _progress(act, wf)
        if line is None:
            continue
        ended = [i for _, i in sorted(wf.map_items(name).items())
                 if i.state in ACTIVITY_UNSUCCESSFUL]
        out.append(MapRow(name, line, tuple(ended[:MAX_FAILED_ITEMS]),
                          max(0, len(ended) - MAX_FAILED_ITEMS)))
    return out


def node_info(wf: WorkflowExec | None, defn: WorkflowDefinition,
              now: float) -> dict[str, NodeInfo]:
    """What each DAG node says: state, attempt, duration (or launcher, for a definition)."""
    if wf is None:
        return {a.name: NodeInfo(None, a.launcher.kind) for a in defn.activities}
    out: dict[str, NodeInfo] = {}
    bases = _generation_bases(wf)
    for name, act in wf.latest_activities.items():
        bits = [act.state.value.replace("_", " ").lower()]
        tried = act.attempt - bases.get(act.activity_exec_id, 0)  # since the last redrive
        if tried > 1:
            bits.append(f"try {tried}")
        wait, progress = actions.waiting_for(act), _progress(act, wf)
        if wait:
            bits.append(wait)
        elif progress:
            bits.append(progress)
        elif act.started_epoch is not None:
            end = act.ended_epoch if act.ended_epoch is not None else now
            bits.append(span(max(0.0, end - act.started_epoch)))
        out[name] = NodeInfo(act.state.value, " · ".join(bits), f"#act-{name}")
    return out


def timeline(wf: WorkflowExec) -> list[TimelineRow]:
    """Every recorded state change of the run and its attempts, oldest first."""
    rows = [TimelineRow(h.at, h.at - wf.created_epoch, "run", h.state, h.by, None)
            for h in wf.history]
    for act in wf.activities:
        for i, h in enumerate(act.history):
            last = i == len(act.history) - 1
            by = (decided_by(act) or h.by) if last and act.state.is_terminal else h.by
            rows.append(TimelineRow(h.at, h.at - wf.created_epoch,
                                    f"{act.activity_name} #{act.attempt}", h.state, by,
                                    act.error if last and act.state.is_terminal else None))
    rows.sort(key=lambda r: r.at)
    return rows


def decided_by(act: ActivityExec) -> str | None:
    """Who approved or rejected an approval (the name they gave), None for any other
    attempt: the row's writer is the process that recorded the decision (``cli``,
    ``console``, an API request's id), not the person."""
    out = act.output
    if act.state is ActivityState.COMPLETED and isinstance(out, dict) \
            and out.get("approved") is True and isinstance(out.get("by"), str):
        return str(out["by"])
    if act.state is ActivityState.FAILED and act.error_type == waits.REJECTED \
            and act.error and act.error.startswith(_REJECTED_BY):
        # "rejected by <name>: <comment>" (contract/waits.py, rejection_error)
        return act.error[len(_REJECTED_BY):].split(": ", 1)[0]
    return None


_REJECTED_BY = "rejected by "


def related(wf: WorkflowExec) -> dict[str, Any]:
    """Parent and child runs, for the hook child workflows will fill (attributes the
    views do not have yet read as none)."""
    return {"parent": getattr(wf, "parent_workflow_exec_id", None),
            "children": tuple(getattr(wf, "child_workflow_exec_ids", ()) or ())}


# -- the runs list -----------------------------------------------------------------------

_FIRST = (WorkflowState.RUNNING, WorkflowState.QUEUED, WorkflowState.SUSPENDED,
          WorkflowState.FAILED_WAITING,
          WorkflowState.CANCEL_REQUESTED, WorkflowState.REQUESTED,
          WorkflowState.FAILED, WorkflowState.TIMED_OUT, WorkflowState.COMPLETED,
          WorkflowState.CANCELLED)
#: The runs list's state filters and counts: every state of the contract (live ones
#: first), so that "all states" is the sum of what is shown and no state is missing.
STATE_ORDER = (*_FIRST, *(s for s in WorkflowState if s not in _FIRST))


def page_digest(runs: tuple[WorkflowExec, ...]) -> str:
    """A short fingerprint of what the runs list shows of ``runs`` (which runs, their
    states, ends and errors): equal fingerprints mean an unchanged page."""
    text = "\n".join(f"{w.workflow_exec_id} {w.state.value} {w.ended_epoch} {w.error}"
                     for w in runs)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def count_label(count: int, cap: int) -> str:
    return f"{cap}+" if count >= cap else str(count)


def attribute_filter(text: str) -> dict[str, str | int] | None:
    """The runs page's ``KEY=VALUE`` attribute filter (a value of digits is a number).

    Raises:
        InvalidInput: not KEY=VALUE.
    """
    if not text.strip():
        return None
    key, eq, value = text.strip().partition("=")
    if not eq or not key:
        raise InvalidInput(f"attribute filter {text[:80]!r} is not KEY=VALUE",
                           field="attributes")
    return {key.strip(): int(value) if value.strip().lstrip("-").isdigit()
            else value.strip()}
