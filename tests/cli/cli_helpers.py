"""Helpers shared by the CLI tests (imported as a plain module: tests/ has no packages)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from click.testing import Result
from typer.testing import CliRunner

from whimbrel.cli import app

#: Every command path; each must have --help with an example.
COMMANDS: list[tuple[str, ...]] = [
    ("tables",), ("tables", "create"), ("definitions",), ("definitions", "register"),
    ("definitions", "list"), ("definitions", "show"), ("submit",), ("status",), ("list",),
    ("events",), ("graph",), ("cancel",), ("retry",), ("exec",), ("sweep",), ("nudge",),
    ("rejections",), ("dev",), ("demo",), ("ui",), ("redrive",), ("notifications",),
    ("signal",), ("approve",), ("reject",), ("suspend",), ("resume",), ("runs",),
    ("runs", "cancel"), ("runs", "redrive"), ("runs", "signal"), ("runs", "suspend"),
    ("runs", "resume"), ("fork",),
    ("schedules",), ("schedules", "create"), ("schedules", "apply"), ("schedules", "list"),
    ("schedules", "pause"), ("schedules", "resume"), ("schedules", "delete"),
    ("schedules", "backfill"), ("worker",),
]


@dataclass
class Run:
    """Invoke the CLI with the test's endpoint and prefix in the environment."""

    runner: CliRunner
    env: dict[str, str]

    def __call__(self, *args: str, code: int | None = 0, input: str | None = None) -> Result:
        result = self.runner.invoke(app, list(args), env=self.env, input=input)
        if code is not None:
            assert result.exit_code == code, (
                f"exit {result.exit_code} != {code}\nstdout: {result.stdout}\n"
                f"stderr: {result.stderr}\nexception: {result.exception!r}")
        return result

    def json(self, *args: str, code: int | None = 0) -> Any:
        result = self(*args, "--json", code=code)
        return json.loads(result.stdout)


FANOUT_YAML = """\
name: fanout
description: extract, three parallel transforms, load
activities:
  - name: extract
    launcher: python:wb_test_activities:echo
  - name: t1
    depends_on: [extract]
    launcher: python:wb_test_activities:echo
  - name: t2
    depends_on: [extract]
    launcher: python:wb_test_activities:echo
  - name: t3
    depends_on: [extract]
    launcher: python:wb_test_activities:echo
  - name: load
    depends_on: [t1, t2, t3]
    launcher: python:wb_test_activities:echo
"""
