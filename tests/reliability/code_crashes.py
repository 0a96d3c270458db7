"""The crash-at-every-write loop of the code-workflow decision tests (issue 26): a clean
run counts the writes, then one run per write crashes before or after it; each must end
as the clean one did."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from whimbrel import Whimbrel
from whimbrel.engine.code_decide import Histories
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.testing import Crash, FaultInjector


def forget(wb: Whimbrel) -> None:
    """The process died: what it kept in memory is gone."""
    wb.engine.feature(CodeRuns).histories = Histories()


def start(wb: Whimbrel, name: str, request_id: str) -> str:
    """Start ``name``; a start that crashed is retried by its caller, as a client would."""
    try:
        return wb.start_workflow(name, request_id=request_id)
    except Crash:
        forget(wb)
        return wb.start_workflow(name, request_id=request_id)


def crash_at_every_write(wb: Whimbrel, run: Callable[[str], str],
                         check: Callable[[str, str], None], *, before_every: int = 3) -> None:
    """``run(request_id)`` starts and drives a run to its end (returning its id) and
    ``check(wx, why)`` asserts how it ended. A crash before write k is also tried for
    every ``before_every``-th k (between two writes there are only reads, so "before k"
    is mostly "after k-1")."""
    counter = FaultInjector()
    wb.store.write_hooks.append(counter)
    wx = run(f"clean-{uuid.uuid4()}")
    wb.store.write_hooks.remove(counter)
    check(wx, "without a crash")
    writes = counter.count
    assert writes > 10
    tried = 0
    for k in range(1, writes + 1):
        for phase in ("after", "before"):
            if phase == "before" and k % before_every != 1 % before_every:
                continue
            injector = FaultInjector(at=k, phase=phase)
            wb.store.write_hooks.append(injector)
            try:
                wx = run(f"crash-{k}-{phase}-{uuid.uuid4().hex[:8]}")
            finally:
                wb.store.write_hooks.remove(injector)
            if injector.fired is not None:
                tried += 1
                check(wx, f"crash {phase} write #{k} {injector.fired}")
    assert tried >= writes
