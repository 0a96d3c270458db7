"""A record the local runtime gives up on is recorded as a ``dead_letter`` rejection
that names the handler's exception (issue 20: it said only "DeadLetter")."""

from __future__ import annotations

from e2e_support import RawClient

from whimbrel.local.runtime import LocalRuntime
from whimbrel.store import consumers, specs
from whimbrel.testing import wait_until

BOOM = consumers.StreamConsumerSpec("boom", specs.ACTIVITY_EVENT, "dead_letter_support.boom",
                                batch_size=1, max_retry_attempts=1)


def test_a_dead_letter_names_the_exception(ddb_endpoint: str, table_prefix: str) -> None:
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0,
                      consumers=(BOOM,), poll_interval=0.05) as rt:
        RawClient(ddb_endpoint, table_prefix).event("x:A:1", "COMPLETED")
        [dead] = wait_until(lambda: [r for r in rt.client.list_rejections()
                                     if r.source == "dead_letter"], timeout=60,
                            message="the record was never dead-lettered")
    assert dead.error_type == "PoisonRowError"
    assert dead.reason.startswith("handler raised PoisonRowError: cannot apply 1 record(s);")
    assert "gave up after 2 attempts (boom consumer)" in dead.reason
