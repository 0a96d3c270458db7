"""Stream records as plain data: DynamoDB JSON decoding that turns every malformed
value into ``InvalidInput`` naming the attribute, and the rejection log."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from whimbrel.contract.ddbjson import from_ddb
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.payloads import is_ref, parse_ref
from whimbrel.contract.records import RejectionRecord, day_of
from whimbrel.engine.ports import StorePort

#: How long a rejection row is kept (DynamoDB TTL).
REJECTION_TTL_SECONDS = 30 * 24 * 3600
_MAX_RECORD_CHARS = 100_000



@dataclass(frozen=True, slots=True)
class Binary:
    """A binary attribute of a raw row: never text (the parser refuses it where text is
    needed) and never a payload."""

    value: bytes


def _decoded(value: Any) -> Any:
    """``from_ddb``'s result with binary values kept apart from text."""
    if isinstance(value, bytes):
        return Binary(value)
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """DynamoDB-deserialized data as JSON-friendly Python (Decimal → int/float)."""
    if isinstance(value, Decimal):
        if not value.is_finite():  # a hand-made record may say {"N": "Infinity"}
            raise InvalidInput(f"number {value} is not finite", field="input")
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_plain(v) for v in value)
    if isinstance(value, bytes | bytearray | Binary):
        raise InvalidInput("binary attributes are not allowed in payloads", field="input")
    return value


def image_of(record: Mapping[str, Any], key: str = "NewImage") -> dict[str, Any]:
    """The record's ``dynamodb.NewImage`` (or ``key``) as plain Python values.

    Raises:
        InvalidInput: the record has no image, or the image is not DynamoDB JSON.
    """
    image = ddb_part(record).get(key)
    if not isinstance(image, Mapping):
        raise InvalidInput(f"stream record has no dynamodb.{key}", field=key)
    out: dict[str, Any] = {}
    for name, typed in image.items():
        try:
            out[str(name)] = _decoded(from_ddb(typed))
        except RecursionError:
            raise InvalidInput(f"attribute {name!r} is nested too deeply",
                               field=str(name)) from None
        except ValueError as exc:
            text = str(exc)
            if text.endswith("is not finite"):  # {"N": "Infinity"}
                raise InvalidInput(f"{name}: {text}", field=str(name)) from None
            if "beyond what DynamoDB can store" in text:  # {"N": "1e400"}, 39+ digits
                raise InvalidInput(f"attribute {name!r} holds a number DynamoDB cannot "
                                   f"store ({text})", field=str(name)) from None
            raise InvalidInput(f"attribute {name!r} is not DynamoDB JSON: {text}",
                               field=str(name)) from None
        except (TypeError, AttributeError) as exc:
            raise InvalidInput(f"attribute {name!r} is not DynamoDB JSON: {exc}",
                               field=str(name)) from None
    return out


def ddb_part(record: Mapping[str, Any]) -> Mapping[str, Any]:
    ddb = record.get("dynamodb")
    return ddb if isinstance(ddb, Mapping) else {}


def written_epoch(record: Mapping[str, Any]) -> float | None:
    """When DynamoDB wrote the row: the stream record's ``ApproximateCreationDateTime``
    (epoch seconds in Lambda's events; the local pump sets it likewise), or None when
    absent or not a number."""
    value = ddb_part(record).get("ApproximateCreationDateTime")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def native(value: Any, field: str) -> Any:
    """A native DynamoDB value (map, list, number, …) as plain Python data."""
    try:
        return _plain(value)
    except RecursionError:
        raise InvalidInput(f"{field} is nested too deeply", field=field) from None
    except InvalidInput as exc:
        raise InvalidInput(f"{field}: {exc}", field=field) from None


