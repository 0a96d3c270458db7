"""--help of every command, ``tables create`` and ``definitions …``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import COMMANDS, FANOUT_YAML, Run
from typer.testing import CliRunner

from whimbrel.cli import app


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.stdout
    if path not in (("tables",), ("definitions",), ("schedules",)):
        assert "--json" in result.stdout


def test_tables_create_is_idempotent(run: Run, table_prefix: str) -> None:
    first = run.json("tables", "create")
    assert first["table_prefix"] == table_prefix
    assert sorted(first["created"]) == sorted(
        f"{table_prefix}{n}" for n in ("workflow_definition", "workflow_request",
                                      "workflow_exec", "workflow_exec_data",
                                      "activity_exec", "map_item",
                                      "activity_exec_dependency", "activity_event",
                                      "rejection", "notification", "signal",
                                      "schedule", "lease", "pool", "workflow_attribute"))
    assert run.json("tables", "create") == {"table_prefix": table_prefix, "created": []}
    assert "exist already" in run("tables", "create").stdout


def test_flags_override_the_environment(ddb_endpoint: str, table_prefix: str) -> None:
    result = CliRunner().invoke(app, ["tables", "create", "--endpoint-url", ddb_endpoint,
                                      "--table-prefix", table_prefix, "--json"],
                                env={"WHIMBREL_ENDPOINT_URL": "http://127.0.0.1:9",
                                     "WHIMBREL_TABLE_PREFIX": "nope_"})
    assert result.exit_code == 0, result.output
    assert f'"{table_prefix}workflow_exec"' in result.stdout


def test_store_errors_are_one_line_with_code_6(run: Run) -> None:
    result = run("definitions", "show", "x", code=6)
    assert result.stderr.startswith("error: ")
    assert "whimbrel tables create" in result.stderr
    assert "Traceback" not in result.output


def test_definitions_register_list_show(run: Run, write_definition: Callable[..., Path],
                                         wb: object) -> None:
    path = write_definition(FANOUT_YAML)
    reg = run.json("definitions", "register", str(path))
    assert reg == {"workflow_name": "fanout", "version": 1,
                   "description": "extract, three parallel transforms, load",
                   "activities": 5, "roots": ["extract"], "sinks": ["load"]}
    assert run.json("definitions", "register", str(path))["version"] == 1  # unchanged
    path.write_text(FANOUT_YAML.replace("description: extract", "description: Extract"))
    assert run.json("definitions", "register", str(path))["version"] == 2
    assert "registered fanout version 2" in run("definitions", "register", str(path)).stdout

    rows = run.json("definitions", "list")
    assert [(r["workflow_name"], r["latest_version"], r["versions"]) for r in rows] == [
        ("fanout", 2, 2)]
    assert "fanout" in run("definitions", "list").stdout

    shown = run.json("definitions", "show", "fanout", "--version", "1")
    assert shown["version"] == 1 and shown["versions"] == [1, 2]
    assert [a["name"] for a in shown["definition"]["activities"]] == [
        "extract", "t1", "t2", "t3", "load"]
    human = run("definitions", "show", "fanout").stdout
    assert "version 2" in human and "wb_test_activities:echo" in human


def test_definition_errors(run: Run, write_definition: Callable[..., Path], wb: object) -> None:
    bad = write_definition("name: bad\nactivities:\n  - name: a\n    depends_on: [zz]\n"
                           "  - name: a\n")
    result = run("definitions", "register", str(bad), code=4)
    assert result.stderr.splitlines()[0] == "error: invalid workflow definition 'bad'"
    assert "depends on unknown activity 'zz'" in result.stderr
    assert "duplicate activity name" in result.stderr
    err = run("definitions", "register", str(bad), "--json", code=4)
    assert '"InvalidDefinition"' in err.stderr and '"exit_code": 4' in err.stderr
    missing = run("definitions", "show", "nope", code=3)
    assert missing.stderr.strip() == "error: no registered workflow definition 'nope'"
    assert run("definitions", "register", "/nonexistent.yaml", code=2).exit_code == 2
