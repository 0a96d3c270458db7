"""``whimbrel dev``: the local runtime as a foreground process, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from whimbrel.engine import tracing
from whimbrel.launch.modules import code_workflows, import_modules, module_names
from whimbrel.local.dynamodb_local import (
    LOOPBACK,
    DynamoDBLocal,
    find_dynamodb_local,
    install_dynamodb_local,
)
from whimbrel.local.runtime import DEV_PORT, LocalRuntime
from whimbrel.local.s3 import DEFAULT_DEV_BUCKET, LocalS3, MotoMissing
from whimbrel.settings import ENV_PAYLOAD_BUCKET

__all__ = ["import_dev_modules", "run_dev"]


def import_dev_modules(names: Sequence[str]) -> list[ModuleType]:
    """Import ``whimbrel dev --module`` modules, from the current folder first (a console
    script's ``sys.path`` starts at its own folder: dev runs the python code of the
    project it was started in, as ``whimbrel worker`` and ``python -m`` do).

    Raises:
        InvalidInput: a name that is no module name, or a module that cannot be imported.
    """
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return import_modules(module_names(names, field="--module"), what="whimbrel dev "
                          "--module", field="--module")


def run_dev(endpoint_url: str | None, table_prefix: str, heartbeat_rate_seconds: float, *,
            port: int = DEV_PORT, data_dir: Path | None = None,
            events_file: Path | None = None, host: str = LOOPBACK,
            s3_port: int | None = None, modules: Sequence[ModuleType] = ()) -> None:
    """Run the local runtime until Ctrl-C or SIGTERM (``whimbrel dev``).

    Without ``endpoint_url`` it serves DynamoDB Local on ``port``; with ``data_dir`` the
    tables live in that folder (DynamoDB Local's ``-dbPath``) and outlive the process,
    otherwise they are in memory and gone at stop. It listens on ``host`` (loopback by
    default: ``0.0.0.0`` lets anyone who reaches the machine in). With ``events_file`` the notify
    consumers append every event to it as JSON lines. It also serves S3 (moto's server,
    on loopback, ``s3_port``; 0: any free port) with the bucket ``whimbrel-payloads`` for
    large payloads, unless ``s3_port`` is None or moto is not installed (then payloads
    keep today's limits, and it says so). The code workflows defined in ``modules``
    (:func:`import_dev_modules`) are registered once the tables are there.

    Raises:
        PortInUse: ``port`` is taken.
        DynamoDBLocalError: DynamoDB Local could not be fetched or started.
    """
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    # The standard OTEL_* variables, when set, make dev export the spans of every
    # handler, sweep and activity it runs (docs/operations.md, "Tracing").
    traced = tracing.export_from_env("whimbrel-dev") is not None
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    ddb: DynamoDBLocal | None = None
    s3: LocalS3 | None = None
    s3_note = ""
    try:
        if s3_port is not None:
            try:
                s3 = LocalS3(s3_port).start()
            except MotoMissing as exc:
                s3_note = f"  large payloads: none ({exc})"
        bucket = None
        if s3 is not None:
            bucket = s3.create_bucket(DEFAULT_DEV_BUCKET)
            # This process's own clients (the runtime's, its activities') use them too.
            os.environ["AWS_ENDPOINT_URL_S3"] = s3.url
            os.environ[ENV_PAYLOAD_BUCKET] = bucket
        if endpoint_url is None:
            ddb = DynamoDBLocal(port, in_memory=data_dir is None, db_path=data_dir, host=host,
                                directory=install_dynamodb_local(find_dynamodb_local()))
            endpoint_url = ddb.start().endpoint_url
        with LocalRuntime(endpoint_url, table_prefix, heartbeat_rate_seconds,
                          lambda_log_level="WARNING", events_file=events_file,
                          sleep=stop.wait, say=lambda text: print(text, flush=True),
                          payload_bucket=bucket) as rt:
            flows = code_workflows(modules)
            for flow in flows:
                rt.client.register_workflow(flow)
            print(f"whimbrel dev: DynamoDB at {rt.endpoint_url}, tables {table_prefix}*")
            print(f"  export WHIMBREL_ENDPOINT_URL={rt.endpoint_url}")
            print(f"  export WHIMBREL_TABLE_PREFIX={table_prefix}")
            if rt.migrated:
                print(f"  moved {rt.migrated} run(s) of earlier data onto the write-sharded "
                      "listing keys (whimbrel tables migrate)")
            if s3 is not None:
                print(f"  export AWS_ENDPOINT_URL_S3={s3.url}")
                print(f"  export {ENV_PAYLOAD_BUCKET}={bucket}")
                print("  large payloads: over 16 KB kept in that local S3 (in memory, "
                      "gone when this stops" + (": runs kept in --data-dir lose them)"
                                                if data_dir else ")"))
            elif s3_note:
                print(s3_note)
            if events_file is not None:
                print(f"  export WHIMBREL_EVENTS_FILE={events_file}")
                print("  events: appended there as JSON lines (whimbrel notifications --follow)")
            if ddb is not None:
                print(f"  listening on {ddb.host}:{ddb.port}" + (
                    "" if ddb.host == LOOPBACK else
                    " -- WARNING: not loopback; anyone who reaches it can read and write "
                    "every table"))
                print(f"  data: {data_dir} (kept across restarts)" if data_dir else
                      "  data: in memory, gone when this stops (keep it with --data-dir DIR)")
            if modules:
                print(f"  modules: {', '.join(m.__name__ for m in modules)} (code workflows "
                      f"registered: {', '.join(f.name for f in flows) or 'none'})")
            if traced:
                print(f"  tracing: spans exported ({tracing.describe_export()})")
            print(f"  streams: {', '.join(rt.pumps)}; heartbeat every "
                  f"{heartbeat_rate_seconds:g} s. Ctrl-C stops.", flush=True)
            try:
                while not stop.wait(0.2) and not rt.stopped:
                    pass
            except KeyboardInterrupt:
                pass
            print("whimbrel dev: stopping" + (
                " (another whimbrel dev took these tables over)" if rt.stopped and
                not stop.is_set() else ""), flush=True)
    finally:
        if traced:
            tracing.flush()  # the last batch, before the tables may go
        if ddb is not None:
            ddb.stop()
        if s3 is not None:
            s3.stop()
        signal.signal(signal.SIGTERM, previous)