def payload(value: Any, field: str) -> Any:
    """A payload stored as JSON text or as a native DynamoDB value, as Python data."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except RecursionError:
            raise InvalidInput(f"{field} is nested too deeply", field=field) from None
        except ValueError as exc:
            raise InvalidInput(f"{field} is a string but not JSON: {exc}", field=field) from exc
    return native(value, field)


def row_payload(store: StorePort, value: Any, ref: str | None, field: str) -> Any:
    """A row's payload: ``value`` (JSON text or native), or the JSON of the S3 object
    its ``<field>_ref`` names, read now so that a bad reference rejects the row.

    Raises:
        InvalidInput: both given, a malformed reference, or an object that is not JSON.
        PayloadMissing: the object is missing or cannot be read (naming it).
    """
    if ref is None:
        if is_ref(value):  # a Whimbrel client's own row: its large value kept in S3
            return payload(store.payload_text(value, field), field)
        return payload(value, field)
    if value is not None:
        raise InvalidInput(f"give {field} or {field}_ref, not both", field=f"{field}_ref")
    parse_ref(ref, f"{field}_ref")
    return payload(store.payload_text(ref, f"{field}_ref"), f"{field}_ref")


def record_keys(record: Mapping[str, Any]) -> dict[str, str]:
    """Ids worth logging from a record's image, read without validation."""
    image = ddb_part(record).get("NewImage") or {}
    keys: dict[str, str] = {}
    if isinstance(image, Mapping):
        for name in ("workflow_request_id", "workflow_name", "workflow_exec_id",
                     "activity_exec_id", "activity_event_id", "transition"):
            typed = image.get(name)
            if isinstance(typed, Mapping) and isinstance(typed.get("S"), str):
                # Lone surrogates (only a hand-made event has them) cannot be logged.
                keys[name] = typed["S"].encode("utf-8", "backslashreplace").decode()[:1024]
    if "workflow_request_id" in keys and "workflow_exec_id" not in keys:
        try:
            keys["workflow_exec_id"] = workflow_exec_id_for(keys["workflow_request_id"])
        except InvalidInput:
            pass
    return keys


def _got(image: Mapping[str, Any], name: object) -> str:
    """What a raw item held in attribute ``name``, for a rejection message."""
    typed = image.get(name) if isinstance(name, str) else None
    if not isinstance(typed, Mapping) or len(typed) != 1:
        return ""
    tag, value = next(iter(typed.items()))
    if tag == "S" and isinstance(value, str):
        text = repr(value)
        return f" (got {text[:60]}{'...' if len(text) > 60 else ''})"
    return f" (got DynamoDB type {tag})"


def describe_validation(exc: ValidationError, record: Mapping[str, Any]) -> str:
    image = ddb_part(record).get("NewImage")
    image = image if isinstance(image, Mapping) else {}
    parts = []
    for err in exc.errors():
        loc = err.get("loc", ())
        where = ".".join(str(p) for p in loc) or "item"
        got = _got(image, loc[0]) if loc and err.get("type") != "missing" else ""
        parts.append(f"{where}: {err.get('msg')}{got}")
    return "invalid item: " + "; ".join(parts)


def record_rejection(store: StorePort, *, source: str, record: Mapping[str, Any],
                     reason: str, error_type: str, now: float) -> RejectionRecord:
    """Write the rejection row for ``record`` (idempotent: a replay rewrites the same row).

    The id is derived from the record (creation time, source, sequence number), so the
    same record rejected twice leaves one row, and rows sort newest first within a day.
    """
    ddb = ddb_part(record)
    created = ddb.get("ApproximateCreationDateTime")
    created_epoch = float(created) if isinstance(created, int | float | str | Decimal) else now
    seq = str(ddb.get("SequenceNumber") or record.get("eventID") or f"{now:.6f}")
    try:
        text = json.dumps(record, default=str, sort_keys=True)
    except (RecursionError, ValueError):
        # Too deep to keep whole: keep the envelope and the attribute names.
        image = ddb.get("NewImage")
        text = json.dumps({**{k: v for k, v in record.items() if k != "dynamodb"},
                           "dynamodb": {k: v for k, v in ddb.items() if k != "NewImage"},
                           "NewImage attributes": sorted(map(str, image))
                           if isinstance(image, Mapping) else None},
                          default=str, sort_keys=True)
    if len(text) > _MAX_RECORD_CHARS:
        text = text[:_MAX_RECORD_CHARS] + "...[cut]"
    item = RejectionRecord(
        rejection_day=day_of(created_epoch),
        rejection_id=f"{int(created_epoch * 1000):013d}-{source}-{seq}",
        source=source,
        reason=reason[:4000],
        error_type=error_type,
        record=text,
        when_epoch=now,
        expires_epoch=float(int(now + REJECTION_TTL_SECONDS)),
    )
    store.cold.put_rejection(item)
    return item


