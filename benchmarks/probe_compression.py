"""Does compressing payloads pay (issue 27)? gzip's ratio and CPU cost on realistic JSON.

    python -m benchmarks.probe_compression [--repeats 5]

Payloads shaped like what workflows pass (deterministic, seeded): an S3 listing (keys,
sizes, ETags, dates — what feeds a map), API records (orders with nested customers and
line items), a list of 100,000 ids, log lines, and random base64 (an already-compressed
attachment: the worst case). For each, at the level the store uses
(``whimbrel.store.blob_codec.GZIP_LEVEL``) and at levels 1, 6 (zlib's default) and 9:
the size ratio, and the CPU time to compress and to decompress one MB of JSON (best of
``--repeats``, one thread of this machine). S3 bills storage and transfer out of the
region by the byte, requests the same whatever the size; in a region a smaller object
mostly saves transfer time (~10-20 ms per MB at S3's ~50-100 MB/s per connection).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import random
import time
from collections.abc import Callable
from typing import Any

from whimbrel.store.blob_codec import GZIP_LEVEL

MB = 1_000_000


def s3_listing(rng: random.Random, n: int = 10_000) -> Any:
    return [{"Key": f"raw/2026/11/{rng.randrange(1, 29):02d}/events-{i:07d}.parquet",
             "Size": rng.randrange(10_000, 90_000_000),
             "ETag": f'"{rng.getrandbits(128):032x}"',
             "LastModified": f"2026-11-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:"
                             f"{rng.randrange(60):02d}:{rng.randrange(60):02d}+00:00",
             "StorageClass": "STANDARD"} for i in range(n)]


def orders(rng: random.Random, n: int = 3_000) -> Any:
    names = ["Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Frances"]
    skus = [f"SKU-{rng.randrange(10**6):06d}" for _ in range(500)]
    return [{"order_id": f"ord_{rng.getrandbits(64):016x}", "status": rng.choice(
        ["paid", "shipped", "refunded", "pending"]),
        "customer": {"id": rng.randrange(10**7), "name": rng.choice(names),
                     "email": f"user{rng.randrange(10**6)}@example.com",
                     "country": rng.choice(["DE", "FR", "US", "JP", "BR"])},
        "lines": [{"sku": rng.choice(skus), "qty": rng.randrange(1, 5),
                   "unit_price": round(rng.uniform(1, 300), 2)}
                  for _ in range(rng.randrange(1, 6))],
        "created": 1_790_000_000 + rng.randrange(10**7)} for _ in range(n)]


def ids(rng: random.Random, n: int = 100_000) -> Any:
    return [f"item-{rng.getrandbits(40):010x}" for _ in range(n)]


def logs(rng: random.Random, n: int = 8_000) -> Any:
    levels = ["INFO", "INFO", "INFO", "WARN", "ERROR"]
    return [f"2026-11-27T{rng.randrange(24):02d}:{rng.randrange(60):02d}:"
            f"{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z {rng.choice(levels)} "
            f"worker-{rng.randrange(32)} request {rng.getrandbits(64):016x} took "
            f"{rng.randrange(1, 900)} ms path=/api/v1/items/{rng.randrange(10**5)}"
            for _ in range(n)]


def random_base64(rng: random.Random, n: int = MB) -> Any:
    return {"attachment": base64.b64encode(rng.randbytes(n * 3 // 4)).decode()}


SHAPES: dict[str, Callable[[random.Random], Any]] = {
    "S3 listing (10,000 keys)": s3_listing,
    "orders (3,000 records)": orders,
    "ids (100,000 strings)": ids,
    "log lines (8,000)": logs,
    "random base64 (1 MB)": random_base64,
}


def _best(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def measure(repeats: int) -> list[dict[str, Any]]:
    rows = []
    for name, make in SHAPES.items():
        body = json.dumps(make(random.Random(27)), separators=(",", ":")).encode()
        mbs = len(body) / MB
        for level in sorted({1, 6, 9, GZIP_LEVEL}):
            packed = gzip.compress(body, compresslevel=level, mtime=0)
            rows.append({
                "payload": name, "bytes": len(body), "level": level,
                "ratio": len(packed) / len(body),
                "compress_ms_per_mb": 1000 * _best(
                    lambda b=body, lv=level: gzip.compress(b, compresslevel=lv, mtime=0),
                    repeats) / mbs,
                "decompress_ms_per_mb": 1000 * _best(
                    lambda p=packed: gzip.decompress(p), repeats) / mbs,
            })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("| payload | JSON bytes | gzip level | compressed/raw | compress ms/MB "
          "| decompress ms/MB |\n|---|---|---|---|---|---|")
    for r in measure(args.repeats):
        print(f"| {r['payload']} | {r['bytes']:,} | {r['level']} | {r['ratio']:.3f} "
              f"| {r['compress_ms_per_mb']:.1f} | {r['decompress_ms_per_mb']:.1f} |")


if __name__ == "__main__":
    main()
