"""What a process is a worker for (``whimbrel.launch.python.WorkerScope``), and where the
store keys python work left for a worker (issue 26, "Code runs where the code is")."""

from __future__ import annotations

from whimbrel.launch.python import WorkerScope
from whimbrel.store.keys import index_changes


def test_a_client_scope_covers_exactly_its_targets() -> None:
    scope = WorkerScope()
    assert scope.empty and not scope.covers("json:dumps")
    scope.add_targets(["json:dumps"])
    assert scope.covers("json:dumps")
    assert not scope.covers("json:loads")  # another function of the module: not its own
    assert scope.claim_prefixes() == ["json/"]


def test_a_module_scope_covers_every_function_of_its_modules_and_no_prefix_twin() -> None:
    scope = WorkerScope()
    scope.add_modules(["orders", "orders.sub"])
    assert scope.covers("orders:ship") and scope.covers("orders.sub:bill")
    assert not scope.covers("orders_x:ship")  # "orders" is a module, not a prefix
    assert scope.claim_prefixes() == ["orders.sub/", "orders/"]


def test_an_importable_scope_covers_what_imports_and_reads_every_entry() -> None:
    scope = WorkerScope(importable=True)
    assert scope.covers("json:dumps")
    assert not scope.covers("wc_no_such_module:f")
    assert not scope.covers("json:no_such_function")
    assert scope.claim_prefixes() == [""]


def test_a_closed_scope_covers_nothing() -> None:
    scope = WorkerScope(importable=True)
    scope.add_targets(["json:dumps"])
    scope.close()
    assert scope.closed and not scope.covers("json:dumps")


def test_python_work_left_for_a_worker_is_keyed_apart_from_external_work() -> None:
    aeid = "6f1c2d4e-0000-5000-8000-000000000000:ship:1"
    external = index_changes({"claimable": ("orders", "ship", "0000000100", 5)}, aeid)
    python = index_changes(
        {"claimable": ("orders", "ship", "0000000100", 5, "shop.acts:ship")}, aeid)
    assert python["claim_shard"] == "w" + external["claim_shard"]
    assert python["claim_key"] == f"shop.acts/ship/0000000100/{aeid}"
    urgent = index_changes(
        {"claimable": ("orders", "ship", "0000000100", 1, "shop.acts:ship")}, aeid)
    assert urgent["claim_shard"].startswith("wp")
