"""The lane edges of a map: the fan-in trick over its lanes (docs/architecture.md, "Maps").

One edge per lane is put before the lane's first item exists; the lane's last item
deletes it and then looks for any edge left (consistent); the one that sees none ends
the map. A map of up to ``LANES_PER_KEY`` lanes keeps its edges under one key
(``<wx>/<map>#``, as always); a wider one — 100,000 items without ``max_concurrency``
is 100,000 lanes, two writes each — spreads them over ``ceil(lanes / LANES_PER_KEY)``
keys (``<wx>/<map>#/<k>``, lane ``j`` on key ``j mod keys``), so no key takes more than a
10,000-lane map's share. A lane's end looks at its own key first and at the others only
when that one is empty: the extra reads are about ``keys`` per key, not per lane. Each
end deletes before it reads, so whoever deletes the last edge sees none left, whichever
key it was on.
"""

from __future__ import annotations

from collections.abc import Iterable

from whimbrel.contract.dataflow import lane_edges
from whimbrel.engine.ports import StorePort

#: The most lanes whose edges share one key (what a map had at most before
#: ``MAX_MAP_ITEMS`` was raised to 100,000: such a map's edges stay where they were).
LANES_PER_KEY = 10_000


def edge_keys(width: int) -> int:
    """How many keys the edges of a map of ``width`` lanes are spread over."""
    return max(1, -(-width // LANES_PER_KEY))


def edge_name(name: str, width: int, k: int) -> str:
    """The downstream name of key ``k`` of the lane edges of map ``name``."""
    return lane_edges(name) if edge_keys(width) == 1 else f"{lane_edges(name)}/{k}"


def put_edges(store: StorePort, wx: str, name: str, width: int,
              which: Iterable[int]) -> None:
    """Put the edges of lanes ``which`` (before any of their items exists)."""
    keys = edge_keys(width)
    by_key: dict[int, list[str]] = {}
    for lane in which:
        by_key.setdefault(lane % keys, []).append(str(lane))
    for k, lanes in sorted(by_key.items()):
        store.put_dependencies(wx, edge_name(name, width, k), lanes)


def any_edge(store: StorePort, wx: str, name: str, width: int, first: int = 0) -> bool:
    """Whether any lane edge is left (key ``first`` read first; one consistent Query,
    ``Limit 1``, per key read)."""
    keys = edge_keys(width)
    return any(store.pending_dependencies(wx, edge_name(name, width, (first + i) % keys))
               for i in range(keys))


def end_lane(store: StorePort, wx: str, name: str, width: int, lane: int) -> bool:
    """Delete lane ``lane``'s edge; True when no edge is left (this end ends the map)."""
    keys = edge_keys(width)
    store.delete_dependency(wx, edge_name(name, width, lane % keys), str(lane))
    return not any_edge(store, wx, name, width, lane % keys)


def pending_lanes(store: StorePort, wx: str, name: str, width: int) -> list[str]:
    """Every lane whose edge is left (all of them, every key)."""
    return [lane for k in range(edge_keys(width))
            for lane in store.pending_dependencies(wx, edge_name(name, width, k),
                                                   limit=None)]


def drop_edges(store: StorePort, wx: str, name: str, width: int) -> None:
    """Delete every edge left (a map that ended otherwise: lanes nobody will end)."""
    keys = edge_keys(width)
    for lane in pending_lanes(store, wx, name, width):
        store.delete_dependency(wx, edge_name(name, width, int(lane) % keys), lane)
