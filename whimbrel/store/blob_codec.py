"""How a payload's JSON text is kept as an S3 object: gzip-compressed when that saves
enough (``docs/architecture.md``, "Large payloads": the ratio and CPU cost measured by
``python -m benchmarks.probe_compression``), else as it is.

The object says which it is twice: its key ends in ``.json.gz`` (the reference names
it, so a reader knows before the GET) and it carries ``Content-Encoding: gzip`` (an
HTTP client that downloads it gets the JSON). A reader decides by the bytes alone —
gzip's magic number, which no JSON text starts with — so objects written before
compression, objects a raw row names (``input_ref``/``output_ref``, written by any
tool) and a body some HTTP layer already decompressed are all read alike.
"""

from __future__ import annotations

import gzip
import zlib

__all__ = ["GZIP_LEVEL", "GZIP_SUFFIX", "KEEP_RATIO", "decode", "encode"]

#: zlib's level: 1 compresses realistic JSON almost as well as 6 at a fraction of the
#: CPU (probe_compression's figures).
GZIP_LEVEL = 1
#: Kept compressed only when at most this fraction of the JSON's bytes (random or
#: already-compressed data inside JSON does not shrink: it is kept as it is).
KEEP_RATIO = 0.9
GZIP_SUFFIX = ".json.gz"
_MAGIC = b"\x1f\x8b"


def encode(text: str, *, compress: bool = True) -> tuple[bytes, bool]:
    """The object's body for ``text``, and whether it is gzip (deterministic: the same
    text gives the same bytes, so a redelivered write puts the same object)."""
    raw = text.encode()
    if compress:
        packed = gzip.compress(raw, compresslevel=GZIP_LEVEL, mtime=0)
        if len(packed) <= len(raw) * KEEP_RATIO:
            return packed, True
    return raw, False


def decode(data: bytes) -> str:
    """An object's body as JSON text (gunzipped if it is gzip).

    Raises:
        ValueError: a corrupt gzip stream, or not UTF-8 (the caller names the object).
    """
    if data[:2] == _MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"corrupt gzip data ({exc})") from None
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 JSON text ({exc.reason})") from None
