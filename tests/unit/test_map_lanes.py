"""The lane edges of a map (engine/map_lanes.py) on the store's in-memory twin: a map of
more than LANES_PER_KEY lanes spreads its edges over several keys, and exactly the end
that deletes the last edge, on whichever key, sees none left."""

from __future__ import annotations

import random

from whimbrel import Whimbrel
from whimbrel.engine.map_lanes import (
    LANES_PER_KEY,
    any_edge,
    drop_edges,
    edge_keys,
    edge_name,
    end_lane,
    pending_lanes,
    put_edges,
)


def test_edge_keys_grow_with_the_lanes_and_a_narrow_map_keeps_one() -> None:
    assert [edge_keys(w) for w in (0, 1, LANES_PER_KEY, LANES_PER_KEY + 1, 100_000)] == [
        1, 1, 1, 2, 10]
    assert edge_name("m", 200, 0) == "m#"  # where a map's edges always were
    assert edge_name("s#2", 100_000, 7) == "s#2#/7"


def test_only_the_end_of_the_last_lane_sees_no_edge_left() -> None:
    width = 2 * LANES_PER_KEY + 1  # three keys
    with Whimbrel.in_memory() as wb:
        store, wx = wb.store, "wx-lanes"
        # Lanes on each of the three keys (the lanes still running near the map's end).
        running = [0, 1, 2, 3, 4, 5, 10_001, 19_999, 20_000]
        assert {lane % edge_keys(width) for lane in running} == {0, 1, 2}
        put_edges(store, wx, "m", width, running)
        assert any_edge(store, wx, "m", width)
        assert sorted(map(int, pending_lanes(store, wx, "m", width))) == running
        for seed in range(3):
            order = list(running)
            random.Random(seed).shuffle(order)
            ended = [end_lane(store, wx, "m", width, lane) for lane in order]
            assert ended == [False] * (len(order) - 1) + [True], order
            assert not any_edge(store, wx, "m", width)
            put_edges(store, wx, "m", width, running)
        drop_edges(store, wx, "m", width)
        put_edges(store, wx, "m", width, [1, 2, 3])
        assert sorted(pending_lanes(store, wx, "m", width)) == ["1", "2", "3"]
        drop_edges(store, wx, "m", width)
        assert pending_lanes(store, wx, "m", width) == []
