"""A newcomer's first steps: no AWS credentials, ``whimbrel dev`` and ``whimbrel demo``.

The no-credentials tests run the real ``whimbrel`` console script in a child process
whose environment has no AWS variable at all and whose shared credentials and config
files are empty, as on a machine where AWS was never set up.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli_helpers import FANOUT_YAML, Run
from typer.testing import CliRunner

from whimbrel.cli import app
from whimbrel.local.credentials import (
    DUMMY_CREDENTIAL,
    is_local_endpoint,
    supply_local_credentials,
)
from whimbrel.local.runtime import DEV_PORT
from whimbrel.testing import wait_until

WHIMBREL = str(Path(sys.executable).with_name("whimbrel"))
TESTS = str(Path(__file__).resolve().parents[1])
AWS_HOST = "https://dynamodb.us-east-1.amazonaws.com"


@pytest.fixture
def bare_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine where AWS was never configured."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "WHIMBREL_", "POWERTOOLS_"))
           or k == "WHIMBREL_DYNAMODB_LOCAL_DIR"}  # where the jar is: not AWS set-up
    for name in ("credentials", "config"):
        (tmp_path / f"aws-{name}").write_text("")
    env.update({
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws-credentials"),
        "AWS_CONFIG_FILE": str(tmp_path / "aws-config"),
        # Keeps today's failure quick: boto3 would otherwise ask EC2's metadata service.
        "AWS_EC2_METADATA_DISABLED": "true",
        # wb_test_activities, for the python activities; and this checkout's whimbrel.
        "PYTHONPATH": os.pathsep.join([TESTS, str(Path(TESTS).parent)]),
        "COLUMNS": "200",
    })
    return env


def whimbrel(env: dict[str, str], *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """Run the installed ``whimbrel`` console script."""
    done = subprocess.run([WHIMBREL, *args], env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == code, (
        f"whimbrel {' '.join(args)}: exit {done.returncode} != {code}\n"
        f"stdout: {done.stdout}\nstderr: {done.stderr}")
    return done


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def dev_server(env: dict[str, str], log: Path, *args: str,
               pids: list[int] | None = None, cwd: Path | None = None) -> Iterator[str]:
    """``whimbrel dev ARGS`` in a child process (in ``cwd``); yields its banner, stops it
    with SIGTERM. Its pid is appended to ``pids``."""
    with log.open("w") as err:
        proc = subprocess.Popen([WHIMBREL, "dev", "--heartbeat-rate", "1", *args], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True, cwd=cwd)
        if pids is not None:
            pids.append(proc.pid)
        # A dev that never prints its banner must not hang the suite.
        guard = threading.Timer(120, proc.kill)
        guard.start()
        try:
            assert proc.stdout is not None
            banner = ""
            while "Ctrl-C stops." not in banner:
                line = proc.stdout.readline()
                assert line, f"whimbrel dev ended early:\n{banner}{log.read_text()}"
                banner += line
            guard.cancel()
            yield banner
            proc.terminate()
            assert proc.wait(timeout=60) == 0, log.read_text()
        finally:
            guard.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_first_steps_need_no_credentials(bare_env: dict[str, str], tmp_path: Path,
                                         table_prefix: str,
                                         write_definition: Callable[..., Path]) -> None:
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {**bare_env, "WHIMBREL_TABLE_PREFIX": table_prefix}
    events = tmp_path / "events.jsonl"
    with dev_server(env, tmp_path / "dev.log", "--port", str(port),
                    "--events-file", str(events)) as banner:
        assert f"export WHIMBREL_ENDPOINT_URL={endpoint}\n" in banner
        assert "data: in memory, gone when this stops (keep it with --data-dir DIR)" in banner
        assert f"export WHIMBREL_EVENTS_FILE={events}\n" in banner
        env["WHIMBREL_ENDPOINT_URL"] = endpoint
        whimbrel(env, "definitions", "register", str(write_definition(FANOUT_YAML)))
        # Through dev's workflow_request stream handler; the activities run in dev.
        run = json.loads(whimbrel(env, "submit", "fanout", "--simple", "--request-id",
                                  "first-try", "--wait", "--timeout", "60", "--json").stdout)
        assert run["state"] == "COMPLETED"
        # dev's notify consumer told of the end; `whimbrel notifications` reads it.
        env["WHIMBREL_EVENTS_FILE"] = str(events)
        ended = wait_until(lambda: whimbrel(env, "notifications", "--json").stdout, timeout=30)
        [event] = [json.loads(line) for line in ended.splitlines()]
        assert (event["detail-type"], event["detail"]["workflow_exec_id"]) == (
            "Workflow Ended", run["workflow_exec_id"])
        # The console script is whimbrel.cli:main with this argv (main() once read it
        # as the demo's own arguments and always failed).
        demo = whimbrel(env, "demo", "--seconds", "0.05").stdout
    assert "COMPLETED — output of load" in demo
    assert "'seconds': 0.05" in demo  # --seconds reached the activities
    # The activity table, once, in the DAG's order (not clean, enrich, extract, load).
    rows = [line.split("│")[1].strip() for line in demo.splitlines()
            if line.startswith("│") and "COMPLETED" in line]
    assert rows == ["extract", "clean", "enrich", "load"]
    assert demo.count("┃ activity ") == 1


def test_credentials_are_never_invented_for_aws(bare_env: dict[str, str]) -> None:
    for args in (("list",), ("list", "--endpoint-url", AWS_HOST)):
        result = whimbrel(bare_env, *args, code=6)
        assert "Unable to locate credentials" in result.stderr


@pytest.mark.parametrize(("url", "local"), [
    ("http://localhost:8000", True), ("http://127.0.0.1:8000", True),
    ("http://[::1]:8000", True), ("http://127.0.0.2", True),
    (AWS_HOST, False), ("http://10.0.0.5:8000", False), ("http://localhost.example.com", False),
    (None, False), ("", False), ("http://[::1", False),
])
def test_which_endpoints_are_local(url: str | None, local: bool) -> None:
    assert is_local_endpoint(url) is local


def test_configured_credentials_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-secret")
    assert supply_local_credentials("http://127.0.0.1:8000") is False
    assert os.environ["AWS_ACCESS_KEY_ID"] == "AKIAREALKEY"


def test_dummies_only_when_none_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "empty").write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "empty"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "empty"))
    assert supply_local_credentials(AWS_HOST) is False
    assert "AWS_ACCESS_KEY_ID" not in os.environ
    assert supply_local_credentials("http://localhost:8000") is True
    assert os.environ["AWS_ACCESS_KEY_ID"] == DUMMY_CREDENTIAL


def test_dev_data_dir_survives_a_restart(bare_env: dict[str, str], tmp_path: Path,
                                         table_prefix: str,
                                         write_definition: Callable[..., Path]) -> None:
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    data = tmp_path / "dev-data"
    env = {**bare_env, "WHIMBREL_TABLE_PREFIX": table_prefix}
    cli = Run(CliRunner(), {"WHIMBREL_ENDPOINT_URL": endpoint,
                            "WHIMBREL_TABLE_PREFIX": table_prefix, "COLUMNS": "200"})
    args = ("--port", str(port), "--data-dir", str(data))
    with dev_server(env, tmp_path / "dev1.log", *args) as banner:
        assert f"export WHIMBREL_ENDPOINT_URL={endpoint}\n" in banner
        assert f"data: {data} (kept across restarts)" in banner
        cli("definitions", "register", str(write_definition(FANOUT_YAML)))
        # Started by dev's workflow_request stream handler; its activities run in dev.
        first = cli.json("submit", "fanout", "--simple", "--request-id", "kept-1", "--wait",
                         "--timeout", "60")
        assert first["state"] == "COMPLETED"
    assert (data / "shared-local-instance.db").is_file()
    # Restarted in a shell that exported what dev printed: --data-dir still wins.
    env["WHIMBREL_ENDPOINT_URL"] = endpoint
    with dev_server(env, tmp_path / "dev2.log", *args):
        assert f"ignoring WHIMBREL_ENDPOINT_URL={endpoint}" in " ".join(
            (tmp_path / "dev2.log").read_text().split())
        again = cli.json("status", "--request-id", "kept-1")
        assert again["workflow_exec_id"] == first["workflow_exec_id"]
        assert again["state"] == "COMPLETED"
        assert [d["workflow_name"] for d in cli.json("definitions", "list")] == ["fanout"]
        assert cli.json("rejections") == []


def test_a_second_dev_on_the_same_tables_is_refused_naming_the_first(
        bare_env: dict[str, str], tmp_path: Path, table_prefix: str) -> None:
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {**bare_env, "WHIMBREL_TABLE_PREFIX": table_prefix}
    pids: list[int] = []
    with dev_server(env, tmp_path / "dev1.log", "--port", str(port), pids=pids):
        # Pointed at the first one's DynamoDB, the second would replay every stream.
        second = whimbrel(env, "dev", "--endpoint-url", endpoint, code=5)
        said = " ".join(second.stderr.split())
        assert said.startswith(f"error: another whimbrel dev already runs on tables "
                               f"{table_prefix}* at {endpoint}: pid {pids[0]} on "
                               f"{socket.gethostname()}, since "), said
        assert "Two would process every stream record twice" in said
        assert "streams:" not in second.stdout  # it started no pump
        refused = json.loads(whimbrel(env, "dev", "--endpoint-url", endpoint, "--json",
                                      code=5).stderr)
        assert refused["error"] == "DevAlreadyRunning" and refused["pid"] == pids[0]
        assert refused["since_epoch"] < refused["until_epoch"]
    # The first stopped and gave its lease back: a dev on those tables starts again.
    with dev_server(env, tmp_path / "dev2.log", "--port", str(port)) as banner:
        assert f"export WHIMBREL_TABLE_PREFIX={table_prefix}" in banner


def test_dev_refuses_a_taken_port_by_name() -> None:
    runner = CliRunner()
    env = {"WHIMBREL_ENDPOINT_URL": None, "COLUMNS": "200"}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["dev", "--port", str(port)], env=env)
    assert result.exit_code == 7, result.output
    said = " ".join(result.stderr.split())
    assert said.startswith(f"error: port {port} is already in use")
    assert "choose another with `whimbrel dev --port N`" in said
    assert f"--endpoint-url http://127.0.0.1:{port}" in said
    both = runner.invoke(app, ["dev", "--port", "9", "--endpoint-url", "http://127.0.0.1:9"],
                         env=env)
    assert both.exit_code == 2 and "--port, --host and --data-dir configure" in both.stderr


def test_dev_with_an_exported_endpoint_nobody_serves_says_what_to_do() -> None:
    endpoint = f"http://127.0.0.1:{_free_port()}"
    result = CliRunner().invoke(app, ["dev"], env={"WHIMBREL_ENDPOINT_URL": endpoint,
                                                   "COLUMNS": "200"})
    assert result.exit_code == 6, result.output
    assert " ".join(result.stderr.split()) == (
        f"error: nothing answers at {endpoint} (WHIMBREL_ENDPOINT_URL): unset it to let dev "
        f"start DynamoDB Local itself (on port {DEV_PORT}, or --port N)")


def test_dev_default_port_is_stable_and_documented() -> None:
    assert DEV_PORT == 8000
    text = " ".join(CliRunner().invoke(app, ["dev", "--help"],
                                       env={"COLUMNS": "200"}).stdout.split())
    assert "--port" in text and f"(default {DEV_PORT};" in text
    assert "--data-dir" in text and "across restarts" in text


def _other_address() -> str | None:
    """A non-loopback IPv4 address of this machine, if it has one."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True,
                         check=False).stdout
    return next((a for a in out.split() if a.count(".") == 3 and not a.startswith("127.")),
                None)


