"""Issue 27, compression: how a payload's JSON is kept as an object (store/blob_codec.py)."""

from __future__ import annotations

import gzip
import json

import pytest

from whimbrel.store.blob_codec import KEEP_RATIO, decode, encode


def _listing(n: int) -> str:
    return json.dumps([{"Key": f"raw/2026/11/events-{i:07d}.parquet", "Size": i * 7919,
                        "StorageClass": "STANDARD"} for i in range(n)])


def test_json_that_shrinks_is_kept_gzipped_and_read_back_whole() -> None:
    text = _listing(2_000)
    body, gzipped = encode(text)
    assert gzipped and len(body) <= len(text) * KEEP_RATIO
    assert decode(body) == text


def test_the_same_text_gives_the_same_bytes() -> None:
    # A redelivered write puts the same object (no timestamp in the gzip header).
    text = _listing(500)
    assert encode(text) == encode(text)


def test_what_does_not_shrink_and_what_is_asked_plain_stays_plain() -> None:
    assert encode("[1]") == (b"[1]", False)  # gzip's header would make it larger
    text = _listing(500)
    assert encode(text, compress=False) == (text.encode(), False)


def test_plain_objects_and_any_gzip_are_read() -> None:
    # Objects written before compression, or by a raw row's own tool (gzip at any level,
    # with a timestamp), are read alike: JSON never starts with gzip's magic number.
    text = '{"a": "é"}'
    assert decode(text.encode()) == text
    assert decode(gzip.compress(text.encode(), compresslevel=9)) == text


@pytest.mark.parametrize("body, says", [
    (b"\x1f\x8b\x08\x00broken", "corrupt gzip data"),
    (gzip.compress(b"\xff\xfe", mtime=0), "not UTF-8 JSON text"),
    (b"\xff\xfe", "not UTF-8 JSON text"),
], ids=["broken-gzip", "gzip-of-non-utf8", "non-utf8"])  # ids the same in every worker
def test_a_corrupt_body_is_a_clear_error(body: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        decode(body)
