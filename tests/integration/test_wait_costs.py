"""What a wait costs (issue 13): the write and read units one timer, signal or approval
activity adds to a run, measured with ``Whimbrel.meter`` (DynamoDB Local's
``ConsumedCapacity``, index writes included) as the difference between the chain
``before → wait → after`` and ``before → after``, driven the same way.

``pytest tests/integration/test_wait_costs.py -s`` prints the table; the assertions pin
the write units, so a change that adds a write to a wait fails here. The same cases,
billed by AWS's rules, are the ``waits`` benchmark (``benchmarks/bench_waits.py``), which
writes the "Waits" section of docs/benchmarks.md."""

from __future__ import annotations

import sys
from pathlib import Path

from whimbrel import LauncherSpec, Whimbrel, WorkflowState
from whimbrel.store import specs
from whimbrel.testing import StepClock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ is not installed
from benchmarks.bench_waits import definition, drive

#: DynamoDB on-demand (us-east-1) and Step Functions Standard prices, $ per million.
WRU_PRICE, RRU_PRICE, SFN_TRANSITION_PRICE = 0.625, 0.125, 25.0

#: label, the wait (None: the chain without it), how its event comes, WRU it must add,
#: Step Functions transitions for the same (a Wait state; a Task state waiting for its
#: task token).
CASES: list[tuple[str, LauncherSpec | None, str, float, int]] = [
    ("timer (Wait state)", LauncherSpec.timer(60), "timer", 5.0, 1),
    # A signal's item is created first, even when its wait is READY (issue 20: a
    # signal_id names one signal under concurrency): 1 WRU more than the completion.
    ("signal, wait READY first (task token)", LauncherSpec.signal("go"), "signal", 4.0, 1),
    ("signal with timeout_seconds", LauncherSpec.signal("go", timeout_seconds=3600),
     "signal", 6.0, 1),
    ("signal sent before the wait is READY", LauncherSpec.signal("go"), "early", 5.0, 1),
    ("approval (task token)", LauncherSpec.approval(), "approve", 3.0, 1),
    ("approval with timeout_seconds", LauncherSpec.approval(timeout_seconds=3600),
     "approve", 5.0, 1),
]


#: The ``clock`` fixture (conftest.py) stands still until the test moves it.
CLOCK = StepClock


def _units(wb: Whimbrel, wait: LauncherSpec | None, event: str, n: int) -> tuple[float, float]:
    """(WRU, RRU) of one run of ``before → [wait] → after``, from its start to its end,
    driven as the benchmark drives it."""
    clock = wb.clock
    assert isinstance(clock, StepClock)
    name = f"cost{n}"
    wb.register_workflow(definition(name, wait))
    wb.sweep(clock.advance(1000))  # nothing of earlier runs is due during this one
    wb.meter.reset()
    with Whimbrel(wb.endpoint_url, wb.table_prefix) as view:  # its reads are not metered
        wx = drive(wb, view, clock, name, event)
    assert wb.engine.reads.workflow(wx).state is WorkflowState.COMPLETED
    # The sweep's lease writes (2 per pass and shard with something due, shared by all
    # that is due there) are the pass's, not the wait's.
    lease = specs.table_spec("lease").table_name(wb.table_prefix)
    return (wb.meter.total_write_units - wb.meter.write_units.get(lease, 0.0),
            wb.meter.total_read_units - wb.meter.read_units.get(lease, 0.0))


def test_write_units_per_wait(wb: Whimbrel) -> None:
    base_w, base_r = _units(wb, None, "", 0)
    rows = ["| wait | WRU | RRU | Whimbrel $/M | Step Functions transitions | "
            "Step Functions $/M |", "|---|---|---|---|---|---|"]
    for n, (label, wait, event, expected, transitions) in enumerate(CASES, start=1):
        w, r = _units(wb, wait, event, n)
        wru, rru = w - base_w, r - base_r
        assert wru == expected, f"{label}: {wru} WRU, expected {expected}"
        # At most 8: a run with signal waits also reads its signals at its end (one
        # Query, and the attempt each was given to) to report any never delivered.
        assert rru <= 8.0, f"{label}: {rru} RRU"
        dollars = wru * WRU_PRICE + rru * RRU_PRICE
        rows.append(f"| {label} | {wru:.0f} | {rru:.1f} | {dollars:.2f} | {transitions} | "
                    f"{transitions * SFN_TRANSITION_PRICE:.2f} |")
    print("\n" + "\n".join(rows))
