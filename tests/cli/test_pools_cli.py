"""``whimbrel pools …``, ``submit --priority`` and QUEUED runs on the command line (issue
22): set, get and list pools; a definition naming a pool from YAML; bad input exits 4
and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import Run

from whimbrel import DefinitionNotFound, Whimbrel, WorkflowState

WF = """\
name: crawl
max_running: 1
activities:
  - name: fetch
    launcher: external
    pool: api
    priority: 3
"""


def test_pools_commands_and_a_pooled_definition(run: Run, wb: Whimbrel,
                                                write_definition: Callable[..., Path]) -> None:
    assert run.json("pools", "list") == []
    assert "no pools" in run("pools", "list").stdout
    made = run.json("pools", "set", "api", "--slots", "2", "--per-second", "1.5")
    assert (made["name"], made["slots"], made["per_second"]) == ("api", 2, 1.5)
    assert "pool api: 2 slot(s), 1.5/s" in run("pools", "set", "api", "--slots", "2",
                                               "--per-second", "1.5").stdout
    run("definitions", "register", str(write_definition(WF)))
    assert wb.get_definition("crawl").activities[0].pool == "api"
    first = run.json("submit", "crawl")["workflow_exec_id"]
    second = run.json("submit", "crawl", "--priority", "2")["workflow_exec_id"]
    assert wb.get_workflow(first).state is WorkflowState.RUNNING
    assert wb.get_workflow(second).state is WorkflowState.QUEUED
    assert wb.get_workflow(second).priority == 2
    listed = run.json("list", "--workflow", "crawl", "--state", "QUEUED")["items"]
    assert [r["workflow_exec_id"] for r in listed] == [second]
    shown = run.json("status", second)
    assert shown["state"] == "QUEUED" and shown["priority"] == 2
    held = run.json("submit", "crawl")["workflow_exec_id"]  # QUEUED too: max_running 1
    assert wb.get_workflow(held).state is WorkflowState.QUEUED
    got = run.json("pools", "get", "api")
    assert (got["in_use"], got["waiting"]) == (1, 0)  # the first run's attempt holds one
    first_act = run.json("status", first)["activities"][0]
    assert first_act["pool_slot"].startswith("api#") and "pool_wait" not in first_act
    assert "1 in use, 0 waiting" in run("pools", "get", "api").stdout
    table = run("pools", "list").stdout
    assert "api" in table and "1.5" in table
    run.json("pools", "set", "api", "--slots", "none", "--per-second", "none")
    assert run.json("pools", "list")[0]["slots"] is None


def test_bad_pools_and_priorities_exit_non_zero_and_change_nothing(
        run: Run, wb: Whimbrel, write_definition: Callable[..., Path]) -> None:
    run("pools", "set", "api", "--slots", "-1", code=4)
    run("pools", "set", "api", "--per-second", "0", code=4)
    run("pools", "set", "bad name", "--slots", "1", code=4)
    assert run.json("pools", "list") == []
    run("pools", "get", "api", code=3)
    bad = run("definitions", "register", str(write_definition(WF)), code=4)
    assert "pool 'api' does not exist" in bad.stderr
    run.json("pools", "set", "api", "--slots", "1")
    run("definitions", "register", str(write_definition(WF)))
    run("submit", "crawl", "--priority", "10", "--request-id", "r1", code=2)
    assert run.json("list", "--workflow", "crawl")["items"] == []


def test_set_keeps_a_limit_left_out_and_none_lifts_it(run: Run, wb: Whimbrel) -> None:
    """Before: ``pools set --slots 1`` dropped the pool's rate without a word."""
    run.json("pools", "set", "api", "--slots", "2", "--per-second", "5")
    kept = run.json("pools", "set", "api", "--slots", "1")
    assert (kept["slots"], kept["per_second"]) == (1, 5.0)
    kept = run.json("pools", "set", "api", "--per-second", "2.5")
    assert (kept["slots"], kept["per_second"]) == (1, 2.5)
    lifted = run.json("pools", "set", "api", "--per-second", "none")
    assert (lifted["slots"], lifted["per_second"]) == (1, None)
    bad = run("pools", "set", "api", "--slots", "many", code=4)
    assert "--slots must be a whole number or none, not 'many'" in bad.stderr
    run("pools", "set", "api", "--slots", "1.5", code=4)
    run("pools", "set", "api", "--per-second", "fast", code=4)
    assert run.json("pools", "get", "api")["slots"] == 1  # nothing written
    fresh = run.json("pools", "set", "new")
    assert (fresh["slots"], fresh["per_second"]) == (None, None)


