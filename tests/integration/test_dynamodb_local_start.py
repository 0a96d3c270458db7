"""Starting DynamoDB Local on a busy machine, and on loopback only (issue 20, items 8, 10).

The retry tests put a fake ``java`` first (through ``JAVA_HOME``): it fails or hangs on
its first call and runs the real thing after, so the real :meth:`DynamoDBLocal.start`
takes its retry path. The binding tests look at the socket the JVM opened and try to
connect to it from another address of this machine.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from whimbrel.local.dynamodb_install import find_dynamodb_local, install_dynamodb_local
from whimbrel.local.dynamodb_launcher import ALL_INTERFACES
from whimbrel.local.dynamodb_local import LOOPBACK, DynamoDBLocal, DynamoDBLocalError
from whimbrel.testing import SharedDynamoDBLocal, wait_until

REAL_JAVA = shutil.which("java") or "java"

#: A stand-in for DynamoDB Local that answers every request with an empty ListTables.
FAKE_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"TableNames": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def fake_java(tmp_path: Path, first: str, then: str) -> tuple[Path, Path]:
    """A JAVA_HOME whose ``bin/java`` runs ``first`` on its first call, ``then`` after.

    Returns the JAVA_HOME and the file counting the calls.
    """
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    calls = tmp_path / "calls"
    (tmp_path / "fake_server.py").write_text(FAKE_SERVER)
    script = home / "bin" / "java"
    script.write_text(f"""#!/bin/sh
