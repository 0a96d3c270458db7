"""Pictures of a run (or of a definition): Mermaid and DOT text, SVG through Graphviz.

The text formats are pure functions of the definition and the run, so their output is
stable (tests compare them with golden files); SVG needs the Graphviz ``dot`` binary.
"""

from __future__ import annotations

import shutil
import subprocess

from whimbrel import ActivityExec, WorkflowExec
from whimbrel.cli.render import STATE_COLOURS
from whimbrel.cli.shapes import activity_duration, human_duration
from whimbrel.contract.definitions import WorkflowDefinition, iter_edges

FORMATS = ("mermaid", "dot", "svg")
_UNSTARTED = "#ffffff"


class GraphvizMissing(Exception):
    """The ``dot`` binary is not installed."""


def _nodes(defn: WorkflowDefinition, wf: WorkflowExec | None,
           now: float) -> list[tuple[str, str, list[str], str | None]]:
    """(node id, activity name, detail lines, state) in topological order."""
    latest: dict[str, ActivityExec] = wf.latest_activities if wf else {}
    out = []
    for i, name in enumerate(defn.topological_order(), start=1):
        act = latest.get(name)
        lines: list[str] = []
        state = None
        if act is not None:
            state = act.state.value
            detail = state
            if act.attempt > 1:
                detail += f" · attempt {act.attempt}"
            if act.waiting_for:
                detail += f" · waits for {act.waiting_for}"
            dur = human_duration(activity_duration(act, now)) if act.state.is_terminal else ""
            if dur:
                detail += f" · {dur}"
            lines.append(detail)
        elif wf is None:
            lines.append(defn.activity(name).launcher.kind)
        out.append((f"n{i}", name, lines, state))
    return out


def _fill(state: str | None) -> str:
    if state is None:
        return _UNSTARTED
    return STATE_COLOURS.get(state, ("", _UNSTARTED))[1]


def to_mermaid(defn: WorkflowDefinition, wf: WorkflowExec | None = None,
               now: float = 0.0) -> str:
    """A Mermaid ``flowchart`` with one class per state (GitHub renders it inline)."""
    nodes = _nodes(defn, wf, now)
    ids = {name: nid for nid, name, _, _ in nodes}
    title = f"{defn.name}" + (f" · {wf.state.value}" if wf else "")
    lines = ["---", f"title: {_mermaid_text(title)}", "---", "flowchart LR"]
    for nid, name, detail, _ in nodes:
        label = "<br/>".join([f"<b>{name}</b>", *(_mermaid_text(d) for d in detail)])
        lines.append(f'    {nid}["{label}"]')
    for up, down in iter_edges(defn):
        lines.append(f"    {ids[up]} --> {ids[down]}")
    used = sorted({s for _, _, _, s in nodes if s is not None})
    for state in used:
        lines.append(f"    classDef {state} fill:{_fill(state)},stroke:#555,color:#000")
        members = ",".join(nid for nid, _, _, s in nodes if s == state)
        lines.append(f"    class {members} {state}")
    return "\n".join(lines) + "\n"


def to_dot(defn: WorkflowDefinition, wf: WorkflowExec | None = None, now: float = 0.0) -> str:
    """Graphviz DOT, filled by state; render with ``dot -Tsvg``."""
    nodes = _nodes(defn, wf, now)
    ids = {name: nid for nid, name, _, _ in nodes}
    title = f"{defn.name}" + (f" · {wf.state.value}" if wf else "")
    lines = [
        f"digraph {_dot_str(defn.name)} {{",
        "    rankdir=LR;",
        f"    label={_dot_str(title)}; labelloc=t; fontname=Helvetica;",
        '    node [shape=box, style="rounded,filled", fontname=Helvetica, fillcolor="#ffffff"];',
        "    edge [color=\"#555555\"];",
    ]
    for nid, name, detail, state in nodes:
        label = "\\n".join([name, *detail])
        lines.append(f'    {nid} [label={_dot_str(label, raw=True)}, '
                     f'fillcolor="{_fill(state)}"];')
    for up, down in iter_edges(defn):
        lines.append(f"    {ids[up]} -> {ids[down]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(dot_text: str, dot_binary: str | None = None) -> str:
    """Render DOT through Graphviz.

    Raises:
        GraphvizMissing: ``dot`` is not on PATH.
    """
    exe = dot_binary or shutil.which("dot")
    if exe is None:
        raise GraphvizMissing(
            "Graphviz `dot` is not installed; use --format dot or --format mermaid, "
            "or install graphviz (apt-get install graphviz / brew install graphviz)")
    done = subprocess.run([exe, "-Tsvg"], input=dot_text, capture_output=True, text=True,
                          check=False, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"dot failed: {done.stderr.strip()}")
    return done.stdout


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def _dot_str(text: str, raw: bool = False) -> str:
    """Quote for DOT; ``raw`` keeps ``\\n`` line breaks already in the text."""
    escaped = text.replace('"', '\\"') if raw else text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
