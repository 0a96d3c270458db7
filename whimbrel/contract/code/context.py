"""The context a code workflow's function runs with, and one replay of it.

A decision runs the function from its start over the run's history (STYLE.md 14:
replay is pure). Each ``ctx.step``/``ctx.start`` takes the next position; a step the
history holds there returns its recorded output (or raises ``StepFailed``); a new one is
noted to be scheduled; a step not finished yet stops the replay (``_Suspend``, a
``BaseException`` so that a user's ``except Exception`` cannot swallow it). Time,
randomness and ids come from the context and are the same on every replay. A
``ctx.map`` takes one position too: one step whose items the engine runs as a DAG map's.
"""

from __future__ import annotations

import json
import random as _random
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, NoReturn

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.code.cancel import CancelScope
from whimbrel.contract.code.errors import Cancelled, NonDeterminism, StepFailed, WaitTimedOut
from whimbrel.contract.code.history import History, RunFacts
from whimbrel.contract.dataflow import MAX_MAP_ITEMS, STEP_ITEMS
from whimbrel.contract.errors import InvalidDefinition, InvalidInput
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.launching import LauncherSpec, RetryPolicy
from whimbrel.contract.priority import DEFAULT_PRIORITY
from whimbrel.contract.states import ActivityState

_NAMESPACE = uuid.UUID("0b5d6c1e-5e2f-4c53-9d7a-636f64657766")


class _Suspend(BaseException):  # a control signal, not an error
    """The replay reached a step that has not finished: the decision ends here."""


class _ContinueAsNew(BaseException):  # a control signal, not an error
    """``ctx.continue_as_new``: this run ends, a new one of the workflow takes over."""

    def __init__(self, input: Any) -> None:
        super().__init__("continue as new")
        self.input = input


@dataclass(frozen=True)
class NewStep:
    """A step the replay asked for that the history does not hold: to be scheduled."""

    name: str
    seq: int
    spec: ActivityDefinition
    input: str
    #: ``ctx.patched`` ids the code passed since the step before (recorded on the row).
    patches: tuple[str, ...] = ()
    #: Asked for by the code's clean-up after a cancel (contract/code/cancel.py).
    cleanup: bool = False


@dataclass(frozen=True)
class Dispatch:
    """A run to start without waiting for it (``ctx.child(..., wait=False)``)."""

    workflow_name: str
    input: str | None
    request_id: str


@dataclass
class Decision:
    """What one replay decided.

    ``outcome``: ``waiting`` (schedule ``new_steps``, wait for ``waiting_on``),
    ``completed`` (the function returned ``output``), ``failed`` (it raised
    ``error``; with ``nondeterminism``, nothing is scheduled) or ``cancelled`` (it let
    ``Cancelled`` out: its clean-up is over).
    """

    outcome: Literal["waiting", "completed", "failed", "continued", "cancelled"]
    new_steps: list[NewStep] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)
    waiting_on: list[str] = field(default_factory=list)
    output: str | None = None
    error: str | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    nondeterminism: NonDeterminism | None = None


class StepHandle:
    """A step started with ``ctx.start``: ``result()`` is its output (or raises
    ``StepFailed``) once it has finished."""

    def __init__(self, ctx: WorkflowContext, name: str, wait: str | None = None,
                 timeout_seconds: float | None = None) -> None:
        self._ctx = ctx
        self.name = name
        self._wait = wait
        self._timeout = timeout_seconds

    def result(self) -> Any:
        """The step's output.

        Raises:
            StepFailed: it ended FAILED, TIMED_OUT or CANCELLED after its retries.
            WaitTimedOut: a wait (signal, approval) passed its ``timeout_seconds``.
        """
        try:
            return self._ctx._result(self.name)  # the context's own handle
        except StepFailed as exc:
            if self._wait is not None and exc.state == ActivityState.TIMED_OUT.value:
                raise WaitTimedOut(self._wait, self._timeout or 0.0) from None
            raise


