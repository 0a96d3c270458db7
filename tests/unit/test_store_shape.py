"""The store's shape (issue 28, item 1): plain parts over one ``Tables``, no class deeper
than 2 in whimbrel/store, a core ``StorePort`` of at most 40 methods and one small port
per feature, which the real ``Store`` satisfies part by part."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Protocol

import whimbrel
from whimbrel.engine.cold_port import ColdPort
from whimbrel.engine.lease_port import LeasePort
from whimbrel.engine.pool_port import PoolPort
from whimbrel.engine.ports import StorePort
from whimbrel.engine.schedule_port import SchedulePort
from whimbrel.engine.signal_port import SignalPort
from whimbrel.observe.notify import MarkerStore
from whimbrel.store.attempts import Attempts
from whimbrel.store.cold import Cold
from whimbrel.store.leases import Leases
from whimbrel.store.notifications import Markers
from whimbrel.store.plumbing import Tables
from whimbrel.store.pools import Pools
from whimbrel.store.schedules import Schedules
from whimbrel.store.signals import Signals
from whimbrel.store.store import Store

STORE = Path(whimbrel.__file__).parent / "store"
#: Each feature part of ``Store`` and the port the engine sees it through.
PARTS: dict[str, type] = {"cold": ColdPort, "signals": SignalPort, "markers": MarkerStore,
                          "schedules": SchedulePort, "leases": LeasePort, "pools": PoolPort}


def _classes() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in STORE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                out[node.name] = [ast.unparse(b) for b in node.bases]
    return out


def test_no_class_in_the_store_is_deeper_than_two() -> None:
    classes = _classes()

    def depth(name: str) -> int:  # the class itself, and its bases defined here
        return 1 + max((depth(b) for b in classes.get(name, []) if b in classes), default=0)

    assert max(depth(c) for c in classes) <= 2, {c: classes[c] for c in classes
                                                 if depth(c) > 2}
    assert classes["Tables"] == [], "the plumbing is held by the parts, not inherited"


def test_no_store_module_over_500_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in STORE.glob("*.py")}
    assert max(sizes.values()) <= 500, sizes


def _members(port: type) -> set[str]:
    return {n for n, v in vars(port).items()
            if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))}


def test_the_core_port_is_small_and_each_part_has_its_own() -> None:
    core = _members(StorePort) - set(PARTS)
    assert len(core) <= 40, sorted(core)
    for name, port in PARTS.items():
        assert issubclass(port, Protocol)  # type: ignore[arg-type]
        assert not _members(port) & core, (name, _members(port) & core)
        if name != "markers":  # the notify consumer is handed store.markers, not the store
            assert name in _members(StorePort), name


def test_each_part_holds_the_one_tables_and_implements_its_port() -> None:
    # Structure only: no request is sent, so the transport is never called.
    tables = Tables(client=None, prefix="shape-",  # type: ignore[arg-type]
                    write=lambda op, table, fn: fn())
    parts = {"cold": Cold(tables), "signals": Signals(tables), "markers": Markers(tables),
             "schedules": Schedules(tables), "leases": Leases(tables),
             "pools": Pools(tables, Attempts(tables))}
    assert set(parts) == set(PARTS)
    for name, part in parts.items():
        assert part.tables is tables
        port = PARTS[name]
        wanted = _members(port) | {a for a in getattr(port, "__annotations__", {})
                                   if not a.startswith("_")}
        assert not {m for m in wanted if not hasattr(part, m)}, name
    core = _members(StorePort) - set(PARTS)
    assert not {m for m in core if not hasattr(Store, m)}
