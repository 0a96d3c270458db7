"""The stream consumers of the engine over the in-memory twin's streams, run on demand.

:meth:`whimbrel.Whimbrel.in_memory` gives a facade over the twin
(:mod:`whimbrel.store.memory`); rows written for a stream consumer (``workflow_request``,
``activity_event``) are delivered by :class:`MemoryStreamRunner` when the caller asks
(``wb.drain()``): the same :class:`~whimbrel.local.streams.StreamPump` the dev runtime
uses (filters, batches, partial failures, bisection, retries, dead letters) feeding the
same handlers (``lambdas/``), in this thread, until every stream is read to its end. So
a test decides when records arrive, and nothing runs behind its back.

The facade sits below this layer; it finds the runner through
``Whimbrel.stream_runner``, which this module sets when imported (``import whimbrel``
does).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from whimbrel.client.whimbrel import Whimbrel
from whimbrel.contract.errors import WhimbrelError
from whimbrel.local.delivery import DeliveryPolicy
from whimbrel.local.streams import StreamPump
from whimbrel.store.consumers import ENGINE_CONSUMERS, StreamConsumerSpec
from whimbrel.store.memory import MemoryDynamoDB

__all__ = ["MAX_ROUNDS", "MemoryStreamRunner"]

#: Rounds over every stream one ``drain`` makes at most: a handler that writes a record
#: for itself on every delivery would otherwise never let it return.
MAX_ROUNDS = 10_000


class MemoryStreamRunner:
    """One pump per engine stream consumer over ``twin``'s streams, polled on demand.

    Args:
        client: the facade over ``twin``; the handlers get a ``lambda`` actor of it.
        twin: the in-memory DynamoDB whose streams are read.
        consumers: the event source mappings (default: the engine's).
        deliver_twice: every batch delivered twice (at-least-once delivery).
        delivery: which invocations each batch becomes (tests; see
            :class:`~whimbrel.local.delivery.DeliveryPolicy`).
    """

    def __init__(self, client: Whimbrel, twin: MemoryDynamoDB, *,
                 consumers: tuple[StreamConsumerSpec, ...] = ENGINE_CONSUMERS,
                 deliver_twice: bool = False,
                 delivery: Callable[[StreamConsumerSpec], DeliveryPolicy | None] | None = None,
                 ) -> None:
        from whimbrel.local.runtime import LambdaContext, dead_letter, load_handler

        self.lambda_client = client.as_actor("lambda")
        engine = self.lambda_client.engine
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.pumps: dict[str, StreamPump] = {}
        for consumer in consumers:
            arn = twin.table(consumer.table.table_name(client.store.table_prefix)).stream_arn
            if arn is None:
                raise WhimbrelError(f"table of consumer {consumer.name} has no stream")
            handler = load_handler(consumer.handler)
            name = f"whimbrel-{consumer.function_name}"

            def invoke(event: dict[str, Any], _handler: Any = handler,
                       _name: str = name) -> Any:
                return _handler(event, LambdaContext(_name, self.lambda_client))

            self.pumps[consumer.name] = StreamPump(
                consumer, streams=twin.streams, stream_arn=arn, invoke=invoke,
                dead_letter=lambda records, reason, error_type: dead_letter(
                    engine, records, reason, error_type),
                stop=self._stop, region=twin.region, retry_backoff=0.0,
                deliver_twice=deliver_twice,
                delivery=delivery(consumer) if delivery is not None else None,
                clock=twin.clock)

    def drain(self) -> int:
        """Deliver every record the streams hold, and those the deliveries write, until
        every stream is read to its end. Returns the handler invocations made.

        Raises:
            WhimbrelError: still not drained after :data:`MAX_ROUNDS` rounds.
        """
        with self._lock:
            before = sum(p.stats.invocations for p in self.pumps.values())
            for _ in range(MAX_ROUNDS):
                busy = False
                for pump in self.pumps.values():
                    busy = pump.poll_once() or busy
                if not busy:
                    return sum(p.stats.invocations for p in self.pumps.values()) - before
            raise WhimbrelError(f"the streams were still busy after {MAX_ROUNDS} rounds "
                                "(does a handler write a record for itself every time?)")


Whimbrel.stream_runner = MemoryStreamRunner