n=$(cat {calls} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {calls}
port=""; prev=""
for a in "$@"; do [ "$prev" = "-port" ] && port=$a; prev=$a; done
if [ $n -eq 1 ]; then {first}; else {then}; fi
""")
    script.chmod(0o755)
    return home, calls


ACTIONS = {
    "crash": "echo 'simulated JVM crash' >&2; exit 3",
    "hang": "exec sleep 600",
    "real": f'exec {REAL_JAVA} "$@"',
    "fake": f'exec {sys.executable} {{server}} "$port"',
}


def _action(name: str, tmp_path: Path) -> str:
    return ACTIONS[name].replace("{server}", str(tmp_path / "fake_server.py"))


@pytest.fixture(scope="module")
def jar_dir() -> Path:
    return install_dynamodb_local(find_dynamodb_local())


def _list_tables(endpoint: str) -> list[str]:
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x")
    names: list[str] = client.list_tables()["TableNames"]
    return names


def test_a_jvm_that_dies_at_start_is_started_once_more(
        tmp_path: Path, jar_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, calls = fake_java(tmp_path, _action("crash", tmp_path), _action("real", tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(home))
    with DynamoDBLocal(directory=jar_dir) as ddb:
        assert isinstance(_list_tables(ddb.endpoint_url), list)  # the real server answers
    assert calls.read_text().strip() == "2"


def test_a_jvm_that_hangs_at_start_is_killed_and_started_once_more(
        tmp_path: Path, jar_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, calls = fake_java(tmp_path, _action("hang", tmp_path), _action("fake", tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(home))
    with DynamoDBLocal(directory=jar_dir, start_timeout=3) as ddb:
        assert _list_tables(ddb.endpoint_url) == []
    assert calls.read_text().strip() == "2"


def test_two_failed_starts_give_the_error_with_the_log(
        tmp_path: Path, jar_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, calls = fake_java(tmp_path, _action("crash", tmp_path), _action("crash", tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(DynamoDBLocalError, match="simulated JVM crash"):
        DynamoDBLocal(directory=jar_dir).start()
    assert calls.read_text().strip() == "2"


def test_a_failed_shared_start_fails_one_test_and_the_next_one_starts_it(
        tmp_path: Path, jar_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, _calls = fake_java(tmp_path, _action("crash", tmp_path), _action("real", tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(home))
    with SharedDynamoDBLocal(factory=lambda: DynamoDBLocal(
            directory=jar_dir, start_attempts=1)) as shared:
        with pytest.raises(DynamoDBLocalError, match="simulated JVM crash"):
            shared.endpoint_url()  # the first test's fixture fails...
        endpoint = shared.endpoint_url()  # ...the next one gets a server
        assert isinstance(_list_tables(endpoint), list)
        assert shared.endpoint_url() == endpoint  # and keeps it
        assert shared.failed_starts == 1


def test_shared_starts_are_bounded(tmp_path: Path, jar_dir: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    home, calls = fake_java(tmp_path, _action("crash", tmp_path), _action("crash", tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(home))
    with SharedDynamoDBLocal(factory=lambda: DynamoDBLocal(directory=jar_dir, start_attempts=1),
                             max_failed_starts=2) as shared:
        for _ in range(2):
            with pytest.raises(DynamoDBLocalError, match="simulated JVM crash"):
                shared.endpoint_url()
        with pytest.raises(DynamoDBLocalError, match="failed to start 2 times"):
            shared.endpoint_url()
    assert calls.read_text().strip() == "2"  # the third asked, but nothing was launched


# -- loopback -------------------------------------------------------------------------


def other_address() -> str | None:
    """A non-loopback IPv4 address of this machine, if it has one."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True,
                         check=False).stdout
    for addr in out.split():
        if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", addr) and not addr.startswith("127."):
            return addr
    return None


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on ``port`` (from ``ss``)."""
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                         text=True, check=True).stdout
    return {line.split()[3].rsplit(":", 1)[0] for line in out.splitlines() if line.strip()}


def connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def test_dynamodb_local_listens_on_loopback_only_by_default(jar_dir: Path) -> None:
    with DynamoDBLocal(directory=jar_dir) as ddb:
        assert ddb.host == LOOPBACK
        bound = listening_addresses(ddb.port)
        assert bound and bound <= {"127.0.0.1", "[::ffff:127.0.0.1]"}, bound
        assert connects("127.0.0.1", ddb.port)
        other = other_address()
        if other is not None:
            assert not connects(other, ddb.port), f"reachable at {other}:{ddb.port}"


def test_all_interfaces_only_when_asked(jar_dir: Path) -> None:
    """The check above can fail: with host 0.0.0.0 the other address answers."""
    with DynamoDBLocal(directory=jar_dir, host=ALL_INTERFACES) as ddb:
        assert listening_addresses(ddb.port) & {"*", "0.0.0.0", "[::]", "[::ffff:0.0.0.0]"}
        other = other_address()
        if other is not None:
            assert connects(other, ddb.port)


def test_the_launcher_indexes_the_stream_tables_and_streams_still_answer(
        jar_dir: Path) -> None:
    """The launcher adds indexes to DynamoDB Local's SQLite stream tables (its log says
    so); a stream read through them gives every record, in order, per table."""
    with DynamoDBLocal(directory=jar_dir) as ddb:
        assert ddb.log_path is not None
        log_path = ddb.log_path
        wait_until(lambda: "whimbrel: stream indexes added" in log_path.read_text(),
                   timeout=60, message=lambda: log_path.read_text()[-2000:])
        client = boto3.client("dynamodb", endpoint_url=ddb.endpoint_url)
        streams = boto3.client("dynamodbstreams", endpoint_url=ddb.endpoint_url)
        arns = {}
        for table in ("first", "second"):
            arns[table] = client.create_table(
                TableName=table, BillingMode="PAY_PER_REQUEST",
                KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
            )["TableDescription"]["LatestStreamArn"]
        for i in range(30):  # interleaved, so each stream's records are not contiguous
            for table in ("first", "second"):
                client.put_item(TableName=table, Item={"k": {"S": f"{table}-{i:02}"}})
        for table, arn in arns.items():
            shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
            iterator = streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"],
                ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            keys = [r["dynamodb"]["Keys"]["k"]["S"]
                    for r in streams.get_records(ShardIterator=iterator)["Records"]]
            assert keys == [f"{table}-{i:02}" for i in range(30)]
