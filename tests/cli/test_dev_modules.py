"""``whimbrel dev --module M`` (issue 26, "code runs where the code is"): dev imports the
project's modules from the folder it was started in, registers their code workflows, and
makes their decisions and runs their python steps from a bare request row."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from test_local_dev import _free_port, bare_env, dev_server, whimbrel

__all__ = ["bare_env"]  # the fixture, imported for these tests

FLOWS = textwrap.dedent('''
    from whimbrel import workflow

    def double(run):
        return run.input * 2

    @workflow("dev_module_flow")
    def flow(ctx, input):
        total = 0
        for i in range(input["steps"]):
            total += ctx.step(double, i)
        ctx.properties["total"] = total
        return {"total": total}
''')


def test_dev_module_registers_and_runs_a_code_workflow_from_a_row(
        bare_env: dict[str, str], tmp_path: Path, table_prefix: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "dev_module_flows.py").write_text(FLOWS)
    port = _free_port()
    env = {**bare_env, "WHIMBREL_TABLE_PREFIX": table_prefix}
    with dev_server(env, tmp_path / "dev.log", "--port", str(port),
                    "--module", "dev_module_flows", cwd=project) as banner:
        assert ("  modules: dev_module_flows (code workflows registered: dev_module_flow)"
                in banner), banner
        env["WHIMBREL_ENDPOINT_URL"] = f"http://127.0.0.1:{port}"
        # A bare request row from another folder: dev's stream handler starts the run,
        # decides it and runs its python steps (the submitting CLI is no worker).
        run = json.loads(whimbrel(env, "submit", "dev_module_flow", "--simple", "--input",
                                  '{"steps": 4}', "--wait", "--timeout", "90",
                                  "--json").stdout)
    assert run["state"] == "COMPLETED", run
    assert run["output"] == {"total": 12}


def test_dev_refuses_a_module_it_cannot_import_before_starting(
        bare_env: dict[str, str], tmp_path: Path) -> None:
    done = whimbrel(bare_env, "dev", "--port", str(_free_port()), "--module",
                    "no_such_dev_module", code=4)
    assert "whimbrel dev --module: cannot import module 'no_such_dev_module'" in (
        done.stdout + done.stderr)
    bad = whimbrel(bare_env, "dev", "--module", "not a module", code=4)
    assert "'not a module' is not a module name" in bad.stdout + bad.stderr
