"""A workflow's DAG as SVG, laid out here (no Graphviz): pure functions, no I/O.

Layout: each activity goes in the column of its longest path from a root, so every
edge points right; within a column, activities are ordered by the mean position of
their upstreams (a few barycenter sweeps, the usual way to cut crossings). A column
wider than :data:`MAX_PER_COLUMN` shows its first activities and one summary node
("+ 960 more") with the states of the rest, so a 1,000-wide map still fits a screen.

Each node is ``<g class="node s-<STATE>" data-activity=… data-state=…>``; colours
come from the stylesheet (``static/console.css``), so the page and the picture agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

from whimbrel.contract.definitions import WorkflowDefinition

MAX_PER_COLUMN = 10
NODE_W, NODE_H = 184, 46
GAP_X, GAP_Y = 72, 12
PAD = 20
MAX_LABEL = 22


@dataclass(frozen=True)
class NodeInfo:
    """What a node shows besides its name (None when the activity has no attempt yet)."""

    state: str | None = None
    detail: str = ""
    href: str | None = None


@dataclass
class _Node:
    key: str
    label: str
    state: str | None
    detail: str
    href: str | None
    members: tuple[str, ...] = ()  # a summary node stands for these activities
    x: float = 0.0
    y: float = 0.0


@dataclass
class Layout:
    """Positions ready to draw."""

    nodes: list[_Node] = field(default_factory=list)
    edges: list[tuple[_Node, _Node, str | None]] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0


def columns(defn: WorkflowDefinition) -> list[list[str]]:
    """Activities by column (longest path from a root), each column ordered to keep
    edges short and uncrossed."""
    order = defn.topological_order()
    col: dict[str, int] = {}
    for name in order:
        deps = defn.activity(name).depends_on
        col[name] = 1 + max((col[d] for d in deps), default=-1)
    cols: list[list[str]] = [[] for _ in range(max(col.values(), default=-1) + 1)]
    for name in order:
        cols[col[name]].append(name)
    pos = {n: float(i) for c in cols for i, n in enumerate(c)}

    def sweep(layers: Sequence[list[str]], neighbours: Mapping[str, Sequence[str]]) -> None:
        for layer in layers:
            def centre(n: str) -> float:
                near = [pos[m] for m in neighbours[n]]
                return sum(near) / len(near) if near else pos[n]
            layer.sort(key=lambda n: (centre(n), pos[n]))
            for i, n in enumerate(layer):
                pos[n] = float(i)

    ups = {n: defn.activity(n).depends_on for n in order}
    downs = {n: defn.dependents(n) for n in order}
    for _ in range(2):
        sweep(cols[1:], ups)
        sweep(cols[-2::-1], downs)
    sweep(cols[1:], ups)
    return cols


def layout(defn: WorkflowDefinition, info: Mapping[str, NodeInfo]) -> Layout:
    """Place every node (or column summary) and edge."""
    out = Layout()
    where: dict[str, _Node] = {}
    cols = columns(defn)
    tallest = max((min(len(c), MAX_PER_COLUMN) for c in cols), default=0)
    for ci, names in enumerate(cols):
        shown, hidden = names, []
        if len(names) > MAX_PER_COLUMN:
            shown, hidden = names[:MAX_PER_COLUMN - 1], names[MAX_PER_COLUMN - 1:]
        nodes = []
        for name in shown:
            i = info.get(name, NodeInfo())
            nodes.append(_Node(name, name, i.state, i.detail, i.href))
        if hidden:
            states = Counter(info.get(n, NodeInfo()).state or "not started" for n in hidden)
            detail = " · ".join(f"{c} {s.lower().replace('_', ' ')}"
                                for s, c in states.most_common(3))
            nodes.append(_Node(f"+{ci}", f"+ {len(hidden)} more", None, detail, None,
                               members=tuple(hidden)))
        offset = (tallest - len(nodes)) * (NODE_H + GAP_Y) / 2
        for row, node in enumerate(nodes):
            node.x = PAD + ci * (NODE_W + GAP_X)
            node.y = PAD + offset + row * (NODE_H + GAP_Y)
            out.nodes.append(node)
            for member in node.members or (node.key,):
                where[member] = node
    seen: set[tuple[str, str]] = set()
    for name in defn.topological_order():
        for up in defn.activity(name).depends_on:
            a, b = where[up], where[name]
            if (a.key, b.key) not in seen:
                seen.add((a.key, b.key))
                out.edges.append((a, b, info.get(up, NodeInfo()).state))
    out.width = PAD * 2 + len(cols) * NODE_W + max(len(cols) - 1, 0) * GAP_X
    out.height = PAD * 2 + tallest * NODE_H + max(tallest - 1, 0) * GAP_Y
    return out


def _short(text: str, limit: int = MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_svg(defn: WorkflowDefinition, info: Mapping[str, NodeInfo], *,
               title: str) -> str:
    """The DAG as an inline ``<svg>`` element (every text escaped)."""
    lay = layout(defn, info)
    parts = [f'<svg class="dag" xmlns="http://www.w3.org/2000/svg" role="img" '
             f'width="{lay.width:.0f}" height="{lay.height:.0f}" '
             f'viewBox="0 0 {lay.width:.0f} {lay.height:.0f}" '
             f'aria-label="{escape(title)}">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
             'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
             '<path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>']
    for a, b, up_state in lay.edges:
        x1, y1 = a.x + NODE_W, a.y + NODE_H / 2
        x2, y2 = b.x - 2, b.y + NODE_H / 2
        bend = max((x2 - x1) / 2, 24)
        done = " done" if up_state in ("COMPLETED", "SKIPPED") else ""
        parts.append(f'<path class="edge{done}" marker-end="url(#arrow)" '
                     f'd="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} '
                     f'{x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"/>')
    for n in lay.nodes:
        state = n.state or "NONE"
        cls = "node summary" if n.members else f"node s-{state}"
        tip = n.label + (f" — {n.state}" if n.state else "") + (
            f" ({n.detail})" if n.detail else "")
        attrs = (f'class="{cls}" data-activity="{escape(n.key)}" data-state="{state}" '
                 f'transform="translate({n.x:.1f},{n.y:.1f})"')
        body = (f'<title>{escape(tip)}</title>'
                f'<rect class="box" width="{NODE_W}" height="{NODE_H}" rx="8"/>'
                f'<rect class="strip" width="6" height="{NODE_H}" rx="3"/>'
                f'<text class="name" x="16" y="19">{escape(_short(n.label))}</text>'
                f'<text class="meta" x="16" y="36">{escape(_short(n.detail, 28))}</text>')
        if n.href:
            parts.append(f'<a href="{escape(n.href)}"><g {attrs}>{body}</g></a>')
        else:
            parts.append(f'<g {attrs}>{body}</g>')
    parts.append("</svg>")
    return "".join(parts)
