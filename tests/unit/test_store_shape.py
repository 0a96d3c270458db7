"""The store's shape (issue 28, item 1): plain parts over one ``Tables``, no class deeper
than 2 in whimbrel/store, a core ``StorePort`` of at most 40 methods and one small port
per feature, which the real ``Store`` satisfies part by part."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Protocol

import pytest

import whimbrel
from whimbrel.engine.cold_port import ColdPort
from whimbrel.engine.lease_port import LeasePort
from whimbrel.engine.pool_port import PoolPort
from whimbrel.engine.ports import StorePort
from whimbrel.engine.schedule_port import SchedulePort
from whimbrel.engine.signal_port import SignalPort
from whimbrel.observe.notify import MarkerStore
from whimbrel.store import specs
from whimbrel.store.attempts import Attempts
from whimbrel.store.cold import Cold
from whimbrel.store.memory import MemoryDynamoDB
from whimbrel.store.part import parts
from whimbrel.store.parts.pools import Pools
from whimbrel.store.parts.signals import Signals
from whimbrel.store.plumbing import Tables
from whimbrel.store.store import Store

STORE = Path(whimbrel.__file__).parent / "store"
#: The port the engine (or the notify consumer) sees each part through, by its name.
PORTS: dict[str, type] = {p.__name__: p for p in (SignalPort, MarkerStore, SchedulePort,
                                                  LeasePort, PoolPort)}


def _classes() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in STORE.rglob("*.py"):
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
    assert classes["Part"] == [], "a part inherits only Part"


def test_no_store_module_over_500_lines() -> None:
    sizes = {str(p.relative_to(STORE)): len(p.read_text().splitlines())
             for p in STORE.rglob("*.py")}
    assert max(sizes.values()) <= 500, sizes


def _members(port: type) -> set[str]:
    return {n for n, v in vars(port).items()
            if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))}


def test_the_core_port_is_small_and_names_no_feature() -> None:
    core = _members(StorePort)
    assert len(core) <= 40, sorted(core)
    # A feature's tables are reached by its port (store.part(PoolPort)), never by a
    # property of the core port: a new feature's table adds no line to StorePort.
    assert "part" in core and "cold" in core
    assert not core & {"signals", "markers", "schedules", "leases", "pools"}
    for port in (ColdPort, *PORTS.values()):
        assert issubclass(port, Protocol)  # type: ignore[arg-type]
        assert not _members(port) & (core - {"part"}), (port, _members(port) & core)


def test_every_part_is_found_declares_its_tables_and_implements_its_port() -> None:
    found = parts()
    assert {cls.PORT for cls in found} == set(PORTS)
    assert [cls.__module__ for cls in found] == sorted(cls.__module__ for cls in found)
    # Every part's tables are in specs.TABLES (create_tables, CDK), once, after the core's.
    part_tables = [spec for cls in found for spec in cls.TABLES]
    assert specs.CORE_TABLES + tuple(part_tables) == specs.TABLES
    assert len({s.logical_name for s in specs.TABLES}) == len(specs.TABLES)
    # Structure only: no request is sent, so the transport is never called.
    tables = Tables(client=None, prefix="shape-",  # type: ignore[arg-type]
                    write=lambda op, table, fn: fn())
    for cls in found:
        part = cls(tables, Attempts(tables))
        assert part.tables is tables
        port = PORTS[cls.PORT]
        wanted = _members(port) | {a for a in getattr(port, "__annotations__", {})
                                   if not a.startswith("_")}
        assert not {m for m in wanted if not hasattr(part, m)}, cls
    cold = Cold(tables)
    assert not {m for m in _members(ColdPort) if not hasattr(cold, m)}
    assert not {m for m in _members(StorePort) - {"cold"} if not hasattr(Store, m)}


def test_the_store_gives_each_part_by_its_port_and_names_a_missing_one() -> None:
    store = Store(transport=MemoryDynamoDB())
    assert isinstance(store.part(PoolPort), Pools)
    assert store.part(PoolPort) is store.pools  # one instance, whichever way it is reached
    assert isinstance(store.part(SignalPort), Signals)

    class NoSuchPort(Protocol):
        def nothing(self) -> None: ...

    with pytest.raises(LookupError, match=r"NoSuchPort.*PoolPort"):
        store.part(NoSuchPort)
