"""Serving the console with uvicorn: in the foreground (``whimbrel ui``) or on a thread
(tests, scripts)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn


class ConsoleServer:
    """One uvicorn server for an ASGI app.

    Args:
        app: the console (``create_app``).
        host: interface to bind.
        port: TCP port; 0 picks a free one (read :attr:`port` once started).
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 8080) -> None:
        self.host = host
        self.server = uvicorn.Server(uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False,
            lifespan="off", server_header=False))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (after start)."""
        for server in getattr(self.server, "servers", ()):  # set once started
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return int(self.server.config.port)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self) -> None:
        """Serve in this thread until Ctrl-C / SIGTERM."""
        self.server.run()

    def start(self, timeout: float = 15.0) -> ConsoleServer:
        """Serve on a daemon thread; returns once it accepts connections.

        Raises:
            RuntimeError: it did not start within ``timeout`` seconds.
        """
        self._thread = threading.Thread(target=self.server.run, name="whimbrel-console",
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the console did not start on {self.host}")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