class WorkflowContext:
    """What a code workflow's function may use (docs/code-workflows.md).

    Attributes:
        input: the run's input.
        workflow_exec_id: the run's id.
        workflow_name: the workflow's name.
        properties: a JSON dict the code may change; saved with each decision and shown
            by ``get_workflow(wx).properties`` and ``whimbrel status``.
    """

    def __init__(self, facts: RunFacts, history: History) -> None:
        self.input = facts.input
        self.limits = facts.limits
        self.workflow_exec_id = facts.workflow_exec_id
        self.workflow_name = facts.workflow_name
        self.properties: dict[str, Any] = {}
        self._history = history
        self._now = facts.started_epoch
        self._seq = 0
        self._counts: Counter[str] = Counter()
        self._uuids = 0
        self._seed = facts.seed or facts.workflow_exec_id
        self._rng = _random.Random(self._seed)
        self.new_steps: list[NewStep] = []
        self.waiting_on: list[str] = []
        self.nondeterminism: NonDeterminism | None = None
        self._patches: list[str] = []
        self._dispatches = 0
        self.dispatches: list[Dispatch] = []
        #: Kept running between decisions (code_live.LiveRun): called where the code
        #: waits for a step not finished, returns once the history may hold it.
        self._park: Callable[[str], None] | None = None
        #: Suspended: a ``finally`` the unwinding runs schedules nothing.
        self._closed = False
        #: A cancelled run's replay: where the cancel reaches the code, and its clean-up.
        self._cancel = CancelScope(history) if facts.cancelled else None

    # -- steps --------------------------------------------------------------------------

    def step(self, fn_or_name: Callable[..., Any] | str, input: Any = None, *,
             name: str | None = None, launcher: LauncherSpec | None = None,
             retry: RetryPolicy | None = None,
             heartbeat_timeout_seconds: float | None = None,
             start_to_close_seconds: float | None = None,
             schedule_to_start_seconds: float | None = None, pool: str | None = None,
             pool_key: str | None = None, priority: int | None = None) -> Any:
        """Run one step and return its output. ``fn_or_name`` is a module-level function
        taking one ``ActivityRun`` (``run.input`` is ``input``), run by the ``python``
        launcher, or a name with ``launcher=`` (``external`` when none: a worker in any
        language claims it). The k-th call of a name is the step ``<name>#<k>``.
        ``pool_key`` keys its ``pool`` (a JMESPath over ``{"input": <the run's input>}``:
        each key value has the pool's limits to itself; docs/definitions.md).

        Raises:
            StepFailed: it ended FAILED, TIMED_OUT or CANCELLED after its retries.
            InvalidDefinition: the options are not a valid activity.
            InvalidInput: ``input`` is not JSON or too large.
        """
        return self.start(
            fn_or_name, input, name=name, launcher=launcher, retry=retry,
            heartbeat_timeout_seconds=heartbeat_timeout_seconds,
            start_to_close_seconds=start_to_close_seconds,
            schedule_to_start_seconds=schedule_to_start_seconds, pool=pool,
            pool_key=pool_key, priority=priority).result()

    def start(self, fn_or_name: Callable[..., Any] | str, input: Any = None, *,
              name: str | None = None, launcher: LauncherSpec | None = None,
              retry: RetryPolicy | None = None,
              heartbeat_timeout_seconds: float | None = None,
              start_to_close_seconds: float | None = None,
              schedule_to_start_seconds: float | None = None, pool: str | None = None,
              pool_key: str | None = None, priority: int | None = None) -> StepHandle:
        """Start a step without waiting for it (the same arguments as :meth:`step`);
        ``handle.result()`` waits. Steps started together run in parallel."""
        if self._closed:
            raise _Suspend("closed")
        spec = _spec(fn_or_name, name=name, launcher=launcher, retry=retry,
                     heartbeat_timeout_seconds=heartbeat_timeout_seconds,
                     start_to_close_seconds=start_to_close_seconds,
                     schedule_to_start_seconds=schedule_to_start_seconds, pool=pool,
                     pool_key=pool_key, priority=priority)
        return self._start(spec, input)

    def _start(self, spec: ActivityDefinition, input: Any) -> StepHandle:
        """Take the next position for a step of ``spec``: its handle (and, when the
        history does not hold it, the step to schedule)."""
        self._seq += 1
        self._counts[spec.name] += 1
        step = f"{spec.name}#{self._counts[spec.name]}"
        held = self._history.by_seq.get(self._seq)
        if held is not None and held != step:
            self._diverged(held, step)
        known = self._history.get(step)
        # A cancelled run schedules only its clean-up (what the code asks for after
        # ``Cancelled``), never the path the cancel cut off.
        cleanup = self._cancel is not None and self._cancel.starting(step, spec)
        if known is None and (self._cancel is None or cleanup):
            text = self.limits.encode(input, f"input of step {step}", run_input=True)
            self.new_steps.append(NewStep(step, self._seq, spec,
                                          "null" if text is None else text,
                                          tuple(self._patches), cleanup))
            self._patches.clear()
        elif known is not None and known.seq != self._seq:
            self._diverged(f"{step} (at step {known.seq})", step)
        return StepHandle(self, step)

    def map(self, fn_or_name: Callable[..., Any] | str, items: Sequence[Any], *,
            max_concurrency: int | None = None, tolerated_failures: int = 0,
            **options: Any) -> list[Any]:
        """Run ``fn_or_name`` once per item (``run.input`` is the item), at most
        ``max_concurrency`` at once (None: all), and return the outputs in item order;
        a failed item's output is None while at most ``tolerated_failures`` failed.
        ``options``: those of :meth:`step` (each item runs with them).

        The map is one step, ``<name>#<k>`` like any (its input is the list), run as a
        DAG's map: its items are rows of the ``map_item`` table (``<name>#<k>#<i>``), up
        to ``MAX_MAP_ITEMS``; the list and the outputs go to the payload bucket when
        large. The history holds the one step, whatever the number of items.

        Raises:
            StepFailed: more items failed than tolerated (the map step's error names
                the first failed item).
            InvalidDefinition: the options (or ``max_concurrency``,
                ``tolerated_failures``) are not valid.
            InvalidInput: ``items`` is not a JSON list of at most ``MAX_MAP_ITEMS``, or
                too large.
        """
        if self._closed:
            raise _Suspend("closed")
        unknown = sorted(set(options) - set(_STEP_OPTIONS))
        if unknown:
            raise InvalidInput(f"ctx.map got unknown option(s) {', '.join(unknown)} "
                               f"(those of ctx.step: {', '.join(_STEP_OPTIONS)})",
                               field="options")
        elements = list(items)
        if len(elements) > MAX_MAP_ITEMS:
            raise InvalidInput(f"ctx.map got {len(elements)} items, more than the limit of "
                               f"{MAX_MAP_ITEMS} items per map", field="items")
        spec = replace(_spec(fn_or_name, **{**_STEP_OPTIONS, **options}),
                       map_over=STEP_ITEMS, max_concurrency=max_concurrency,
                       tolerated_failures=tolerated_failures)
        problems = spec.problems({spec.name})
        if problems:
            raise InvalidDefinition(spec.name, problems)
        return list(self._start(spec, elements).result() or [])

    # -- waits ----------------------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a timer step ``sleep#<k>``: no process waits, the sweep
        ends it when due; ``whimbrel.testing`` skips the time)."""
        if seconds > 0:
            self.start("sleep", launcher=LauncherSpec.timer(seconds)).result()

    def wait_signal(self, name: str, *, timeout_seconds: float | None = None) -> Any:
        """The payload of the next signal ``name`` sent to the run (step
        ``signal-<name>#<k>``). Signals are kept in send order from the run's start on,
        so one sent before the code waits is not lost.

        Raises:
            WaitTimedOut: none came within ``timeout_seconds``.
        """
        handle = self.start(f"signal-{name}", launcher=LauncherSpec.signal(
            name, timeout_seconds=timeout_seconds))
        return StepHandle(self, handle.name, f"signal {name!r}", timeout_seconds).result()

    def wait_approval(self, approvers: Sequence[str] = (), *,
                      timeout_seconds: float | None = None) -> Any:
        """A person's decision (step ``approval#<k>``): ``Whimbrel.approve`` returns
        what it was given; ``reject`` raises ``StepFailed`` (``error_type``
        ``"Rejected"``). With ``approvers``, only they may decide.

        Raises:
            StepFailed: rejected.
            WaitTimedOut: no decision within ``timeout_seconds``.
        """
        handle = self.start("approval", launcher=LauncherSpec.approval(
            approvers=list(approvers), timeout_seconds=timeout_seconds))
        return StepHandle(self, handle.name, "approval", timeout_seconds).result()

    def _diverged(self, expected: str, actual: str) -> None:
        self.nondeterminism = NonDeterminism(position=self._seq, expected=expected,
                                             actual=actual)
        raise self.nondeterminism

    def _result(self, step: str) -> Any:
        known = self._history.get(step)
        if self._cancel is not None:
            self._cancel.wait(step, known, self._seq)  # raises Cancelled where it cuts
        while known is None or not known.final:
            self.waiting_on.append(step)
            if self._park is None or self._closed:
                self._closed = True
                raise _Suspend(step)
            self._park(step)  # raises _Suspend when the live run is given up
            known = self._history.get(step)
        if known.ended_epoch is not None:
            self._now = max(self._now, known.ended_epoch)
        if known.state is ActivityState.COMPLETED:
            return None if known.output is None else json.loads(known.output)
        raise StepFailed(step, state=known.state.value if known.state else "LOST",
                         error=known.error, error_type=known.error_type,
                         activity_exec_id=known.activity_exec_id)

    # -- other runs ---------------------------------------------------------------------

    def child(self, workflow_name: str, input: Any = None, *, wait: bool = True) -> Any:
        """Run the registered workflow ``workflow_name`` (DAG or code) as a child.

        ``wait=True``: a step ``child-<name>#<k>`` whose attempt is the child run (its
        cancel cancels the child); returns the child's output, raises ``StepFailed``
        when it fails. ``wait=False`` (fire and forget): starts the run once (its
        request id is derived from this run and the call) and returns its
        ``workflow_exec_id`` at once; this run does not wait for it.
        """
        if wait:
            base = "child-" + "".join(c if c.isalnum() or c in "_-" else "_"
                                      for c in workflow_name)[:58]
            return self.start(base, input,
                              launcher=LauncherSpec.workflow(workflow_name)).result()
        self._dispatches += 1
        request_id = f"{self.workflow_exec_id}:dispatch:{self._dispatches}"
        if self._history.last_seq <= self._seq:
            text = self.limits.encode(input, f"input of {workflow_name}", run_input=True)
            self.dispatches.append(Dispatch(workflow_name, text, request_id))
        return workflow_exec_id_for(request_id)

    # -- versioning and continuing ---------------------------------------------------------

    def patched(self, patch_id: str) -> bool:
        """True where the run reaches this point with code that has the patch; False on
        the replay of a run that passed this point before the patch was deployed::

            if ctx.patched("fraud-check"):
                ctx.step(fraud_check, order)

        The answer is recorded on the next step the run schedules (its ``step``
        attribute), so every later replay of the run gets the same one.
        """
        held = self._history.by_seq.get(self._seq + 1)
        if held is None:  # nothing recorded past here: the code as deployed decides
            self._patches.append(patch_id)
            return True
        known = self._history.get(held)
        return known is not None and patch_id in known.patches

    def continue_as_new(self, input: Any = None) -> NoReturn:
        """End this run COMPLETED and start a new run of the workflow with ``input``
        (the latest registered version); ``WorkflowExec.continued_as`` names it. Keeps
        a long-lived loop's history short."""
        raise _ContinueAsNew(input)

    # -- deterministic values -----------------------------------------------------------

    def now(self) -> datetime:
        """The run's time: when it started, then the end of the latest step whose result
        the code has had — the same on every replay (never the wall clock)."""
        return datetime.fromtimestamp(self._now, UTC)

    def uuid4(self) -> uuid.UUID:
        """A random-looking UUID, the same on every replay (derived from the run; in a
        fork, the sequence of the run it was forked from)."""
        self._uuids += 1
        return uuid.uuid5(_NAMESPACE, f"{self._seed}:{self._uuids}")

    def random(self) -> float:
        """A number in [0, 1), the same sequence on every replay (seeded by the run)."""
        return self._rng.random()


