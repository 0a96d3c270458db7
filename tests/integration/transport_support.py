"""A scripted DynamoDB stand-in on 127.0.0.1 (imported as a plain module): it answers
each request with the next scripted reply (a status and JSON body, a reset connection, or
a reply held back past the client's read timeout) and records what it received; and a
proxy stub that records the request line a client sends it."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OK_ITEM = {"Item": {"k": {"S": "v"}}}


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] = field(default_factory=lambda: dict(OK_ITEM))
    #: ``reset``: close the connection without answering; ``hold``: answer only when the
    #: server stops (after the client gave up on its read timeout).
    action: str | None = None


def error(status: int, code: str, message: str = "scripted", **extra: Any) -> Reply:
    return Reply(status, {"__type": f"com.amazonaws.dynamodb.v20120810#{code}",
                          "message": message, **extra})


@dataclass
class Seen:
    target: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeDynamo:
    """The scripted server; ``script`` is consumed in order, then every reply is 200."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.seen: list[Seen] = []
        self.release = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with fake._lock:
                    fake.seen.append(Seen(self.headers.get("X-Amz-Target", ""),
                                          dict(self.headers.items()),
                                          json.loads(raw or b"{}")))
                    reply = fake.script.pop(0) if fake.script else Reply()
                if reply.action == "reset":
                    # RST instead of FIN: the client sees "connection reset by peer".
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if reply.action == "hold":
                    fake.release.wait(30)
                    self.close_connection = True
                    return
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/x-amz-json-1.0")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def fake_dynamo() -> Iterator[FakeDynamo]:
    server = FakeDynamo()
    try:
        yield server
    finally:
        server.close()


class ProxyStub:
    """Records the first line of every request a client sends through it, and refuses it
    (``403``): enough to prove which proxy a client used and for what."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                self.lines.append(data.split(b"\r\n", 1)[0].decode("latin-1"))
                conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n"
                             b"Connection: close\r\n\r\n")

    def close(self) -> None:
        self._stop = True
        self.sock.close()