def test_register_refuses_a_launcher_and_its_child_in_one_pool(
        run: Run, wb: Whimbrel, write_definition: Callable[..., Path]) -> None:
    run.json("pools", "set", "api", "--slots", "1")
    run("definitions", "register", str(write_definition(
        "name: child\nactivities:\n  - name: work\n    launcher: external\n    pool: api\n",
        "child.yaml")))
    bad = run("definitions", "register", str(write_definition(
        "name: boss\nactivities:\n  - name: sub\n    launcher: workflow:child\n"
        "    pool: api\n", "boss.yaml")), code=4)
    assert "holds a slot of pool 'api'" in bad.stderr and "deadlock" in bad.stderr
    assert [d.workflow_name for d in wb.list_definitions()] == ["child"]


def test_exec_claim_serves_default_work_before_a_later_priority(
        run: Run, wb: Whimbrel, write_definition: Callable[..., Path]) -> None:
    """Before: the priority-9 run (in the shards every claim reads first) was claimed
    before the default one in 15 of 16 tries."""
    run("definitions", "register", str(write_definition(
        "name: jobs\nactivities:\n  - name: step\n    launcher: external\n")))
    for _ in range(4):
        last = run.json("submit", "jobs", "--priority", "9")["workflow_exec_id"]
        default = run.json("submit", "jobs")["workflow_exec_id"]
        first = run.json("exec", "--claim", "jobs", "--json", "--", "true")
        assert first["activity_exec_id"].startswith(default), first
        second = run.json("exec", "--claim", "jobs", "--json", "--", "true")
        assert second["activity_exec_id"].startswith(last), second


KEYED = """\
name: exports
activities:
  - name: export
    launcher: external
    pool: export-api
    pool_key: {key}
"""


def test_a_pool_keyed_by_tenant_from_yaml_and_a_bad_key_exits_4(
        run: Run, wb: Whimbrel, write_definition: Callable[..., Path]) -> None:
    """Issue 29 item 5: each tenant runs its own slots; a pool_key that is not JMESPath
    (or reads a name the document lacks) is refused and registers nothing."""
    run.json("pools", "set", "export-api", "--slots", "1")
    for key, says in (("'input.['", "pool_key is not valid JMESPath"),
                      ("tenant", "pool_key reads tenant")):
        bad = run("definitions", "register", str(write_definition(KEYED.format(key=key))),
                  code=4)
        assert says in bad.stderr
    with pytest.raises(DefinitionNotFound):
        wb.get_definition("exports")
    run("definitions", "register", str(write_definition(KEYED.format(key="input.tenant"))))
    a1, a2, b1 = (run.json("submit", "exports", "--input", f'{{"tenant": "{t}"}}')
                  ["workflow_exec_id"] for t in "aab")
    assert run.json("status", a1)["activities"][0]["pool_slot"] == "export-api~a#0"
    assert run.json("status", b1)["activities"][0]["pool_slot"] == "export-api~b#0"
    waiting = run.json("status", a2)["activities"][0]
    assert waiting["pool_wait"] == "export-api~a" and "pool_slot" not in waiting
    got = run.json("pools", "get", "export-api~a")  # one tenant's slots and waiters
    assert (got["slots"], got["in_use"], got["waiting"]) == (1, 1, 1)
    run("pools", "set", "export-api~a", "--slots", "5", code=4)  # set the pool, not a key