#: The options of ``ctx.step`` (and ``ctx.map``'s ``**options``), with their defaults.
_STEP_OPTIONS: dict[str, Any] = {
    "name": None, "launcher": None, "retry": None, "heartbeat_timeout_seconds": None,
    "start_to_close_seconds": None, "schedule_to_start_seconds": None, "pool": None,
    "pool_key": None, "priority": None}


def _spec(fn_or_name: Callable[..., Any] | str, *, name: str | None,
          launcher: LauncherSpec | None, retry: RetryPolicy | None,
          heartbeat_timeout_seconds: float | None, start_to_close_seconds: float | None,
          schedule_to_start_seconds: float | None, pool: str | None,
          pool_key: str | None, priority: int | None) -> ActivityDefinition:
    if isinstance(fn_or_name, str):
        base = name or fn_or_name
        how = launcher if launcher is not None else LauncherSpec.external()
    elif callable(fn_or_name):
        module = getattr(fn_or_name, "__module__", None)
        qualname = getattr(fn_or_name, "__qualname__", "")
        if not module or "<" in qualname:
            raise InvalidDefinition(str(name or qualname), [
                "a step's function must be a module-level function (its module:name is "
                "how the process that runs it finds it)"])
        base = name or str(getattr(fn_or_name, "__name__", qualname))
        how = launcher if launcher is not None else LauncherSpec.python(
            f"{module}:{qualname}")
    else:
        raise InvalidInput(f"a step is a function or a name, not {type(fn_or_name).__name__}",
                           field="step")
    spec = ActivityDefinition(
        base, launcher=how, retry=retry or RetryPolicy(),
        heartbeat_timeout_seconds=heartbeat_timeout_seconds,
        start_to_close_seconds=start_to_close_seconds,
        schedule_to_start_seconds=schedule_to_start_seconds, pool=pool, pool_key=pool_key,
        priority=DEFAULT_PRIORITY if priority is None else priority)
    problems = spec.problems({base})
    if "#" in base:
        problems.append(f"step name {base!r} may not hold '#' (it numbers the calls)")
    if problems:
        raise InvalidDefinition(base, problems)
    return spec


