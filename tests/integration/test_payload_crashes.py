"""Issue 27: crash at every write of a run whose payloads live in S3. The object writes
(``PutObject``) are crash points like the item writes: for every k, a process dies just
before or just after the k-th write; the caller tries again and the sweep repairs. Every
run must complete with its whole values, no item may reference a missing object, and a
retried write puts the same key (a run never holds more objects than its values)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.contract.errors import WhimbrelError
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.testing import Crash, FaultInjector, StepClock

BIG_IN = {"pad": "i" * 40_000}
#: As tests/reliability/reliability_driver.py steps time while nothing else happens.
IDLE_STEP = 150.0
OUT = {"a": {"rows": "a" * 50_000}, "b": {"rows": "b" * 60_000}}


@pytest.fixture
def cwb(ddb_endpoint: str, table_prefix: str, payload_bucket: str,
        ) -> Iterator[tuple[Whimbrel, StepClock]]:
    clock = StepClock()
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix, clock=clock,
                  payload_bucket=payload_bucket)
    wb.create_tables()
    wb.register_workflow(WorkflowDefinition("crashrun", (
        Act("a", launcher=LauncherSpec.external()),
        Act("b", launcher=LauncherSpec.external(), depends_on=("a",)),)))
    yield wb, clock
    wb.close()
    wb.store.delete_tables()


def _again(fn: Callable[[], Any]) -> Any:
    """A caller that died tries again; a refusal (the first try landed) is an answer."""
    for _ in range(3):
        try:
            return fn()
        except Crash:
            continue
        except WhimbrelError as exc:
            return exc
    raise AssertionError("crashed three times")


def _drive(wb: Whimbrel, clock: StepClock, rid: str) -> str:
    _again(lambda: wb.start_workflow("crashrun", BIG_IN, request_id=rid))
    wx = workflow_exec_id_for(rid)
    for name in ("a", "b"):
        aeid = activity_exec_id(wx, name, 1)
        for _ in range(40):  # a follow-up lost to a crash: the reconciler redoes it
            found = wb.store.get_activity(aeid)
            if found is not None and found.state is not ActivityState.REQUESTED:
                break
            clock.advance(IDLE_STEP)
            _again(lambda: wb.sweep(clock()))
        _again(lambda a=aeid: wb.transition_activity(a, "RUNNING"))
        _again(lambda a=aeid, n=name: wb.transition_activity(a, "COMPLETED", output=OUT[n]))
    for _ in range(40):  # the reconciler's visits back off: step as the reliability driver
        if wb.store.get_workflow(wx).state == WorkflowState.COMPLETED.value:  # type: ignore[union-attr]
            break
        clock.advance(IDLE_STEP)
        _again(lambda: wb.sweep(clock()))
    return wx


def _objects(bucket: str, wx: str) -> set[str]:
    listing = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=f"whimbrel/runs/{wx}/")
    return {o["Key"] for o in listing.get("Contents", ())}


@pytest.mark.slow
def test_crash_at_every_write_of_a_run_with_large_payloads(
        cwb: tuple[Whimbrel, StepClock], payload_bucket: str) -> None:
    wb, clock = cwb
    counter = FaultInjector()
    wb.store.write_hooks.append(counter)
    clean = _drive(wb, clock, "clean")
    wb.store.write_hooks.remove(counter)
    puts = [w for w in counter.writes if w[1] == "PutObject"]
    # The input (request row and run share its object), a's and b's outputs.
    assert len(_objects(payload_bucket, clean)) == 3, counter.writes
    assert puts, counter.writes
    tried = 0
    for k in range(1, counter.count + 1):
        for phase in ("before", "after"):
            injector = FaultInjector(at=k, phase=phase)
            wb.store.write_hooks.append(injector)
            try:
                wx = _drive(wb, clock, f"k{k}-{phase}")
            finally:
                wb.store.write_hooks.remove(injector)
            if injector.fired is None:
                continue
            tried += 1
            why = f"crash {phase} write #{k} {injector.fired}"
            wf = wb.get_workflow(wx)  # reads every reference: none dangles
            assert wf.state is WorkflowState.COMPLETED, why
            assert wf.input == BIG_IN, why
            assert wf.output == OUT, why
            assert wf.activity("a").output == OUT["a"], why
            # Retried writes put the same keys: no second copy of any value.
            assert len(_objects(payload_bucket, wx)) == 3, why
    assert tried >= counter.count
    print(f"\nlarge payloads: {counter.count} writes ({len(puts)} objects) in a clean run, "
          f"{tried} crash points tried")
