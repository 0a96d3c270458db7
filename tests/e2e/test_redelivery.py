"""Redelivery and reordering through the local runtime (reliability part 2).

"Assume every stream record arrives twice": the same scenario runs once with single
delivery and once per seed with :class:`~whimbrel.local.delivery.RandomRedelivery` on
both streams: every record delivered 1 to 3 times, batches cut into random invocations,
copies held back and replayed after later batches (or when the stream goes idle), and
the records of one batch shuffled (as records of different shards may be). The final
states must be equal, no python attempt may run twice, and the contract must hold.

The scenario's client behaves causally, like any real client: it writes an activity's
next event only once it has seen the previous one applied. Records that share a batch
are therefore independent, which is what makes shuffling them fair.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import wb_test_activities
from e2e_support import RawClient, wait_workflow

from whimbrel import ActivityDefinition, LauncherSpec, RetryPolicy, WorkflowDefinition
from whimbrel import WorkflowExec as WorkflowView
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.local.delivery import RandomRedelivery, RedeliveryFigures, record_key
from whimbrel.local.runtime import LocalRuntime
from whimbrel.local.streams import StreamPump
from whimbrel.store import consumers, specs
from whimbrel.testing import assert_contract_holds, fresh_table_prefix, wait_until

SEEDS = (11, 23, 47)
COPIES = 2  # workflows of each shape per run
PY = LauncherSpec.python("wb_test_activities:scripted")


def py(name: str, *deps: str, fail: int = 0, attempts: int = 1) -> ActivityDefinition:
    return ActivityDefinition(name, deps, launcher=PY, input={"fail_attempts": fail},
                              retry=RetryPolicy(max_attempts=attempts,
                                                initial_interval_seconds=0.0))


def ext(name: str, *deps: str, attempts: int = 1) -> ActivityDefinition:
    return ActivityDefinition(name, deps, retry=RetryPolicy(max_attempts=attempts,
                                                            initial_interval_seconds=0.0))


DEFINITIONS = (
    # Python activities only: redelivery touches the request record alone.
    WorkflowDefinition("rd_py_diamond", (py("A"), py("B", "A"), py("C", "A"),
                                         py("D", "B", "C"))),
    # External activities: every transition is an activity_event record.
    WorkflowDefinition("rd_ext_diamond", (ext("A"), ext("B", "A"), ext("C", "A"),
                                          ext("D", "B", "C"))),
    # Events whose follow-ups push-launch python activities, and a three-way fan-in.
    WorkflowDefinition("rd_mixed", (ext("X"), py("P", "X"), py("Q", "X"), py("Z"),
                                    ext("Y", "P", "Q", "Z"))),
    # Retries: a python activity failing twice, an external one failing once.
    WorkflowDefinition("rd_retry", (py("R", fail=2, attempts=3), py("S", "R"),
                                    ext("E", attempts=2), ext("T", "E", "S"))),
    # Retries exhausted: the workflow fails, what never started is cancelled (L waits
    # READY, unclaimed, from the start).
    WorkflowDefinition("rd_exhaust", (ext("K"), py("F", "K", fail=9, attempts=2),
                                      py("G", "F"), ext("L"))),
    # Cancel while an external activity runs; its late COMPLETED makes it CANCELLED.
    WorkflowDefinition("rd_cancel", (ext("M"), py("N", "M"))),
    # A CANCEL event on a READY activity fails the workflow.
    WorkflowDefinition("rd_cancel_event", (ext("U"), ext("V"), py("W", "U", "V"))),
    # Issue 14: a map of external items over a python upstream's list (two lanes); a
    # failure handled by a python handler; a child run; a failed run redriven by a row.
    WorkflowDefinition("rd_map", (
        ActivityDefinition("L", launcher=LauncherSpec.python("wb_test_activities:scripted_list")),
        ActivityDefinition("M", ("L",), map_over="L", max_concurrency=2),
        py("P", "M"))),
    WorkflowDefinition("rd_handler", (
        ActivityDefinition("X", on_failure="H"), py("H"), py("Y", "X"))),
    WorkflowDefinition("rd_kid", (py("K"),)),
    WorkflowDefinition("rd_child", (
        ActivityDefinition("C", launcher=LauncherSpec.workflow("rd_kid")), py("Q", "C"))),
    WorkflowDefinition("rd_redrive", (ext("R"), py("S", "R"))),
    # Waits (issue 13): a SIGNAL row sent as the run starts (kept, or received when its
    # wait is READY), an APPROVE row while a SUSPEND row holds the run, a RESUME row.
    WorkflowDefinition("rd_waits", (
        ext("O"), ActivityDefinition("S", ("O",), launcher=LauncherSpec.signal("paid")),
        ActivityDefinition("G", ("O",), launcher=LauncherSpec.approval()), py("P", "S", "G"))),
)
#: Started by the rows of another shape only.
CHILD_SHAPES = {"rd_kid"}


@dataclass
class Step:
    """Once activity ``name`` (attempt) is in state ``when`` (for ``name`` WORKFLOW: once
    the run is): send ``verb`` (an event written with RawClient; SIGNAL, SUSPEND and
    RESUME address the run, APPROVE ``target``) or, for verb ``cancel_workflow``,
    cancel the workflow."""

    name: str
    attempt: int
    when: str
    verb: str
    output: Any = None
    target: str | None = None


WORKFLOW = "workflow"


def _script(shape: str, i: int) -> list[Step]:
    def run(name: str, attempt: int = 1, out: Any = None, verb: str = "COMPLETED"
            ) -> list[Step]:
        return [Step(name, attempt, "READY", "RUNNING"),
                Step(name, attempt, "RUNNING", verb, out)]

    return {
        "rd_py_diamond": [],
        "rd_ext_diamond": [Step("A", 1, "READY", "RUNNING"),
                           Step("A", 1, "RUNNING", "COMPLETED", {"a": i}),
                           Step("B", 1, "READY", "RUNNING"), Step("C", 1, "READY", "RUNNING"),
                           Step("C", 1, "RUNNING", "COMPLETED", {"c": [i, "x"]}),
                           Step("B", 1, "RUNNING", "COMPLETED", {"b": None}),
                           *run("D", out={"d": i})],
        "rd_mixed": [*run("X", out={"x": i}), *run("Y", out={"y": i})],
        "rd_retry": [*run("E", verb="FAILED"), *run("E", 2, {"e": 2}), *run("T", out="t")],
        "rd_exhaust": [*run("K", out={"k": i})],
        "rd_cancel": [Step("M", 1, "READY", "RUNNING"),
                      Step("M", 1, "RUNNING", "cancel_workflow"),
                      Step("M", 1, "CANCELLED_RUNNING", "COMPLETED", {"m": "late"})],
        "rd_cancel_event": [Step("U", 1, "READY", "CANCEL")],
        "rd_map": [*run("M#0", out={"m": 0}), *run("M#1", out={"m": 1}),
                   *run("M#2", out={"m": 2})],
        "rd_handler": [*run("X", verb="FAILED")],
        "rd_child": [],
        "rd_redrive": [*run("R", verb="FAILED"), Step("R", 1, "FAILED", "REDRIVE"),
                       *run("R", 2, {"r": i})],
        "rd_waits": [Step("O", 1, "READY", "SIGNAL", {"eur": i}), *run("O", out={"o": i}),
                     Step("G", 1, "READY", "SUSPEND"),
                     Step(WORKFLOW, 0, "SUSPENDED", "APPROVE", target="G"),
                     Step("G", 1, "COMPLETED", "RESUME")],
    }[shape]


EXPECTED = {"rd_py_diamond": "COMPLETED", "rd_ext_diamond": "COMPLETED",
            "rd_mixed": "COMPLETED", "rd_retry": "COMPLETED", "rd_exhaust": "FAILED",
            "rd_cancel": "CANCELLED", "rd_cancel_event": "CANCELLED", "rd_map": "COMPLETED",
            "rd_handler": "COMPLETED", "rd_child": "COMPLETED", "rd_redrive": "COMPLETED",
            "rd_kid": "COMPLETED", "rd_waits": "COMPLETED"}


@dataclass
class Driver:
    """Plays the clients of all workflows at once, each step as soon as it may."""

    rt: LocalRuntime
    raw: RawClient
    todo: dict[str, list[Step]] = field(default_factory=dict)  # wx -> remaining steps
    events: int = 0

    def advance(self) -> bool:
        """Do every step whose condition holds; True when no step is left."""
        for wx, steps in self.todo.items():
            while steps:
                step = steps[0]
                if step.name == WORKFLOW:
                    run = self.rt.client.store.get_workflow(wx)
                    if run is None or run.state != step.when:
                        break
                else:
                    aeid = activity_exec_id(wx, step.name, step.attempt)
                    item = self.rt.client.store.get_activity(aeid)
                    if item is None or item.state != step.when:
                        break
                if step.verb == "cancel_workflow":
                    self.rt.client.cancel_workflow(wx)
                elif step.verb == "REDRIVE":  # a raw row, once the run has ended
                    if self.rt.client.engine.reads.workflow(wx).state != "FAILED":
                        break
                    self.raw.ddb.put_item(
                        TableName=f"{self.raw.prefix}activity_event",
                        Item={"activity_event_id": {"S": f"redrive-{wx}"},
                              "transition": {"S": "REDRIVE"}, "workflow_exec_id": {"S": wx}})
                    self.events += 1
                elif step.verb in ("SIGNAL", "SUSPEND", "RESUME"):
                    extra = {"signal": "paid", "payload": step.output} \
                        if step.verb == "SIGNAL" else {}
                    self.raw.row(step.verb, workflow_exec_id=wx, **extra)
                    self.events += 1
                elif step.verb == "APPROVE":
                    assert step.target is not None
                    self.raw.row(step.verb, by="alice",
                                 activity_exec_id=activity_exec_id(wx, step.target, 1))
                    self.events += 1
                else:
                    self.raw.event(aeid, step.verb, output=step.output,
                                   error="planned" if step.verb == "FAILED" else None)
                    self.events += 1
                steps.pop(0)
        return not any(self.todo.values())

    def waiting(self) -> str:
        return "; ".join(f"{wx}: {s[0]}" for wx, s in self.todo.items() if s)


@dataclass
class RunResult:
    summary: dict[tuple[str, int], dict[str, Any]]
    views: list[tuple[WorkflowDefinition, WorkflowView]]
    python_runs: Counter[str]
    events: int
    figures: RedeliveryFigures | None


def _summary(wf: WorkflowView) -> dict[str, Any]:
    """What must not depend on delivery: states, state paths, attempts, outputs."""
    return {
        "state": wf.state.value,
        "path": [h.state for h in wf.history],
        "failed_because": (wf.error or "").split(":")[0],
        "activities": sorted(
            (a.activity_name, a.attempt, a.state.value, [h.state for h in a.history],
             json.dumps(_timeless(a.output), sort_keys=True))
            for a in (*wf.activities, *wf.items)),
        "children": len(wf.child_workflow_exec_ids),
    }


def _timeless(output: Any) -> Any:
    """An approval's output without the time it was decided at."""
    if isinstance(output, dict) and output.get("approved") is True:
        return {k: v for k, v in output.items() if k != "at"}
    return output