def _listening(port: int) -> set[str]:
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[3].rsplit(":", 1)[0] for line in out.splitlines() if line.strip()}


def _connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def test_dev_listens_on_loopback_only(bare_env: dict[str, str], tmp_path: Path) -> None:
    """Issue 20: dev's DynamoDB Local answered on every interface, so anyone who reached
    the machine could read runs and approve with raw rows."""
    port = _free_port()
    with dev_server(bare_env, tmp_path / "dev.log", "--port", str(port)) as banner:
        assert f"listening on 127.0.0.1:{port}\n" in banner
        bound = _listening(port)
        assert bound and bound <= {"127.0.0.1", "[::ffff:127.0.0.1]"}, bound
        assert _connects("127.0.0.1", port)
        other = _other_address()
        if other is not None:
            assert not _connects(other, port), f"dev answers at {other}:{port}"


def test_dev_host_opens_it_with_a_warning(bare_env: dict[str, str], tmp_path: Path) -> None:
    port = _free_port()
    with dev_server(bare_env, tmp_path / "dev.log", "--port", str(port),
                    "--host", "0.0.0.0") as banner:
        assert f"listening on 0.0.0.0:{port} -- WARNING: not loopback" in banner
        assert _listening(port) & {"*", "0.0.0.0", "[::]", "[::ffff:0.0.0.0]"}
        other = _other_address()
        if other is not None:
            assert _connects(other, port)
