"""The shell blocks of README.md and docs/*.md run as written on the local stack.

- A page whose blocks run ``aws dynamodb`` against the local stack sets the endpoint
  (``AWS_ENDPOINT_URL_DYNAMODB``) before its first such block: as written, they would
  reach real AWS (pages about a deployment, listed in AWS_ONLY, are meant to).
- Request ids written by the examples are unique: a row reusing another example's id is
  silently rejected while the AWS CLI exits 0.
- The README's quick start and then its Simple API block, run one after the other with
  the real AWS CLI on DynamoDB Local (the port and table prefix of this test's server
  substituted), start two runs, both COMPLETED through the stream handlers.
- docs/cli.md's first run (register, submit --simple --wait, status) as a reader types
  it in a second terminal, with the stream handlers of `whimbrel dev` running.

tests/cli/test_docs.py checks the options and definitions the docs name,
test_docs_simple_api.py the run-state block, test_readme_example.py the quick start.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from whimbrel import Whimbrel, WorkflowExec, WorkflowNotFound, WorkflowState
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Pages whose AWS CLI blocks are about a deployment on AWS, never the local stack.
AWS_ONLY = {"deploy.md": "tearing down a deployed stack's tables",
            "operations.md": "production operations"}
LOCAL = "http://127.0.0.1:8000"
_BLOCK = re.compile(r"```(?:sh|bash)\n(.*?)```", re.S)


def _blocks(page: Path) -> list[str]:
    return _BLOCK.findall(page.read_text(encoding="utf-8"))


def test_pages_that_run_aws_dynamodb_locally_set_the_endpoint_first() -> None:
    missing = []
    for page in PAGES:
        if page.name in AWS_ONLY:
            continue
        seen_endpoint = False
        for block in _blocks(page):
            seen_endpoint |= f"export AWS_ENDPOINT_URL_DYNAMODB={LOCAL}" in block
            if "aws dynamodb" in block and not seen_endpoint and "--endpoint-url" not in block:
                missing.append(f"{page.name}: {block.strip().splitlines()[0]}")
                break
    assert missing == [], ("blocks that would reach real AWS as written (export "
                           f"AWS_ENDPOINT_URL_DYNAMODB={LOCAL} before them): {missing}")


def _written_request_ids() -> Counter[str]:
    """Request ids the examples write: put-item rows, ``submit --request-id``, and
    ``request_id=`` in the example scripts."""
    found: Counter[str] = Counter()
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in _BLOCK.findall(text):
            found.update(re.findall(r'"workflow_request_id":\s*\{"S":\s*"([^"$]+)"\}', block))
            found.update(re.findall(r"whimbrel submit [^\n]*--request-id[ =]([\w.:-]+)",
                                    block))
    for script in (ROOT / "examples").rglob("*.py"):
        found.update(re.findall(r'request_id="([^"{]+)"', script.read_text()))
    return found


def test_examples_never_reuse_a_request_id() -> None:
    ids = _written_request_ids()
    assert "nightly-2026-11-21" in ids and "nightly-2026-11-22" in ids  # the README's
    assert {i: n for i, n in ids.items() if n > 1} == {}


def _readme_simple_api_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Simple Lambda API"):]
    [block] = [b for b in _BLOCK.findall(section)[:1] if "put-item" in b]
    return block


def test_the_readme_quick_start_then_its_simple_api_block_start_two_runs(
        ddb_endpoint: str, table_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "WHIMBREL_ENDPOINT_URL": ddb_endpoint,
           "WHIMBREL_TABLE_PREFIX": table_prefix, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "examples/quickstart/nightly.py"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0 and done.stdout.startswith("COMPLETED"), done.stderr
    # The stream handlers run here, and with them the python activities of the run the
    # row starts: their module must be importable, as for `whimbrel dev`.
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "quickstart"))
    block = (_readme_simple_api_block().replace(LOCAL, ddb_endpoint)
             .replace("--table-name whimbrel_", f"--table-name {table_prefix}"))
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0), \
            Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix) as wb:
        ran = subprocess.run(["bash", "-euc", block], capture_output=True, text=True,
                             timeout=120, check=False,
                             env={k: v for k, v in os.environ.items()
                                  if not k.startswith("AWS_")})
        assert ran.returncode == 0, ran.stderr
        for request_id in ("nightly-2026-11-21", "nightly-2026-11-22"):
            wx = workflow_exec_id_for(request_id)
            wf = wait_until(lambda wx=wx: _ended(wb, wx), timeout=60,
                            message=f"the run of {request_id} did not end")
            assert wf.state is WorkflowState.COMPLETED, (request_id, wf.error)
        wb.store.delete_tables()


def _ended(wb: Whimbrel, wx: str) -> WorkflowExec | None:
    try:
        wf = wb.get_workflow(wx)
    except WorkflowNotFound:  # the stream handler has not started it yet
        return None
    return wf if wf.state in (WorkflowState.COMPLETED, WorkflowState.FAILED,
                              WorkflowState.CANCELLED) else None


def _cli_md_first_run() -> str:
    """docs/cli.md's first run, what a reader types in terminal 2 (dev runs in 1)."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    block = _BLOCK.findall(text[text.index("## Running it"):])[0]
    return block[block.index("# terminal 2"):]


def test_cli_md_first_run_runs_as_written(ddb_endpoint: str, table_prefix: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # Terminal 1's dev: the stream handlers and, with PYTHONPATH=examples/data_pipeline,
    # the python activities, here in this process.
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "data_pipeline"))
    block = _cli_md_first_run().replace(LOCAL, ddb_endpoint)
    env = {**os.environ, "WHIMBREL_TABLE_PREFIX": table_prefix, "COLUMNS": "200",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0) as rt:
        ran = subprocess.run(["bash", "-euc", block], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=240, check=False)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "COMPLETED" in ran.stdout and "report" in ran.stdout, ran.stdout
        rt.client.store.delete_tables()
