"""examples/nightly_schedule runs as documented: a nightly schedule from its YAML, a
backfill of the last three nights (once each, however often it runs), and the sweep
starting the next night's run when its time comes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from whimbrel import Whimbrel, WorkflowState
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.schedules import fire_request_id

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "nightly_schedule"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_nightly", EXAMPLE / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_nightly_schedule_example(wb: Whimbrel, clock: object) -> None:
    example = _example()
    info, runs = example.run(wb)
    assert 3 <= len(runs) <= 4  # three 02:00s in 72 h (four in a spring-forward week)
    assert all(wb.get_workflow(wx).state is WorkflowState.COMPLETED for wx in runs)
    assert example.run(wb)[1] == runs  # run again: the same runs, none started twice
    nxt = wb.get_schedule(info.schedule_id).next_fire_epoch
    assert nxt is not None
    clock.advance(nxt - wb.clock())  # type: ignore[attr-defined]
    wb.sweep()
    wx = workflow_exec_id_for(fire_request_id("nightly-report", nxt))
    assert wb.wait(wx, timeout=60).state is WorkflowState.COMPLETED
    assert wb.get_schedule(info.schedule_id).last_run == wx
