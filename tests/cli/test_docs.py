"""The reference docs match the code: every CLI option in docs/cli.md, every definition
field in docs/definitions.md, and that file's example is a complete, valid definition."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
import yaml

from whimbrel.cli import app
from whimbrel.contract import definitions
from whimbrel.contract.activities import FLOW_DEFAULTS
from whimbrel.contract.commands import WORKFLOW_COMMANDS
from whimbrel.contract.definitions import (
    LAUNCHER_KINDS,
    ActivityDefinition,
    RetryPolicy,
    WorkflowDefinition,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
SHARED = {"--endpoint-url", "--table-prefix", "--json", "--debug", "--help"}


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, sub in group.commands.items():
        if hasattr(sub, "commands"):
            yield from _commands(sub, (*path, name))
        else:
            yield (*path, name), sub


def test_cli_md_documents_every_command_and_option() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    missing = []
    for path, cmd in _commands(typer.main.get_command(app)):
        if f"### `whimbrel {path[0]}" not in text:
            missing.append(" ".join(path))
        missing += [f"{' '.join(path)} {opt}" for param in cmd.params for opt in param.opts
                    if opt.startswith("--") and opt not in SHARED
                    and not re.search(rf"`[^`]*{re.escape(opt)}\b", text)]
    assert missing == []


def _example() -> str:
    text = (DOCS / "definitions.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
    assert blocks, "docs/definitions.md has no YAML example"
    return str(blocks[0])


def test_definitions_md_names_every_field() -> None:
    text = (DOCS / "definitions.md").read_text(encoding="utf-8")
    fields = {f.name for cls in (WorkflowDefinition, ActivityDefinition, RetryPolicy)
              for f in dataclasses.fields(cls)}
    keys = {key for kind in LAUNCHER_KINDS.values()
            for key in (*kind.required, *(kind.settings or ()))}
    assert [n for n in sorted(fields | keys | set(LAUNCHER_KINDS))
            if f"`{n}`" not in text] == []


#: Issue 22's flow-control fields: their own example ("Flow control"; the pool it names
#: must exist to register it); the complete example covers the rest.
FLOW_WORKFLOW_FIELDS = {"max_running"}
FLOW_ACTIVITY_FIELDS = set(FLOW_DEFAULTS)


def test_definitions_md_example_is_complete_and_valid() -> None:
    defn = WorkflowDefinition.from_yaml(_example())
    raw = yaml.safe_load(_example())
    used = {key for act in raw["activities"] for key in act}
    assert used == {f.name for f in dataclasses.fields(ActivityDefinition)} \
        - FLOW_ACTIVITY_FIELDS
    used_retry = {key for act in raw["activities"] for key in (act.get("retry") or {})}
    assert used_retry == {f.name for f in dataclasses.fields(RetryPolicy)}
    assert {a.launcher.kind for a in defn.activities} == set(LAUNCHER_KINDS)
    assert defn.description
    assert set(raw) == {f.name for f in dataclasses.fields(WorkflowDefinition)} \
        - FLOW_WORKFLOW_FIELDS


def test_definitions_md_flow_control_example() -> None:
    text = (DOCS / "definitions.md").read_text(encoding="utf-8")
    section = text.split("## Flow control", 1)[1]
    example = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)[0]
    assert definitions.FLOW_FIELDS_ENABLED == definitions.FLOW_FIELDS  # all wired
    defn = WorkflowDefinition.from_yaml(example)
    raw = yaml.safe_load(example)
    assert set(raw) >= FLOW_WORKFLOW_FIELDS
    assert {key for act in raw["activities"] for key in act} >= FLOW_ACTIVITY_FIELDS
    assert defn.activity("receipt").trigger == "none_failed"


#: Stands in for the AWS CLI: appends each ``--item`` argument, NUL-terminated, to the
#: file ``$ITEMS`` (a block may print other things, such as a run id it computed).
_FAKE_AWS = """aws() {
  while [ $# -gt 0 ]; do
    if [ "$1" = --item ]; then printf '%s\\0' "$2" >>"$ITEMS"; return; fi
    shift
  done
}
"""


def test_simple_api_shell_examples_run_on_any_machine(tmp_path: Path) -> None:
    """The AWS CLI examples expand, with what every machine has, into valid items."""
    text = (DOCS / "simple-api.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
              if "aws dynamodb put-item" in b]
    assert len(blocks) >= 2
    items = []
    for n, block in enumerate(blocks):
        out = tmp_path / f"items-{n}"
        out.write_text("", encoding="utf-8")
        done = subprocess.run(["bash", "-c", _FAKE_AWS + block], capture_output=True,
                              text=True, timeout=30, check=False,
                              # a run id, as a reader has it from earlier on the page
                              env={**os.environ, "ITEMS": str(out),
                                   "WX": "0c2f5b8e-4e1c-5d43-9f6a-2b7d1e0a9c31"})
        assert done.returncode == 0 and done.stderr == "", done.stderr
        items += [json.loads(raw) for raw in out.read_text(encoding="utf-8").split("\0")
                  if raw]
    events = [i for i in items if "activity_event_id" in i]
    assert len(events) >= 6  # RUNNING, COMPLETED, HEARTBEAT, SIGNAL, APPROVE, SUSPEND
    for event in events:
        uuid.UUID(event["activity_event_id"]["S"])  # a fresh UUID, not an empty string
        # A signal, a suspend, a resume, a redrive or a CANCEL of a whole run addresses a
        # run; everything else an attempt.
        verb = event["transition"]["S"]
        whole_run = verb in {c.value for c in WORKFLOW_COMMANDS} or (
            verb == "CANCEL" and "activity_exec_id" not in event)
        addressed = "workflow_exec_id" if whole_run else "activity_exec_id"
        assert event[addressed]["S"]
    assert len({e["activity_event_id"]["S"] for e in events}) == len(events)
    assert {e["transition"]["S"] for e in events} >= {"RUNNING", "COMPLETED", "HEARTBEAT",
                                                      "SIGNAL", "APPROVE", "SUSPEND",
                                                      "REDRIVE"}
