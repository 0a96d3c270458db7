"""The README's Python example runs as written (issue 20: its ``mymod:fetch`` re-imported
the script, which started a nested run): the files it shows are the files in
``examples/quickstart``, and ``python examples/quickstart/nightly.py`` completes one run
against DynamoDB Local."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from whimbrel import Whimbrel, WorkflowState

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


def _shown(readme: str, name: str) -> str:
    """The python block the README shows under the link to ``examples/quickstart/NAME``."""
    found = re.search(rf"\[`examples/quickstart/{re.escape(name)}`\]\([^)]*\):\n\n"
                      r"```python\n(.*?)```", readme, re.S)
    assert found, f"README shows no block for {name}"
    return found.group(1)


def test_the_readme_shows_the_example_files_as_they_are() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in ("nightly_activities.py", "nightly.py"):
        assert _shown(readme, name) == (QUICKSTART / name).read_text(), name
    assert "python examples/quickstart/nightly.py" in readme


def test_the_readme_example_runs_as_written(ddb_endpoint: str, table_prefix: str) -> None:
    env = {**os.environ, "WHIMBREL_ENDPOINT_URL": ddb_endpoint,
           "WHIMBREL_TABLE_PREFIX": table_prefix,
           # This checkout's whimbrel, as `pip install -e .` would give; nothing else.
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "examples/quickstart/nightly.py"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "COMPLETED", done.stdout
    with Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix) as wb:
        runs = wb.list_workflows(limit=10).items
        assert [r.workflow_name for r in runs] == ["nightly"]  # one run, nothing nested
        wf = wb.get_workflow(runs[0].workflow_exec_id)
        assert wf.state is WorkflowState.COMPLETED
        assert wf.activity("report").output == {"total": 42}
        assert lines[1:] == [f"{wf.workflow_exec_id} COMPLETED"]
    wb.store.delete_tables()
