"""The fork of a code run from a step ``name#k`` (``fork_workflow(wx,
from_activity="charge#2")``, ``whimbrel fork RUN --from charge#2``); engine/fork.py writes
the new run the same way for both kinds of run.

*Before the fork point.* A code run's steps are ordered by their *position*: the order of
its function's ``ctx.step``/``ctx.start`` calls (waits and ``ctx.child`` steps included),
recorded on each step's rows (``seq``) and the same on every replay. Forking from step S
keeps every step whose position is lower than S's and whose latest attempt COMPLETED.
S, every step after it, and the steps before it that did not complete (failed and caught
by the code, cancelled, still in flight) are not kept: they run again. A bare ``name``
is ``name#1`` (its first call).

*How the kept steps replay.* Each kept step's first attempt in the new run is created
COMPLETED with the source's output, its ``step`` attribute (position, spec and the
``ctx.patched`` answers recorded with it) and the source's start and end times; its
history names the attempt it reuses (``reused:<id>``, as a DAG fork's). The new run's
code then replays from its start over those rows: where the source's code had a kept
step's result, it has the same one without running it, and it schedules S and whatever
follows anew. ``ctx.uuid4`` and ``ctx.random`` are seeded as the source's were and
``ctx.now()`` starts from the source's start (``code_seed``, ``code_epoch`` on the run),
so the code before S computes the values the source's computed; after S the sequences
go on as the source's did (a key S derives from ``ctx.uuid4()`` is the one the source's
S had: an idempotent service sees the same request again, not a new one). A new
``input`` or new code that asks for another step where a kept one stands ends the run
FAILED with the non-determinism naming both, as any replay that diverges does; a
different step input at the same position is not checked (the kept output is used).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from whimbrel.contract.code.definition import decode_step
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.records import ActivityRecord, WorkflowRecord, latest_of
from whimbrel.contract.states import ActivityState

#: How many of the run's steps an error about an unknown step lists.
LISTED = 8


def step_named(from_activity: str) -> str:
    """``from_activity`` as a step name ``<name>#<k>`` (a bare name: its first call).

    Raises:
        InvalidInput: ``#`` not followed by a call number from 1.
    """
    base, sep, k = from_activity.rpartition("#")
    if not sep:
        return f"{from_activity}#1"
    if not base or not (k.isascii() and k.isdigit()) or int(k) < 1:
        raise InvalidInput(f"from_activity {from_activity!r} is not a step <name>#<k> "
                           "(k the call's number, from 1)", field="from_activity")
    return f"{base}#{int(k)}"


def position(row: ActivityRecord) -> int:
    """A step row's position in its run (the order of the code's calls)."""
    return decode_step(row.step or "", row.activity_name.rpartition("#")[0])[0]


def kept_steps(source: WorkflowRecord, rows: Iterable[ActivityRecord],
               from_activity: str) -> dict[str, ActivityRecord]:
    """The latest attempts of the source's steps a fork from ``from_activity`` keeps, by
    step: COMPLETED, at a position before the fork point's.

    Raises:
        InvalidInput: ``from_activity`` is no step name, or no step of the run (the
            message names the steps it has).
    """
    step = step_named(from_activity)
    latest = latest_of([r for r in rows if r.step is not None])
    at = {name: position(row) for name, row in latest.items()}
    if step not in at:
        raise InvalidInput(_missing(source.workflow_exec_id, step, at),
                           field="from_activity")
    return {name: row for name, row in latest.items()
            if at[name] < at[step] and row.state is ActivityState.COMPLETED}


def seeded(source: WorkflowRecord) -> dict[str, Any]:
    """The fork's ``code_seed`` and ``code_epoch``: its source's (the source's own id and
    start when it is no fork itself), so a fork of a fork replays the first run's."""
    return {"code_seed": source.code_seed or source.workflow_exec_id,
            "code_epoch": source.running_since if source.code_epoch is None
            else source.code_epoch}


def reused_fields(src: ActivityRecord, now: float) -> dict[str, Any]:
    """What a kept step's row carries besides a DAG activity's reused output: its
    position and spec, its input (for the reader) and its times (``ctx.now()`` after it
    is what the source's code saw)."""
    return {"step": src.step, "input": src.input,
            "started_epoch": src.started_epoch if src.started_epoch is not None else now,
            "ended_epoch": src.ended_epoch if src.ended_epoch is not None else now}


def _missing(wx: str, step: str, at: dict[str, int]) -> str:
    order = sorted(at, key=lambda name: at[name])
    base = step.rpartition("#")[0]
    calls = [name for name in order if name.rpartition("#")[0] == base]
    if calls:
        shown = ", ".join(calls[:3]) + (", ..." if len(calls) > 3 else "")
        return (f"run {wx} never reached step {step!r}: its code called {base!r} "
                f"{len(calls)} time(s) ({shown})")
    shown = ", ".join(order[:LISTED]) or "none"
    if len(order) > LISTED:
        shown += f", ... ({len(order)} in all)"
    return f"run {wx} has no step {step!r}; its steps, in order: {shown}"
