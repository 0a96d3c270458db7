"""Events through the whole local stack: Simple API requests, the engine's stream
handlers, the notify consumers reading the real streams of DynamoDB Local and appending
to an events file — with every stream record of every consumer delivered one to three
times, batches split and copies replayed late. Each fact must be in the file exactly
once, and every line must be a valid event (docs/events.md's schema)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from e2e_support import RawClient, wait_workflow
from jsonschema import Draft202012Validator, FormatChecker

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, RetryPolicy, WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.contract.notifications import EVENT_SCHEMA
from whimbrel.local.delivery import RandomRedelivery
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import fresh_table_prefix, wait_until

A = ActivityState
SCRIPTED = LauncherSpec.python("wb_test_activities:scripted")
NOW = RetryPolicy(max_attempts=2, initial_interval_seconds=0.0)
SCHEMA = Draft202012Validator(EVENT_SCHEMA, format_checker=FormatChecker())

DEFINITIONS = (
    WorkflowDefinition("ev_chain", (Act("a", launcher=SCRIPTED), Act("b", ("a",),
                                                                    launcher=SCRIPTED))),
    # Fails for good at attempt 2: one Activity Failed, then the run FAILED.
    WorkflowDefinition("ev_exhaust", (Act("f", launcher=SCRIPTED, input={"fail_attempts": 9},
                                          retry=NOW),)),
    # Fails once, then succeeds: no Activity Failed at all.
    WorkflowDefinition("ev_flaky", (Act("g", launcher=SCRIPTED, input={"fail_attempts": 1},
                                        retry=NOW),)),
    WorkflowDefinition("ev_cancel", (Act("c"),)),
    # Nobody claims w: the run times out (the sweep), w is cancelled, not failed.
    WorkflowDefinition("ev_deadline", (Act("w"),), timeout_seconds=1.0),
    WorkflowDefinition("ev_wait", (Act("prep"), Act("approve", ("prep",)))),
)


def _envelopes(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [5, 61])
def test_every_fact_once_in_the_events_file_under_redelivery(
        ddb_endpoint: str, tmp_path: Path, seed: int) -> None:
    events_file = tmp_path / "events.jsonl"
    policies: dict[str, RandomRedelivery] = {}

    def policy(consumer: Any) -> RandomRedelivery:
        p = RandomRedelivery(seed * 100 + len(policies), max_batch=consumer.batch_size,
                             reorder=True)
        policies[consumer.name] = p
        return p

    prefix = fresh_table_prefix()
    with LocalRuntime(ddb_endpoint, prefix, heartbeat_rate_seconds=0.2, delivery=policy,
                      events_file=events_file, lambda_log_level="ERROR") as rt:
        try:
            assert {"notify_workflow", "notify_activity"} <= set(rt.pumps)
            for d in DEFINITIONS:
                rt.client.register_workflow(d)
            raw = RawClient(ddb_endpoint, prefix)
            rids = {d.name: raw.request(d.name, {"seed": seed}) for d in DEFINITIONS}
            wx = {name: workflow_exec_id_for(rid) for name, rid in rids.items()}
            waits = _make_a_wait(rt, wx["ev_wait"])
            rt.client.cancel_workflow(wait_until(
                lambda: rt.client.store.get_workflow(wx["ev_cancel"]) and wx["ev_cancel"]))
            for name, rid in rids.items():
                if name != "ev_wait":
                    wait_workflow(rt, rid, timeout=30)
            rt.client.cancel_workflow(wx["ev_wait"])
            wait_workflow(rt, rids["ev_wait"], timeout=30)

            expected = {f"{w}/ended/0" for w in wx.values()} | {
                f"{activity_exec_id(wx['ev_exhaust'], 'f', 2)}/failed", f"{waits}/waiting"}
            wait_until(lambda: {e["detail"]["event_id"] for e in _envelopes(events_file)}
                       >= expected, timeout=30,
                       message=lambda: f"events so far: {_envelopes(events_file)}")
            rt.wait_idle(timeout=30)  # every held-back copy replayed
            assert all(p.held == 0 for p in policies.values())
            for pump in rt.pumps.values():
                assert pump.stats.dead_lettered == 0 and pump.stats.replay_failures == 0

            envelopes = _envelopes(events_file)
            counts = Counter(e["detail"]["event_id"] for e in envelopes)
            assert counts == Counter(dict.fromkeys(expected, 1))
            for envelope in envelopes:
                assert [e.message for e in SCHEMA.iter_errors(envelope)] == []
            states = {e["detail"]["workflow_name"]: e["detail"]["state"] for e in envelopes
                      if e["detail-type"] == "Workflow Ended"}
            assert states == {"ev_chain": "COMPLETED", "ev_exhaust": "FAILED",
                              "ev_flaky": "COMPLETED", "ev_cancel": "CANCELLED",
                              "ev_deadline": "TIMED_OUT", "ev_wait": "CANCELLED"}
            # The notify records really were redelivered (the test would pass vacuously
            # if the seam were bypassed).
            notify = policies["notify_workflow"].figures() + policies[
                "notify_activity"].figures()
            assert notify.redelivered > 0 and notify.replayed_late > 0, notify
            assert rt.client.list_rejections() == []
        finally:
            rt.client.store.delete_tables()


def _make_a_wait(rt: LocalRuntime, wx: str) -> str:
    """What issue 13's READY write of a wait will look like, written through the store
    once the run exists: approve goes REQUESTED -> READY with ``waiting_for``."""
    store = rt.client.store
    aeid = activity_exec_id(wx, "approve", 1)
    wait_until(lambda: store.get_activity(aeid), timeout=30)
    now = rt.client.clock()
    store.move_activity(aeid, A.REQUESTED, (A.READY,), {"waiting_for": "approval"},
                        now=now, actor="test-waits")
    return aeid
