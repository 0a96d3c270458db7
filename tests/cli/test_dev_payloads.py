"""Issue 27, locally: ``whimbrel dev`` also serves S3 (moto's server), creates the
payload bucket and prints the lines that point clients at it; a run with an input far
over today's 128 KB goes through dev's own Lambdas and activities."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import FANOUT_YAML
from test_local_dev import _free_port, bare_env, dev_server, whimbrel

from whimbrel.local.s3 import LocalS3, MotoMissing

__all__ = ["bare_env"]  # the fixture, imported for these tests


def test_dev_serves_s3_and_prints_its_exports(bare_env: dict[str, str], tmp_path: Path,
                                              table_prefix: str,
                                              write_definition: Callable[..., Path]) -> None:
    port = _free_port()
    env = {**bare_env, "WHIMBREL_TABLE_PREFIX": table_prefix}
    with dev_server(env, tmp_path / "dev.log", "--port", str(port)) as banner:
        [s3_line] = [ln for ln in banner.splitlines() if "AWS_ENDPOINT_URL_S3=" in ln]
        s3_url = s3_line.split("=", 1)[1]
        assert s3_url.startswith("http://127.0.0.1:")
        assert "  export WHIMBREL_PAYLOAD_BUCKET=whimbrel-payloads\n" in banner
        env.update({"WHIMBREL_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                    "AWS_ENDPOINT_URL_S3": s3_url,
                    "WHIMBREL_PAYLOAD_BUCKET": "whimbrel-payloads"})
        whimbrel(env, "definitions", "register", str(write_definition(FANOUT_YAML)))
        big = tmp_path / "big.json"
        big.write_text(json.dumps({"rows": ["r" * 100] * 3000}))  # ~310 KB
        # Through dev's workflow_request stream handler; the activities run in dev.
        run = json.loads(whimbrel(env, "submit", "fanout", "--simple", "--input", f"@{big}",
                                  "--wait", "--timeout", "60", "--json").stdout)
        assert run["state"] == "COMPLETED", run


def test_dev_without_s3(bare_env: dict[str, str], tmp_path: Path, table_prefix: str) -> None:
    env = {**bare_env, "WHIMBREL_TABLE_PREFIX": table_prefix}
    with dev_server(env, tmp_path / "dev.log", "--port", str(_free_port()),
                    "--no-s3") as banner:
        assert "AWS_ENDPOINT_URL_S3" not in banner
        assert "WHIMBREL_PAYLOAD_BUCKET" not in banner


def test_without_moto_the_local_s3_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "moto.server", None)  # as if not installed
    with pytest.raises(MotoMissing, match=r"pip install 'whimbrel\[local\]'"):
        LocalS3().start()
