"""What an idle python worker costs: requests per second and CPU seconds per second of
``Whimbrel.run_worker`` with nothing to claim (docs/operations.md, "Python workers").

    python -m benchmarks.idle_worker [--seconds 30] [--modules 1]

Starts DynamoDB Local (or uses ``--endpoint``), creates tables under a fresh prefix,
runs a worker for ``--modules`` modules on a thread for ``--seconds`` (after a 5 s
settling period, once the back-off has reached its longest pause), and prints the
requests its client made and the CPU time this process used, per second.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from whimbrel import Whimbrel
from whimbrel.local.dynamodb_install import find_dynamodb_local, install_dynamodb_local
from whimbrel.local.dynamodb_local import SHORT_LIVED_JVM, DynamoDBLocal, local_env
from whimbrel.testing import fresh_table_prefix

#: Modules that import anywhere: the worker imports each before it polls.
MODULES = ("json", "csv", "base64", "string")


def measure(endpoint: str, seconds: float, modules: int) -> tuple[float, float]:
    wb = Whimbrel(endpoint_url=endpoint, table_prefix=fresh_table_prefix())
    wb.create_tables()
    worker = threading.Thread(target=wb.run_worker, args=(list(MODULES[:modules]),))
    worker.start()
    try:
        time.sleep(5.0)  # the back-off reaches its longest pause
        calls0, cpu0, t0 = sum(wb.meter.calls.values()), time.process_time(), time.monotonic()
        time.sleep(seconds)
        calls, cpu, took = (sum(wb.meter.calls.values()) - calls0,
                            time.process_time() - cpu0, time.monotonic() - t0)
    finally:
        wb.stop()
        worker.join()
        wb.store.delete_tables()
        wb.close()
    return calls / took, cpu / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default=None)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--modules", type=int, default=1, choices=range(1, len(MODULES) + 1))
    args = parser.parse_args()
    if args.endpoint:
        rate, cpu = measure(args.endpoint, args.seconds, args.modules)
    else:
        with DynamoDBLocal(directory=install_dynamodb_local(find_dynamodb_local()),
                           java_options=SHORT_LIVED_JVM) as ddb:
            os.environ.update(local_env(ddb.endpoint_url))
            rate, cpu = measure(ddb.endpoint_url, args.seconds, args.modules)
    print(f"idle worker, {args.modules} module(s), {args.seconds:g} s: "
          f"{rate:.2f} requests/s, {cpu * 1000:.1f} ms CPU/s (this process)")


if __name__ == "__main__":
    main()
