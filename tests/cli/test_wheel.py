"""``pip install whimbrel`` as a newcomer does it: the wheel, built from this checkout,
installed with its base dependencies only (no extra) in a fresh virtualenv, gives a
working ``whimbrel`` command — ``--help``, ``--version``, ``demo``, and ``dev`` starting,
answering and stopping.

Slow (a wheel build and a ``pip install`` from the configured index) but run in CI like
every slow test. The child processes see neither this checkout (no PYTHONPATH, a
working directory of their own) nor any extra of the dev environment.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import boto3
import pytest

from whimbrel.local.dynamodb_install import DYNAMODB_LOCAL_DIR_ENV, find_dynamodb_local

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: What the wheel is built from (pyproject's packages.find and readme).
SOURCES = ("pyproject.toml", "README.md", "whimbrel", "lambdas")


def _run(argv: list[str], *, env: dict[str, str], cwd: Path,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, (
        f"{' '.join(argv)}: exit {done.returncode}\nstdout: {done.stdout[-3000:]}\n"
        f"stderr: {done.stderr[-3000:]}")
    return done


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh virtualenv with only the wheel and its base dependencies; its bin folder
    and the environment to run it in."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
           and not k.startswith(("AWS_", "WHIMBREL_"))}
    env.update({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "COLUMNS": "100",
                # The jar the test session already has: dev and demo need not fetch it.
                DYNAMODB_LOCAL_DIR_ENV: str(find_dynamodb_local()),
                "AWS_EC2_METADATA_DISABLED": "true"})
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
          str(src)], env=env, cwd=tmp)
    [wheel] = dist.glob("whimbrel-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], env=env, cwd=tmp)
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
         env=env, cwd=tmp)
    return venv / "bin", env


def test_the_wheel_installs_a_working_cli(installed: tuple[Path, dict[str, str]],
                                         tmp_path: Path) -> None:
    bin_, env = installed
    whimbrel = str(bin_ / "whimbrel")
    where = _run([str(bin_ / "python"), "-c", "import whimbrel; print(whimbrel.__file__)"],
                 env=env, cwd=tmp_path).stdout
    assert where.startswith(str(bin_.parent)), where  # the wheel's copy, not this checkout

    helped = _run([whimbrel, "--help"], env=env, cwd=tmp_path).stdout
    assert "Usage: whimbrel" in helped and "worker" in helped and "--version" in helped
    assert "<bool>" not in helped

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _run([whimbrel, "--version"], env=env, cwd=tmp_path).stdout == (
        f"whimbrel {version}\n")

    demo = _run([whimbrel, "demo", "--seconds", "0.05"], env=env, cwd=tmp_path).stdout
    assert "COMPLETED — output of load" in demo


def test_the_wheels_dev_starts_answers_and_stops(installed: tuple[Path, dict[str, str]],
                                                 tmp_path: Path) -> None:
    bin_, env = installed
    port = _free_port()
    log = tmp_path / "dev.log"
    with log.open("w") as err:
        proc = subprocess.Popen([str(bin_ / "whimbrel"), "dev", "--port", str(port)],
                                env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=err,
                                text=True)
        guard = threading.Timer(180, proc.kill)  # a dev that never starts fails, not hangs
        guard.start()
        try:
            assert proc.stdout is not None
            banner = ""
            while "Ctrl-C stops." not in banner:
                line = proc.stdout.readline()
                assert line, f"whimbrel dev ended early:\n{banner}{log.read_text()}"
                banner += line
            guard.cancel()
            endpoint = f"http://127.0.0.1:{port}"
            assert f"export WHIMBREL_ENDPOINT_URL={endpoint}\n" in banner
            # It answers: its tables are there, on the DynamoDB Local it started.
            ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                               aws_access_key_id="x", aws_secret_access_key="x")
            tables = ddb.list_tables()["TableNames"]
            assert "whimbrel_workflow_request" in tables, tables
            proc.send_signal(signal.SIGINT)  # Ctrl-C
            assert proc.wait(timeout=60) == 0, log.read_text()
        finally:
            guard.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
