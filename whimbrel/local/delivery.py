"""Delivery policies: a test-only seam of :class:`~whimbrel.local.streams.StreamPump`.

Lambda delivers each stream record *at least* once. By default the pump invokes the
handler once per batch, like a healthy event source mapping. A :class:`DeliveryPolicy`
given to the pump (``LocalRuntime(delivery=...)``) decides instead which invocations a
batch becomes: records repeated, the batch split, and copies held back to be replayed
after later batches, so tests can check that the outcome does not depend on any of it.

The pump keeps its own semantics for the batch it read: a record of that batch counts
as failed when any invocation containing it reported it (or raised), and the shard
retries, bisects and dead-letters exactly as without a policy. Copies replayed after
their own batch was done are duplicates: their results are only counted
(``PumpStats.replay_failures``).
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["DeliveryPolicy", "RandomRedelivery", "RedeliveryFigures", "record_key"]

Record = dict[str, Any]


def record_key(record: Record) -> str:
    """What identifies a stream record across deliveries (its sequence number)."""
    return str(record["dynamodb"]["SequenceNumber"])


class DeliveryPolicy(Protocol):
    """Turns the batches a pump reads into the invocations it makes."""

    def plan(self, batch: Sequence[Record]) -> list[list[Record]]:
        """The invocations to make now for ``batch``, in order.

        Every record of ``batch`` must appear in at least one of them (the pump raises
        otherwise); copies of records of earlier batches may be mixed in.
        """
        ...

    def drain(self) -> list[list[Record]]:
        """Invocations still held back; the pump makes them when its stream is idle."""
        ...


@dataclass(frozen=True)
class RedeliveryFigures:
    """What a :class:`RandomRedelivery` did, counted per record (sequence number)."""

    records: int
    deliveries: int
    redelivered: int  # records delivered more than once
    extra_deliveries: int  # deliveries beyond the first, summed over records
    max_deliveries: int  # most deliveries of one record
    replayed_late: int  # copies delivered after a later batch (or at idle)
    invocations: int
    split_batches: int  # batches that became more than one invocation

    def __add__(self, other: RedeliveryFigures) -> RedeliveryFigures:
        return RedeliveryFigures(
            self.records + other.records, self.deliveries + other.deliveries,
            self.redelivered + other.redelivered,
            self.extra_deliveries + other.extra_deliveries,
            max(self.max_deliveries, other.max_deliveries),
            self.replayed_late + other.replayed_late, self.invocations + other.invocations,
            self.split_batches + other.split_batches)


class RandomRedelivery:
    """Each record delivered 1 to ``max_copies`` times; batches split and interleaved.

    For a batch read from the stream, every record gets ``randint(1, max_copies)``
    copies. The first copies keep the batch's order (Lambda keeps a shard's order)
    unless ``reorder`` is set; each further copy lands at a random place after its
    first copy, or, with probability ``hold_probability``, is held back and replayed
    after 1 to ``max_hold`` later batches (or when the stream goes idle), mixed into
    their invocations. The resulting sequence is cut into invocations of random
    sizes, at most ``max_batch`` records each. ``seed`` makes a run reproducible for
    a given order of batches.
    """

    def __init__(self, seed: int, *, max_copies: int = 3, hold_probability: float = 0.5,
                 max_hold: int = 3, max_batch: int = 10, reorder: bool = False) -> None:
        if max_copies < 1 or max_batch < 1 or max_hold < 1:
            raise ValueError("max_copies, max_batch and max_hold must be at least 1")
        self.seed = seed
        self.rng = random.Random(seed)
        self.max_copies = max_copies
        self.hold_probability = hold_probability
        self.max_hold = max_hold
        self.max_batch = max_batch
        self.reorder = reorder
        self.deliveries: Counter[str] = Counter()
        self.replayed_late = 0
        self.invocations = 0
        self.split_batches = 0
        self._batches = 0
        self._held: list[tuple[int, Record]] = []  # (release after this batch, copy)

    def plan(self, batch: Sequence[Record]) -> list[list[Record]]:
        self._batches += 1
        firsts = list(batch)
        if self.reorder:
            self.rng.shuffle(firsts)
        sequence: list[Record] = list(firsts)
        for record in firsts:
            for _ in range(self.rng.randint(1, self.max_copies) - 1):
                if self.rng.random() < self.hold_probability:
                    self._held.append((self._batches + self.rng.randint(1, self.max_hold),
                                       record))
                else:  # somewhere after its first copy
                    first = next(i for i, r in enumerate(sequence) if r is record)
                    sequence.insert(self.rng.randint(first + 1, len(sequence)), record)
        due = [r for when, r in self._held if when <= self._batches]
        self._held = [(when, r) for when, r in self._held if when > self._batches]
        for record in due:  # older records: anywhere in this delivery
            sequence.insert(self.rng.randint(0, len(sequence)), record)
        self.replayed_late += len(due)
        invocations = self._cut(sequence)
        if len(invocations) > 1:
            self.split_batches += 1
        return invocations

    def drain(self) -> list[list[Record]]:
        held = [r for _, r in self._held]
        self._held = []
        self.rng.shuffle(held)
        self.replayed_late += len(held)
        return self._cut(held)

    def _cut(self, sequence: list[Record]) -> list[list[Record]]:
        out: list[list[Record]] = []
        i = 0
        while i < len(sequence):
            size = self.rng.randint(1, self.max_batch)
            # Each copy is its own JSON document, as Lambda would send it.
            out.append([copy.deepcopy(r) for r in sequence[i:i + size]])
            i += size
        for invocation in out:
            self.deliveries.update(record_key(r) for r in invocation)
        self.invocations += len(out)
        return out

    @property
    def held(self) -> int:
        """Copies waiting to be replayed."""
        return len(self._held)

    def figures(self) -> RedeliveryFigures:
        counts = list(self.deliveries.values())
        return RedeliveryFigures(
            records=len(counts), deliveries=sum(counts),
            redelivered=sum(1 for n in counts if n > 1),
            extra_deliveries=sum(n - 1 for n in counts),
            max_deliveries=max(counts, default=0), replayed_late=self.replayed_late,
            invocations=self.invocations, split_batches=self.split_batches)
