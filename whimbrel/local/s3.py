"""A local S3 endpoint for large payloads: moto's server, as DynamoDB Local stands in for
DynamoDB (``whimbrel dev`` and the test suite).

moto is not a dependency of the library (a deployed Whimbrel talks to S3 itself): it
comes with the ``local`` extra (``pip install 'whimbrel[local]'``) and with ``dev``.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from whimbrel.contract.errors import WhimbrelError

__all__ = ["DEFAULT_DEV_BUCKET", "DEV_S3_PORT", "LocalS3", "MotoMissing", "S3PortInUse"]

#: The port ``whimbrel dev`` serves S3 on beside DynamoDB Local's 8000 (stable, so the
#: printed export lines stay valid across restarts).
DEV_S3_PORT = 8001
#: The bucket ``whimbrel dev`` creates and points ``WHIMBREL_PAYLOAD_BUCKET`` at.
DEFAULT_DEV_BUCKET = "whimbrel-payloads"


class MotoMissing(WhimbrelError):
    """The local S3 endpoint needs moto's server, which is not installed."""


class S3PortInUse(WhimbrelError):
    """The local S3 endpoint's port is taken."""


class LocalS3:
    """moto's S3 server on 127.0.0.1 (a free port unless given), started by
    :meth:`start` and stopped by :meth:`stop` (or as a context manager).

    Raises:
        MotoMissing: moto[server] is not installed (on :meth:`start`).
        S3PortInUse: the port is taken (on :meth:`start`).
    """

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self._server: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> LocalS3:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:
            raise MotoMissing(
                "the local S3 endpoint needs moto's server: pip install 'whimbrel[local]' "
                f"(or moto[server]); or point AWS_ENDPOINT_URL_S3 at an S3 of your own "
                f"({exc})") from None
        # Bind first: moto's server thread dies on a taken port and its start() would
        # then wait forever.
        with socket.socket() as sock:
            try:
                sock.bind((self.host, self.port))
            except OSError:
                raise S3PortInUse(f"port {self.port} is already in use (another `whimbrel "
                                  "dev` may serve S3 there); choose another with --s3-port "
                                  "N (0: any free port)", port=self.port) from None
            self.port = int(sock.getsockname()[1])
        # moto's server logs every request on stderr through werkzeug: not dev's output.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port,
                                          verbose=False)
        self._server.start()
        return self

    def create_bucket(self, name: str = DEFAULT_DEV_BUCKET, region: str = "us-east-1") -> str:
        """Create ``name`` on this endpoint (idempotent); returns it."""
        import boto3

        client = boto3.client("s3", endpoint_url=self.url, region_name=region)
        try:
            if region == "us-east-1":
                client.create_bucket(Bucket=name)
            else:
                client.create_bucket(Bucket=name, CreateBucketConfiguration={
                    "LocationConstraint": region})
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        return name

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
