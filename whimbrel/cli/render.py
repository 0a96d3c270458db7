"""Rich renderings for people: state colours, the run as a table or a tree, timelines."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from whimbrel import ActivityExec, WorkflowExec
from whimbrel.cli.datashapes import header_lines, note
from whimbrel.cli.shapes import (
    TimelineEntry,
    activity_duration,
    first_line,
    human_duration,
    iso,
    max_attempts,
    ordered_attempts,
    ordered_latest,
    workflow_duration,
)
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.states import ActivityState, WorkflowState

A = ActivityState
W = WorkflowState

#: Terminal style and graph fill colour of every state (one table for both pictures).
STATE_COLOURS: Mapping[str, tuple[str, str]] = {
    A.REQUESTED.value: ("grey62", "#eeeeee"),
    A.READY.value: ("cyan", "#e0f7fa"),
    A.QUEUED.value: ("blue", "#bbdefb"),
    A.PREPARING.value: ("blue", "#bbdefb"),
    A.RUNNING.value: ("bold yellow", "#fff59d"),
    A.CANCELLED_RUNNING.value: ("magenta", "#f8bbd0"),
    A.CANCELLED.value: ("magenta", "#e1bee7"),
    A.TIMED_OUT.value: ("bold red", "#ffab91"),
    A.LOST.value: ("bold red", "#bcaaa4"),
    A.FAILED.value: ("bold red", "#ef9a9a"),
    A.COMPLETED.value: ("green", "#c8e6c9"),
    # Not run, and not a failure: its `when` was false, or its run ended early.
    A.SKIPPED.value: ("dim italic", "#f5f5f5"),
    W.FAILED_WAITING.value: ("red", "#ffcdd2"),
    W.CANCEL_REQUESTED.value: ("magenta", "#f8bbd0"),
    W.SUSPENDED.value: ("bold blue", "#cfd8dc"),
}


def state_style(state: str) -> str:
    return STATE_COLOURS.get(state, ("white", "#ffffff"))[0]


def state_text(state: str) -> Text:
    return Text(state, style=state_style(state))


def _attempt(act: ActivityExec, defn: WorkflowDefinition | None) -> str:
    top = max_attempts(defn, act.activity_name)
    return f"{act.attempt}/{top}" if top else str(act.attempt)


def _heartbeat(act: ActivityExec, now: float) -> str:
    """How long ago it heartbeat (while it runs), and the details it keeps (its progress)."""
    age = ""
    if act.heartbeat_epoch is not None and act.state.is_active:
        age = f"{human_duration(max(0.0, now - act.heartbeat_epoch))} ago"
    if act.heartbeat_details is None:
        return age
    shown = first_line(json.dumps(act.heartbeat_details, default=str), 40)
    return f"{age} {shown}" if age else shown


def _waiting(act: ActivityExec, now: float) -> str:
    if act.waiting_for:
        return f"waits for {act.waiting_for}"
    if act.pool_wait and act.state is A.READY:
        return f"waits for pool {act.pool_wait}"
    if act.state is A.REQUESTED and act.not_before_epoch and act.not_before_epoch > now:
        return f"retry in {human_duration(act.not_before_epoch - now)}"
    return note(act)  # a map's progress, a child run


def header(wf: WorkflowExec, now: float) -> Text:
    text = Text()
    text.append(f"{wf.workflow_name} v{wf.version}", style="bold")
    text.append("  ")
    text.append_text(state_text(wf.state.value))
    text.append(f"  {human_duration(workflow_duration(wf, now))}", style="dim")
    text.append(f"\n{wf.workflow_exec_id}  started {iso(wf.created_epoch)}", style="dim")
    if wf.error:
        text.append(f"\nerror: {first_line(wf.error, 400)}", style="red")
    if wf.code:  # a code run: what its code says of itself
        text.append(f"\nproperties: {json.dumps(wf.properties, sort_keys=True)[:1000]}")
        if wf.continued_as:
            text.append(f"\ncontinued as {wf.continued_as}", style="dim")
    for line in header_lines(wf):  # parent run, redrives
        text.append(f"\n{line}", style="dim")
    return text


def activities_table(wf: WorkflowExec, defn: WorkflowDefinition | None, now: float, *,
                     all_attempts: bool = False) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for col in ("activity", "state", "attempt", "duration", "heartbeat", "after", "error"):
        table.add_column(col, no_wrap=col != "error", overflow="fold")
    acts = ordered_attempts(wf, defn) if all_attempts else ordered_latest(wf, defn)
    for act in acts:
        deps = ""
        if defn is not None and act.activity_name in defn.names:
            deps = ", ".join(defn.activity(act.activity_name).depends_on)
        table.add_row(
            act.activity_name,
            state_text(act.state.value),
            _attempt(act, defn),
            human_duration(activity_duration(act, now)),
            _heartbeat(act, now),
            deps,
            _error_cell(act, now),
        )
    return table


def late_text(act: ActivityExec) -> str | None:
    """What an attempt given up on reported late (docs/contract.md, "Late output")."""
    if act.late_output is not None:
        return f"late output: {json.dumps(act.late_output, default=str)}"
    if act.late_error is not None:
        return f"late error: {act.late_error}"
    return None


def _error_cell(act: ActivityExec, now: float) -> Text:
    late = late_text(act)
    text = Text(first_line(act.error, 80) or ("" if late else _waiting(act, now)),
                style="red" if act.error else "dim")
    if late:
        text.append(("; " if act.error else "") + first_line(late, 80), style="yellow")
    return text


def activities_tree(wf: WorkflowExec, defn: WorkflowDefinition | None, now: float) -> Tree:
    """The DAG as a tree: each activity under the last of its upstreams (fan-in shown
    as "after a, b")."""
    tree = Tree(header(wf, now), guide_style="dim")
    latest = wf.latest_activities
    order = (defn.topological_order() if defn
             else tuple(a.activity_name for a in ordered_latest(wf, defn)))
    nodes: dict[str, Tree] = {}
    for name in order:
        act = latest.get(name)
        label = Text(name, style="bold")
        label.append("  ")
        if act is None:
            label.append("not created", style="dim")
        else:
            label.append_text(state_text(act.state.value))
            if act.attempt > 1 or (max_attempts(defn, name) or 1) > 1:
                label.append(f"  attempt {_attempt(act, defn)}", style="dim")
            dur = human_duration(activity_duration(act, now))
            if dur:
                label.append(f"  {dur}", style="dim")
            hb = _heartbeat(act, now)
            if hb:
                label.append(f"  ♥ {hb}", style="dim")
            extra = _waiting(act, now)
            if extra:
                label.append(f"  {extra}", style="dim")
        deps: Sequence[str] = defn.activity(name).depends_on if defn else ()
        if len(deps) > 1:
            label.append(f"  (after {', '.join(deps)})", style="dim")
        if act is not None and act.error:
            label.append(f"\n{first_line(act.error, 100)}", style="red")
        parent = nodes.get(deps[-1]) if deps else None
        nodes[name] = (parent or tree).add(label)
    return tree


def status_view(wf: WorkflowExec, defn: WorkflowDefinition | None, now: float, *,
                view: str = "table", all_attempts: bool = False,
                more: tuple[RenderableType, ...] = ()) -> RenderableType:
    if view == "tree":
        return activities_tree(wf, defn, now)
    return Group(header(wf, now), Text(""),
                 activities_table(wf, defn, now, all_attempts=all_attempts), *more)


def timeline_table(entries: Sequence[TimelineEntry], start: float) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for col in ("time (UTC)", "+", "subject", "state", "by", "error"):
        table.add_column(col, no_wrap=col != "error", overflow="fold")
    for e in entries:
        table.add_row(iso(e.at) or "", human_duration(e.at - start) or "0ms", e.subject,
                      state_text(e.state), e.by or "",
                      Text(first_line(e.error, 80), style="red"))
    return table


def workflows_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for col in ("workflow_exec_id", "workflow", "state", "started (UTC)", "duration", "error"):
        table.add_column(col, no_wrap=col != "error", overflow="fold")
    for r in rows:
        table.add_row(r["workflow_exec_id"], f"{r['workflow_name']} v{r['version']}",
                      state_text(r["state"]), iso(r["created_epoch"]) or "",
                      human_duration(r["duration_seconds"]),
                      Text(first_line(r["error"], 60), style="red"))
    return table