def replay(fn: Callable[[WorkflowContext, Any], Any], facts: RunFacts,
           history: History) -> Decision:
    """Run ``fn`` over ``history``: what it returned, raised, or waits for next."""
    ctx = WorkflowContext(facts, history)
    return decision_of(ctx, run_code(fn, ctx))


def run_code(fn: Callable[[WorkflowContext, Any], Any], ctx: WorkflowContext) -> Decision:
    """Run ``fn`` with ``ctx`` to its end or its first wait: the bare outcome."""
    outcome: Decision
    try:
        out = fn(ctx, ctx.input)
    except _Suspend:
        outcome = Decision("waiting")
    except Cancelled as exc:  # a BaseException: no user ``except Exception`` took it
        # (in a run that is not cancelled, the code raised it itself: the run fails)
        outcome = Decision("cancelled", error=f"Cancelled: {exc}")
    except _ContinueAsNew as cont:
        try:
            text = ctx.limits.encode(cont.input, "continue_as_new input", run_input=True)
            outcome = Decision("continued", output="null" if text is None else text)
        except InvalidInput as exc:
            outcome = Decision("failed", error=f"InvalidInput: {exc}")
    except Exception as exc:  # the user's error ends the run with it
        if ctx._closed:  # raised by a ``finally`` as the code unwound from its wait
            outcome = Decision("waiting")
        else:
            outcome = Decision("failed", error=f"{type(exc).__name__}: {exc}")
    else:
        try:
            text = ctx.limits.encode(out, "workflow output")
            outcome = Decision("completed", output="null" if text is None else text)
        except InvalidInput as exc:
            outcome = Decision("failed", error=f"InvalidInput: {exc}")
    return outcome


def decision_of(ctx: WorkflowContext, outcome: Decision) -> Decision:
    """``outcome`` with what ``ctx`` gathered: the steps to schedule, the wait, the
    dispatches, the properties (or the run's failure when they or the replay are
    wrong)."""
    if ctx.nondeterminism is not None:  # even if the code caught it: nothing is scheduled
        return Decision("failed", error=str(ctx.nondeterminism),
                        nondeterminism=ctx.nondeterminism, properties=ctx.properties)
    try:
        outcome.properties = dict(json.loads(json.dumps(ctx.properties, allow_nan=False)))
    except (TypeError, ValueError) as exc:
        return Decision("failed", error=f"InvalidInput: ctx.properties is not JSON: {exc}")
    outcome.dispatches = ctx.dispatches  # started whatever the outcome (fire and forget)
    if outcome.outcome == "waiting":
        outcome.new_steps = ctx.new_steps
        outcome.waiting_on = ctx.waiting_on
    elif ctx.new_steps and outcome.outcome == "completed":
        outcome.new_steps = []  # started but never awaited: the run's end stops them
    return outcome