class HandlerErrors(logging.Handler):
    """Collects why records failed inside the handlers (Powertools logs it at DEBUG)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "exception" in text.lower():
            self.seen.append(text[:300])

    def __enter__(self) -> HandlerErrors:
        log = logging.getLogger("aws_lambda_powertools.utilities.batch.base")
        self._level = log.level
        log.setLevel(logging.DEBUG)
        log.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        log = logging.getLogger("aws_lambda_powertools.utilities.batch.base")
        log.removeHandler(self)
        log.setLevel(self._level)


def _run(ddb_endpoint: str, seed: int | None) -> RunResult:
    with HandlerErrors() as errors:
        return _run_logged(ddb_endpoint, seed, errors)


def _run_logged(ddb_endpoint: str, seed: int | None, errors: HandlerErrors) -> RunResult:
    prefix = fresh_table_prefix()
    policies: list[RandomRedelivery] = []

    def policy(consumer: Any) -> RandomRedelivery:
        assert seed is not None
        p = RandomRedelivery(seed * 1000 + len(policies), max_batch=consumer.batch_size,
                             reorder=True)
        policies.append(p)
        return p

    with LocalRuntime(ddb_endpoint, prefix, heartbeat_rate_seconds=0.2,
                      delivery=policy if seed is not None else None,
                      lambda_log_level="ERROR") as rt:
        try:
            raw = RawClient(ddb_endpoint, prefix)
            for d in DEFINITIONS:
                rt.client.register_workflow(d)
            driver = Driver(rt, raw)
            started: list[tuple[WorkflowDefinition, int, str]] = []
            for i in range(COPIES):  # interleaved shapes: batches mix workflows
                for d in (d for d in DEFINITIONS if d.name not in CHILD_SHAPES):
                    rid = raw.request(d.name, {"i": i})
                    started.append((d, i, rid))
                    driver.todo[workflow_exec_id_for(rid)] = _script(d.name, i)
            # Deadlines, not speed targets (waits and data-driven shapes made the run
            # longer; a loaded machine needs room): a stuck client still fails them.
            wait_until(driver.advance, timeout=180, interval=0.05,
                       message=lambda: f"seed {seed}: clients stuck: {driver.waiting()}; "
                                       f"handler errors: {errors.seen}; pumps: "
                                       f"{[p.stats for p in rt.pumps.values()]}")
            for _, _, rid in started:
                wait_workflow(rt, rid, timeout=60)
            # Let every held-back copy be replayed, then look at the final tables.
            rt.wait_idle(timeout=60)
            for p in policies:
                assert p.held == 0, f"seed {seed}: {p.held} copies never replayed"
            for pump in rt.pumps.values():
                assert pump.stats.retries == 0, \
                    f"seed {seed}: {pump.consumer.name} retried: {errors.seen}"
                assert pump.stats.dead_lettered == 0
                assert pump.stats.replay_failures == 0, f"seed {seed}: a replay failed"
            assert rt.client.list_rejections() == [], f"seed {seed}: records rejected"
            views = [(d, rt.client.get_workflow(workflow_exec_id_for(rid)))
                     for d, _, rid in started]
            kid = next(d for d in DEFINITIONS if d.name in CHILD_SHAPES)
            children = [(kid, rt.client.get_workflow(c)) for _, wf in views
                        for c in wf.child_workflow_exec_ids]
            wxs = {wf.workflow_exec_id for _, wf in (*views, *children)}
            runs = Counter({aeid: n for aeid, n in list(wb_test_activities.RUNS.items())
                            if aeid.split(":")[0] in wxs})
            figures = None
            if policies:
                figures = policies[0].figures()
                for p in policies[1:]:
                    figures = figures + p.figures()
            return RunResult({(d.name, i): _summary(wf) for (d, i, _), (_, wf)
                              in zip(started, views, strict=True)},
                             [*views, *children], runs, driver.events, figures)
        finally:
            rt.client.store.delete_tables()


def _check_run(result: RunResult, seed: int | None) -> None:
    for definition, wf in result.views:
        assert wf.state.value == EXPECTED[definition.name], \
            f"seed {seed}: {definition.name} ended {wf.state.value}: {wf}"
        assert_contract_holds(wf, definition)
        for act in (*wf.activities, *wf.items):
            ran = [h for h in act.history if h.state == "RUNNING"]
            assert len(ran) <= 1, f"seed {seed}: {act.activity_exec_id} RUNNING twice"
            if definition.activity(act.activity_name).launcher.kind == "python":
                # Each python attempt that ran, ran exactly once.
                n = result.python_runs.get(act.activity_exec_id, 0)
                assert n == len(ran), \
                    f"seed {seed}: {act.activity_exec_id} ran {n} times, RUNNING {len(ran)}"
    doubled = [aeid for aeid, n in result.python_runs.items() if n > 1]
    assert doubled == [], f"seed {seed}: python attempts run twice: {doubled}"


@pytest.fixture(scope="module")
def baseline(module_ddb_endpoint: str) -> RunResult:
    """The scenario with single delivery (run once for all seeds)."""
    result = _run(module_ddb_endpoint, None)
    _check_run(result, None)
    return result


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_redelivered_and_interleaved_records_change_nothing(
        ddb_endpoint: str, baseline: RunResult, seed: int,
        record_property: Callable[[str, object], None]) -> None:
    result = _run(ddb_endpoint, seed)
    _check_run(result, seed)
    assert result.events == baseline.events
    for key, want in baseline.summary.items():
        got = result.summary[key]
        assert got == want, f"seed {seed}: {key} differs with redelivery:\n" \
                            f"  single: {want}\n  1-3x:   {got}"
    figures = result.figures
    assert figures is not None
    # The policy really did what it says (these fail if the seam is bypassed).
    assert figures.records == len(baseline.summary) + baseline.events, figures
    assert figures.redelivered > figures.records // 3, figures
    assert figures.max_deliveries >= 3 and figures.replayed_late > 0, figures
    assert figures.split_batches > 0, figures
    print(f"\nseed {seed}: {figures.records} records, {figures.deliveries} deliveries, "
          f"{figures.redelivered} delivered more than once, {figures.extra_deliveries} "
          f"extra deliveries ({figures.replayed_late} replayed after later batches), "
          f"{figures.invocations} invocations, {figures.split_batches} batches split")
    for name, value in vars(figures).items():
        record_property(name, value)


# -- the seam itself (no DynamoDB) -------------------------------------------------------

def _raw(n: int) -> dict[str, Any]:
    return {"eventID": f"e{n}", "eventName": "INSERT",
            "dynamodb": {"SequenceNumber": f"{n:06d}", "NewImage": {"n": {"N": str(n)}},
                         "ApproximateCreationDateTime": time.time()}}


class FakeStreams:
    """One open shard holding ``records`` (GetRecords format)."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-1"}]}}

    def get_shard_iterator(self, **kw: Any) -> dict[str, Any]:
        start = 0
        if kw["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER":
            start = int(kw["SequenceNumber"]) + 1
        return {"ShardIterator": str(start)}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        i = int(ShardIterator)
        chunk = self.records[i:i + Limit]
        return {"Records": chunk, "NextShardIterator": str(i + len(chunk))}


def _pump(n: int, invoke: Callable[[dict[str, Any]], Any],
          delivery: RandomRedelivery | None) -> tuple[StreamPump, list[str]]:
    consumer = consumers.StreamConsumerSpec("t", specs.ACTIVITY_EVENT, "unused", batch_size=4)
    dead: list[str] = []
    pump = StreamPump(consumer, streams=FakeStreams([_raw(i) for i in range(n)]),
                      stream_arn="arn:test", invoke=invoke, stop=threading.Event(),
                      dead_letter=lambda recs, why, kind: dead.extend(record_key(r) for r in recs),
                      delivery=delivery, retry_backoff=0.0)
    for _ in range(500):
        if not pump.poll_once():
            break
    return pump, dead


def test_random_redelivery_repeats_splits_and_replays_every_record() -> None:
    policy = RandomRedelivery(5, max_batch=4)
    records = [json.loads(json.dumps(_raw(i))) for i in range(40)]
    seen: list[list[str]] = []
    for start in range(0, 40, 4):
        batch = records[start:start + 4]
        invocations = policy.plan(batch)
        keys = [record_key(r) for inv in invocations for r in inv]
        assert all(1 <= len(inv) <= 4 for inv in invocations)
        mine = [k for k in keys if k in {record_key(r) for r in batch}]
        # Every record of the batch now, first copies in the batch's order.
        assert list(dict.fromkeys(mine)) == [record_key(r) for r in batch]
        seen.append(keys)
    seen.append([record_key(r) for inv in policy.drain() for r in inv])
    assert policy.held == 0
    counts = Counter(k for keys in seen for k in keys)
    assert set(counts) == {record_key(r) for r in records}
    assert set(counts.values()) == {1, 2, 3}
    figures = policy.figures()
    assert figures.extra_deliveries == sum(counts.values()) - 40
    assert figures.replayed_late > 0 and figures.split_batches > 0
    # Reproducible: the same seed plans the same deliveries.
    again = RandomRedelivery(5, max_batch=4)
    replay = [[record_key(r) for inv in again.plan(records[i:i + 4]) for r in inv]
              for i in range(0, 40, 4)]
    assert replay == seen[:-1]


def test_pump_without_policy_invokes_each_batch_once() -> None:
    calls: list[list[str]] = []
    pump, dead = _pump(10, lambda e: calls.append([r["eventID"] for r in e["Records"]]), None)
    assert calls == [["e0", "e1", "e2", "e3"], ["e4", "e5", "e6", "e7"], ["e8", "e9"]]
    assert pump.stats.invocations == 3 and dead == []


def test_pump_with_policy_retries_a_record_any_copy_of_which_failed() -> None:
    """A batch item failure on a copy counts for the record: the shard retries from it,
    and nothing is checkpointed past it until it succeeds."""
    delivered: Counter[str] = Counter()
    failures = {"e5": 2}

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        bad = []
        for r in event["Records"]:
            delivered[r["eventID"]] += 1
            if failures.get(r["eventID"], 0) > 0:
                failures[r["eventID"]] -= 1
                bad.append({"itemIdentifier": r["dynamodb"]["SequenceNumber"]})
        return {"batchItemFailures": bad}

    pump, dead = _pump(12, invoke, RandomRedelivery(9, max_batch=4))
    assert dead == [] and failures == {"e5": 0}
    assert pump.stats.retries >= 1
    assert set(delivered) == {f"e{i}" for i in range(12)}
    assert max(delivered.values()) >= 3  # e5: failed twice, then succeeded
    assert pump.delivery is not None and pump.delivery.held == 0


def test_pump_dead_letters_through_the_policy_like_without_it() -> None:
    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        return {"batchItemFailures": [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]}
                                      for r in event["Records"] if r["eventID"] == "e2"]}

    pump, dead = _pump(6, invoke, RandomRedelivery(3, max_batch=4))
    assert dead == ["000002"]  # retried max_retry_attempts times, then given up
    assert pump.stats.dead_lettered == 1


