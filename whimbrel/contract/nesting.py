"""Child workflows nest (pure): the runs a definition starts as children, the cycles
they may close, and how deep runs may nest.

A cycle of ``workflow`` launchers (A starts A; A starts B, which starts A) could only end
at the nesting-depth limit, so registration refuses the definition that would close one.
The registered definitions it is checked against are read by the engine (the latest
version of a child, or the version its launcher pins); this module only walks them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from whimbrel.contract.definitions import WorkflowDefinition

#: A child is one of these: a workflow name and the version its launcher pins (None:
#: the latest when the child starts).
ChildRef = tuple[str, int | None]

CHILD_LAUNCHER = "workflow"


def child_workflows(defn: WorkflowDefinition) -> tuple[ChildRef, ...]:
    """The workflows ``defn`` starts as child runs, in definition order, each once."""
    out: dict[ChildRef, None] = {}
    for spec in defn.activities:
        if spec.launcher.kind == CHILD_LAUNCHER:
            version = spec.launcher.config.get("version")
            out[(str(spec.launcher.config["workflow"]),
                 None if version is None else int(version))] = None
    return tuple(out)


def child_cycle(root: str, children: Mapping[ChildRef, Collection[ChildRef]]
                ) -> tuple[str, ...] | None:
    """The shortest cycle of child starts through ``root`` (the definition being
    registered, which the key ``(root, None)`` describes), as workflow names from and
    back to one of them; None when there is none.

    ``children`` maps each definition reached to the children it starts (a name that is
    not registered has none). A reference to ``root`` at any version counts as ``root``
    unless ``children`` holds that version separately (a pinned older version).
    """
    start: ChildRef = (root, None)
    # Breadth first: the first path back to root is a shortest cycle.
    parent: dict[ChildRef, ChildRef] = {start: start}
    frontier = [start]
    while frontier:
        nxt: list[ChildRef] = []
        for node in frontier:
            for ref in children.get(node, ()):
                if ref[0] == root and (ref[1] is None or ref not in children):
                    path = [root]
                    cur = node
                    while cur != start:
                        path.append(cur[0])
                        cur = parent[cur]
                    path.append(root)
                    return tuple(reversed(path))
                if ref not in parent:
                    parent[ref] = node
                    nxt.append(ref)
        frontier = nxt
    return None


def describe_cycle(cycle: tuple[str, ...]) -> str:
    """``A → B → A``: the cycle from its smallest name, so one cycle reads one way
    whichever of its workflows closed it."""
    ring = list(cycle[:-1])
    first = ring.index(min(ring))
    ring = ring[first:] + ring[:first]
    return " → ".join([*ring, ring[0]])
