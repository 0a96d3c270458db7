"""DynamoDB Local's request time as stream records pile up, with and without the indexes
Whimbrel's launcher adds to its SQLite stream tables (whimbrel/local/dynamodb_launcher.py).

    python -m benchmarks.probe_stream_index [--records 20000,60000] [--ops 200]

For each server (the jar as shipped, bound to every interface; then through the launcher,
with the indexes), it writes stream records into one table in batches and, at each size,
times GetItem + PutItem pairs on a table created just then (its stream's records come
after every other, the case the missing index makes slowest). Prints ms per request.
"""

from __future__ import annotations

import argparse
import itertools
import time
from typing import Any

import boto3

from whimbrel.local.dynamodb_install import find_dynamodb_local, install_dynamodb_local
from whimbrel.local.dynamodb_launcher import ALL_INTERFACES
from whimbrel.local.dynamodb_local import LOOPBACK, SHORT_LIVED_JVM, DynamoDBLocal, local_env


def _table(client: Any, name: str) -> None:
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})


def probe(host: str, sizes: list[int], ops: int) -> list[tuple[int, float]]:
    out: list[tuple[int, float]] = []
    names = (f"probe{i}" for i in itertools.count())
    with DynamoDBLocal(directory=install_dynamodb_local(find_dynamodb_local()),
                       host=host, java_options=SHORT_LIVED_JVM) as ddb:
        env = local_env(ddb.endpoint_url)
        client = boto3.client(
            "dynamodb", endpoint_url=f"http://{LOOPBACK}:{ddb.port}",
            region_name=env["AWS_REGION"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
        _table(client, "big")
        written = 0
        for size in [0, *sizes]:
            while written < size:
                client.batch_write_item(RequestItems={"big": [
                    {"PutRequest": {"Item": {"k": {"S": f"{written + j}"}}}}
                    for j in range(25)]})
                written += 25
            name = next(names)
            _table(client, name)
            started = time.perf_counter()
            for i in range(ops):
                client.get_item(TableName=name, Key={"k": {"S": str(i)}})
                client.put_item(TableName=name, Item={"k": {"S": str(i)}})
            out.append((size, (time.perf_counter() - started) / (2 * ops) * 1000))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="20000,60000",
                        help="comma list of stream-record counts to measure at")
    parser.add_argument("--ops", type=int, default=200, help="GetItem+PutItem pairs per size")
    args = parser.parse_args()
    sizes = [int(s) for s in args.records.split(",") if s]
    shipped = probe(ALL_INTERFACES, sizes, args.ops)
    indexed = probe(LOOPBACK, sizes, args.ops)
    print("| stream records elsewhere | as shipped, ms/request | with the indexes |")
    print("|---:|---:|---:|")
    for (size, a), (_, b) in zip(shipped, indexed, strict=True):
        print(f"| {size:,} | {a:.1f} | {b:.1f} |")


if __name__ == "__main__":
    main()
