"""Payloads read whole where a reader needs them: a record's references to S3
(``s3://bucket/key``, store/blobs.py) replaced by the values they name.

Guards and moves never call these: they work on the records as read, references and
all, so deciding a move reads no object. Views, attempt inputs and upstream values do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from whimbrel.contract.payloads import is_ref
from whimbrel.contract.records import ActivityRecord

if TYPE_CHECKING:
    from whimbrel.engine.feature import Core


def has_refs(record: ActivityRecord) -> bool:
    return is_ref(record.input) or is_ref(record.output) or is_ref(record.late_output)


def resolved(engine: Core, record: ActivityRecord) -> ActivityRecord:
    """``record`` with its payloads (input, output, late output) read whole.

    Raises:
        PayloadMissing: an object is missing or cannot be read.
    """
    if not has_refs(record):
        return record
    return replace(record, input=engine.reads.payload(record.input, "input"),
                   output=engine.reads.payload(record.output, "output"),
                   late_output=engine.reads.payload(record.late_output, "late_output"))


def resolved_all(engine: Core, records: Sequence[ActivityRecord],
                 ) -> list[ActivityRecord]:
    """:func:`resolved` of each record (those with references read in parallel)."""
    if not any(has_refs(r) for r in records):
        return list(records)
    return engine.threads.each(lambda r: resolved(engine, r), list(records))