# -- records of different items out of order ---------------------------------------------

class ReversedBatches:
    """Delivers each batch's records last to first, as Lambda may when two records of
    different items sit in different shards (Lambda orders records within a shard only)."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []  # activity_event_id of each batch, as read

    def plan(self, batch: Any) -> list[list[dict[str, Any]]]:
        self.batches.append([r["dynamodb"]["NewImage"].get("activity_event_id", {}).get("S")
                             for r in batch])
        return [list(reversed(batch))]

    def drain(self) -> list[list[dict[str, Any]]]:
        return []


@pytest.mark.slow
@pytest.mark.parametrize("verb", [
    "COMPLETED",
    "FAILED",
])
def test_quick_worker_whose_report_overtakes_its_running_still_ends(
        ddb_endpoint: str, table_prefix: str, verb: str) -> None:
    """docs/simple-api.md: a worker writes RUNNING when it starts and COMPLETED or FAILED
    when it ends. A quick worker writes both within milliseconds; the two items may sit
    in different stream shards, which Lambda reads in parallel, so the report can be
    handled first. The activity must still end as reported, and so must the workflow."""
    policy = ReversedBatches()
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0.2,
                      delivery=lambda c: policy if c.name == "activity_event" else None,
                      lambda_log_level="CRITICAL") as rt:
        try:
            rt.client.register_workflow(WorkflowDefinition("rd_quick", (ext("A"),)))
            raw = RawClient(ddb_endpoint, table_prefix)
            for _ in range(6):  # until the two events are read in one batch
                rid = raw.request("rd_quick")
                aeid = activity_exec_id(workflow_exec_id_for(rid), "A", 1)
                wait_until(lambda a=aeid: (item := rt.client.store.get_activity(a)) is not None
                           and item.state == "READY", message="A never READY")
                events = [{"activity_event_id": {"S": f"{v}-{aeid}"},
                           "activity_exec_id": {"S": aeid}, "transition": {"S": v}}
                          for v in ("RUNNING", verb)]
                raw.ddb.batch_write_item(RequestItems={f"{table_prefix}activity_event": [
                    {"PutRequest": {"Item": item}} for item in events]})
                wait_until(lambda a=aeid: rt.client.get_activity(a).state.value != "READY")
                rt.wait_idle()
                if [f"RUNNING-{aeid}", f"{verb}-{aeid}"] in policy.batches:
                    break
            else:  # not the bug: the pump kept reading the two events apart
                raise RuntimeError(f"the two events never shared a batch: {policy.batches}")
            act = wait_until(lambda: (a := rt.client.get_activity(aeid)).state.is_terminal
                             and a, timeout=10,
                             message=lambda: f"A stuck: {rt.client.get_activity(aeid)}; "
                                             f"rejected: {rt.client.list_rejections()}")
            assert act.state.value == verb
            wf = wait_workflow(rt, rid, timeout=10)
            assert wf.state.value == ("COMPLETED" if verb == "COMPLETED" else "FAILED")
        finally:
            rt.client.store.delete_tables()
