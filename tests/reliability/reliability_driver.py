"""Plays the world around one workflow: the client, the activity processes (launched
through a RecordingLauncher or claimed as ``external``) and the scheduled sweep.

Any actor may die (``Crash``) inside a call. A dead client retries only when nothing of
its call was recorded (the caller saw an error); a dead activity process never comes
back; a dead sweep is simply followed by the next one. Time moves only when nothing
else can happen, so heartbeats go stale, retries come due and reconcile visits happen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.errors import WhimbrelError
from whimbrel.contract.ids import parse_activity_exec_id, workflow_exec_id_for
from whimbrel.contract.states import ActivityState, Transition
from whimbrel.engine.conditions import Conditions
from whimbrel.testing import Crash, RecordingLauncher, StepClock

W = WorkflowState
LAMBDA = LauncherSpec("lambda", {"function": "f"})
#: Idle time step: longer than every heartbeat and start timeout used below.
IDLE_STEP = 150.0
MAX_ROUNDS = 80

#: (activity name, attempt) -> "complete" | "fail" | "hang"
Behaviour = Callable[[str, int], str]
#: Called every round with the client, the run's id and ``call`` (which counts crashes):
#: the outside world's moves on waits and suspension. Stateless (it reads the tables)
#: and safe to repeat; returns True when it did something.
Events = Callable[[Whimbrel, str, "Call"], bool]
Call = Callable[[str, Callable[[], object]], tuple[bool, object]]


def act(name: str, *deps: str, external: bool = False, attempts: int = 3,
        hb: float | None = 30.0) -> ActivityDefinition:
    return ActivityDefinition(
        name, deps, launcher=LauncherSpec.external() if external else LAMBDA,
        heartbeat_timeout_seconds=hb, start_timeout_seconds=60.0,
        retry=RetryPolicy(max_attempts=attempts, initial_interval_seconds=5.0))


@dataclass
class Plan:
    name: str
    definition: WorkflowDefinition
    expected: WorkflowState
    behaviour: Behaviour = lambda name, attempt: "complete"
    cancel_when_running: str | None = None
    #: Input of the run (a map's list).
    input: dict[str, object] = field(default_factory=lambda: {"n": 1})
    #: Definitions of the child runs it starts.
    children: tuple[WorkflowDefinition, ...] = ()
    #: When the run has FAILED once, redrive it (the plan's behaviour then lets it end).
    redrive: bool = False
    events: Events | None = None
    #: Pools the definition names, (name, slots), set before it is registered.
    pools: tuple[tuple[str, int], ...] = ()
    #: Called (through ``call``, until it went through) before the run starts.
    before: Events | None = None
    #: Keyed pools (``<pool>~<key>``) its activities take, checked as ``pools`` are.
    keyed: tuple[str, ...] = ()


@dataclass
class Outcome:
    workflow_exec_id: str
    crashes: int = 0
    rounds: int = 0
    log: list[str] = field(default_factory=list)


def run_plan(wb: Whimbrel, clock: StepClock, launcher: RecordingLauncher, plan: Plan,
             request_id: str) -> Outcome:
    wx = workflow_exec_id_for(request_id)
    out = Outcome(wx)

    def call(what: str, fn: Callable[[], object]) -> tuple[bool, object]:
        """(crashed, result); expected refusals (lost races) come back as results."""
        try:
            return False, fn()
        except Crash as exc:
            out.crashes += 1
            out.log.append(f"{what}: {exc}")
            return True, None
        except WhimbrelError as exc:
            out.log.append(f"{what}: {type(exc).__name__}")
            return False, exc

    if plan.before is not None:
        for _ in range(3):  # a dead caller tries again (its call is idempotent)
            if plan.before(wb, wx, call):
                break
    crashed, _ = call("start", lambda: wb.start_workflow(plan.definition.name, plan.input,
                                                         request_id=request_id))
    if crashed and wb.store.get_workflow(wx) is None:
        call("start again", lambda: wb.start_workflow(plan.definition.name, plan.input,
                                                      request_id=request_id))
    procs: dict[str, str] = {}  # activity_exec_id -> launched | running | gone
    cancel_sent = False
    for out.rounds in range(1, MAX_ROUNDS + 1):
        wf = wb.engine.reads.get_workflow(wx)
        # A child's id is known once its parent's attempt runs; the child itself may not
        # exist yet (its start was lost: the reconciler starts it).
        runs = [wf, *(wb.engine.reads.get_workflow(c) for c in wf.child_workflow_exec_ids
                      if wb.store.get_workflow(c) is not None)]
        if plan.redrive and wf.state is W.FAILED and not wf.redrive_count \
                and all(a.state.is_terminal for a in (*wf.activities, *wf.items)):
            crashed, _ = call("redrive", lambda: wb.redrive_workflow(wx))
            if crashed and wb.engine.reads.workflow(wx).state is W.FAILED:
                call("redrive again", lambda: wb.redrive_workflow(wx))
            continue
        # Done when every run ended with nothing left to do: no attempt running, and no
        # reconcile visit pending (a child keeps one until its parent heard of its end).
        if all(r.state.is_terminal and all(a.state.is_terminal for a in (*r.activities,
                                                                          *r.items))
               and getattr(wb.store.get_workflow(r.workflow_exec_id), "check_epoch", 1) is None
               for r in runs):
            return out
        progressed = False
        mine = {r.workflow_exec_id for r in runs}
        for req in launcher.take():
            if req.workflow_exec_id in mine:
                procs[req.activity_exec_id] = "launched"
        waiting = [a for a in (*wf.activities, *wf.items) if a.state is ActivityState.READY
                   and not plan.definition.activity(a.activity_name).launcher.is_push]
        claimed: object = None
        if waiting:  # claim only when something waits: each claim reads four shards
            crashed, claimed = call("claim",
                                    lambda: wb.claim(workflow_name=plan.definition.name))
        if claimed is not None and not isinstance(claimed, WhimbrelError):
            procs[claimed.activity_exec_id] = "running"  # type: ignore[attr-defined]
            progressed = True
        if plan.events is not None and plan.events(wb, wx, call):
            progressed = True
        for aeid, stage in sorted(procs.items()):
            key = parse_activity_exec_id(aeid)
            if stage == "launched":
                crashed, res = call(f"run {aeid}",
                                    lambda a=aeid: wb.transition_activity(a, Transition.RUNNING))
                procs[aeid] = "running" if not crashed and not isinstance(res, Exception) \
                    else "gone"
                progressed = True
            elif stage == "running":
                if plan.cancel_when_running == key.activity_name and not cancel_sent:
                    cancel_sent = True
                    crashed, _ = call("cancel", lambda: wb.cancel_workflow(wx))
                    state = wb.store.get_workflow(wx).state  # type: ignore[union-attr]
                    if crashed and state not in (W.CANCEL_REQUESTED.value, W.CANCELLED.value):
                        call("cancel again", lambda: wb.cancel_workflow(wx))
                what = plan.behaviour(key.activity_name, key.attempt)
                procs[aeid] = "gone"
                progressed = True
                if what == "hang":
                    continue  # alive but silent: the heartbeat listener must notice
                if what == "end":  # ActivityRun.end_workflow's move (issue 22)
                    call(f"end {aeid}",
                         lambda a=aeid: wb.engine.feature(Conditions).end_early(a, {"early": 1}))
                    continue
                verb = Transition.COMPLETED if what == "complete" else Transition.FAILED
                call(f"{what} {aeid}", lambda a=aeid, v=verb: wb.transition_activity(
                    a, v, output={"ok": True}, error="planned failure",
                    error_type="Planned" if v is Transition.FAILED else None))
        if not progressed:
            clock.advance(IDLE_STEP)
            call("sweep", lambda: wb.sweep(clock()))
    raise AssertionError(f"{plan.name}: workflow {wx} did not finish in {MAX_ROUNDS} rounds: "
                         f"{wb.get_workflow(wx)}\n" + "\n".join(out.log))


def plans() -> list[Plan]:
    return [
        Plan("diamond", WorkflowDefinition("diamond", (
            act("A"), act("B", "A"), act("C", "A", external=True), act("D", "B", "C"))),
            W.COMPLETED),
        Plan("retry", WorkflowDefinition("retry", (act("A"), act("B", "A"))),
             W.COMPLETED, behaviour=lambda n, a: "fail" if (n, a) == ("A", 1) else "complete"),
        Plan("time-out", WorkflowDefinition("timeout", (act("A"), act("B", "A"))),
             W.COMPLETED, behaviour=lambda n, a: "hang" if (n, a) == ("A", 1) else "complete"),
        Plan("fail-cascade", WorkflowDefinition("cascade", (
            act("A"), act("B", "A", attempts=2), act("C", "B"), act("D", "A"))),
            W.FAILED, behaviour=lambda n, a: "fail" if n == "B" else "complete"),
        Plan("cancel", WorkflowDefinition("cancel", (act("A"), act("B", "A"))),
             W.CANCELLED, cancel_when_running="A"),
        # Issue 14: a map whose second item fails for good, handled; a child run; a
        # failed run redriven.
        Plan("map-handler", WorkflowDefinition("maph", (
            replace(act("M", attempts=1), map_over="$input.xs", max_concurrency=1,
                    on_failure="H"),
            act("H"), act("Z", "M"))), W.COMPLETED, input={"xs": ["a", "b"]},
            behaviour=lambda n, a: "fail" if n == "M#1" else "complete"),
        # Issue 19: a plain map (its items in map_item, each next item created before
        # the run is read) over an input kept apart from the run's item (over 1 KB).
        Plan("map-parts", WorkflowDefinition("mapp", (
            replace(act("M"), map_over="$input.xs", max_concurrency=2), act("Z", "M"))),
            W.COMPLETED, input={"xs": ["a" * 400, "b" * 400, "c" * 400]}),
        Plan("child", WorkflowDefinition("parent", (
            ActivityDefinition("S", launcher=LauncherSpec.workflow("kid")),
            act("B", "S"))), W.COMPLETED,
            children=(WorkflowDefinition("kid", (act("K"),)),)),
        # B's planned failure is non-retryable: final at once, while a lost launch of it
        # (a crash) is still retried.
        Plan("redrive", WorkflowDefinition("redrive", (act("A"), replace(
            act("B", "A"), retry=RetryPolicy(max_attempts=3, initial_interval_seconds=5.0,
                                             non_retryable=("Planned",))))),
             W.COMPLETED, redrive=True,
             behaviour=lambda n, a: "fail" if (n, a) == ("B", 1) else "complete"),
        # Issue 22: an if/else whose branches join (one SKIPPED, its edge consumed), and
        # a run ended early by an attempt while another runs.
        Plan("if-else-join", WorkflowDefinition("ifelse", (
            act("A"), replace(act("B", "A"), when="A.ok"),
            replace(act("C", "A"), when="!A.ok"),
            replace(act("D", "B", "C"), trigger="none_failed"))), W.COMPLETED),
        Plan("end-early", WorkflowDefinition("early", (
            act("A"), act("B", "A"), act("C", "A"), act("D", "B", "C"))), W.COMPLETED,
            behaviour=lambda n, a: "end" if n == "B" else "complete"),
        # Issue 31: two attempts of one run end it early; one claim wins, a crash between
        # a claim and its COMPLETED is finished by the claimer's retry.
        Plan("two-enders", WorkflowDefinition("early2", (
            act("A"), act("B", "A"), act("C", "A"), act("D", "B", "C"))), W.COMPLETED,
            behaviour=lambda n, a: "end" if n in ("B", "C") else "complete"),
        *wait_plans(),
        *pool_plans(),
    ]


def wait(name: str, *deps: str, launcher: LauncherSpec, attempts: int = 1) -> ActivityDefinition:
    return ActivityDefinition(name, deps, launcher=launcher,
                              retry=RetryPolicy(max_attempts=attempts,
                                                initial_interval_seconds=5.0))


def _latest(wb: Whimbrel, wx: str, name: str) -> ActivityState | None:
    act = wb.engine.reads.get_workflow(wx).latest_activities.get(name)
    return act.state if act is not None else None


def _signal_until_received(wb: Whimbrel, wx: str, call: Call) -> bool:
    """The sender resends the same signal (same id) until its wait received it."""
    if _latest(wb, wx, "S") is not ActivityState.COMPLETED:
        call("signal", lambda: wb.signal(wx, "go", {"paid": 1}, signal_id="payment-1"))
    return False  # resending is not progress: time still moves (sweeps repair crashes)


def _approve_when_waiting(wb: Whimbrel, wx: str, call: Call) -> bool:
    gate = wb.engine.reads.get_workflow(wx).latest_activities.get("G")
    if gate is None or gate.state is not ActivityState.READY:
        return False
    call("approve", lambda: wb.approve(gate.activity_exec_id, by="alice"))
    return True


def _suspend_then_resume(wb: Whimbrel, wx: str, call: Call) -> bool:
    """Suspend while A runs; resume once nothing runs; repeat a call that died."""
    wf = wb.engine.reads.get_workflow(wx)
    running = any(a.state.is_active for a in wf.activities)
    if wf.state is W.RUNNING and running and W.SUSPENDED.value not in \
            {h.state for h in wf.history}:
        call("suspend", lambda: wb.suspend_workflow(wx))
        return True
    if wf.state is W.SUSPENDED and not running:
        call("resume", lambda: wb.resume_workflow(wx))
        return True
    return False


def wait_plans() -> list[Plan]:
    """Waits and suspension (issue 13): a signal sent before its wait is READY (and sent
    again every round), an approval, a timer, a suspend and resume around a running
    activity."""
    return [
        Plan("signal", WorkflowDefinition("signal", (
            act("A"), wait("S", "A", launcher=LauncherSpec.signal("go", timeout_seconds=900),
                           attempts=2), act("B", "S"))),
            W.COMPLETED, events=_signal_until_received),
        Plan("approval", WorkflowDefinition("approval", (
            act("A"), wait("G", "A", launcher=LauncherSpec.approval(approvers=["alice"])),
            act("B", "G"))), W.COMPLETED, events=_approve_when_waiting),
        Plan("timer", WorkflowDefinition("timer", (
            act("A"), wait("T", "A", launcher=LauncherSpec.timer(100)), act("B", "T"))),
            W.COMPLETED),
        Plan("suspend", WorkflowDefinition("suspend", (
            act("A", external=True), act("B", "A"), act("C", "A", external=True))),
            W.COMPLETED, events=_suspend_then_resume),
    ]


# -- pools and max_running (issue 22) ---------------------------------------------------------

#: States in which an attempt holds its pool's slot (launched, until it ends).
_HOLDING = {ActivityState.QUEUED, ActivityState.PREPARING, ActivityState.RUNNING,
            ActivityState.CANCELLED_RUNNING}


def _one_slot(wb: Whimbrel, wx: str, call: Call) -> bool:
    """B and C share a pool of one slot: never both launched at once (checked every round,
    whatever crashed)."""
    wf = wb.engine.reads.get_workflow(wx)
    holding = [a.activity_name for a in wf.activities if a.activity_name in ("B", "C")
               and a.state in _HOLDING]
    assert len(holding) <= 1, f"pool of one slot held by {holding}: {wf}"
    return False


def _one_per_key(wb: Whimbrel, wx: str, call: Call) -> bool:
    """B and C take the same key of a pool of one slot per key, E another key (issue 29):
    B and C never both launched at once, whatever crashed; E is not held back by them."""
    wf = wb.engine.reads.get_workflow(wx)
    holding = [a.activity_name for a in wf.activities if a.activity_name in ("B", "C")
               and a.state in _HOLDING]
    assert len(holding) <= 1, f"key 'a' of a pool of one slot held by {holding}: {wf}"
    return False


def blocker_id(wx: str) -> str:
    return f"blocker-of-{wx}"


def _start_blocker(wb: Whimbrel, wx: str, call: Call) -> bool:
    """The run that holds the one run slot when the plan's run starts (so it is QUEUED)."""
    crashed, _ = call("start blocker", lambda: wb.start_workflow(
        "maxrun", {"n": 0}, request_id=blocker_id(wx)))
    return not crashed


def _drive_blocker(wb: Whimbrel, wx: str, call: Call) -> bool:
    """Run the blocker's attempts to their end (its launches are not the plan's), and
    check that the two runs of ``max_running: 1`` never run at once."""
    other = workflow_exec_id_for(blocker_id(wx))
    runs = [r for r in (wb.store.get_workflow(wx), wb.store.get_workflow(other))
            if r is not None]
    live = [r.workflow_exec_id for r in runs
            if not r.state.is_terminal and r.state not in (W.QUEUED, W.REQUESTED)]
    assert len(live) <= 1, f"max_running 1, running: {live}"
    if wb.store.get_workflow(other) is None:
        return False
    did = False
    for act in wb.engine.reads.get_workflow(other).latest_activities.values():
        if act.state is ActivityState.QUEUED:
            call(f"blocker run {act.activity_exec_id}", lambda a=act.activity_exec_id:
                 wb.transition_activity(a, Transition.RUNNING))
            did = True
        elif act.state is ActivityState.RUNNING:
            call(f"blocker end {act.activity_exec_id}", lambda a=act.activity_exec_id:
                 wb.transition_activity(a, Transition.COMPLETED, output={"ok": True}))
            did = True
    return did


#: Per run of the "pool-lowered" plan: the attempts that held its pool when its limit
#: came down from 2 to 1.
_LOWERED: dict[str, set[str]] = {}


def _raise_again(wb: Whimbrel, wx: str, call: Call) -> bool:
    """Each run of the plan starts with the pool at 2 slots (an earlier run lowered it)."""
    crashed, _ = call("raise", lambda: wb.set_pool("lp", slots=2, per_second=None))
    return not crashed


def _lower_when_held(wb: Whimbrel, wx: str, call: Call) -> bool:
    """Issue 31: once an attempt holds the pool, lower it from 2 slots to 1; from then on
    an attempt admitted later holds it only alone (nothing is admitted while the slots
    held are not below the new limit)."""
    wf = wb.engine.reads.get_workflow(wx)
    holding = {a.activity_exec_id for a in wf.latest_activities.values()
               if a.activity_name in ("B", "C", "E") and a.state in _HOLDING}
    if wx not in _LOWERED:
        if not holding:
            return False
        crashed, _ = call("lower", lambda: wb.set_pool("lp", slots=1, per_second=None))
        if not crashed:
            _LOWERED[wx] = holding
        return True
    assert not holding - _LOWERED[wx] or len(holding) <= 1, \
        f"lowered to 1 while {_LOWERED[wx]} held it, now held by {holding}: {wf}"
    return False


def _child_takes_the_pool(wb: Whimbrel, wx: str, call: Call) -> bool:
    """The child definition takes its parent's pool after the parent was registered (a
    new version each run): only the run can show the nesting (issue 31)."""
    crashed, _ = call("child takes the pool", lambda: wb.register_workflow(
        WorkflowDefinition("nestkid", (replace(act("K"), pool="np"),))))
    return not crashed


def pool_plans() -> list[Plan]:
    """A pool of one slot shared by two branches (a crash anywhere: no slot leaked, never
    two holders); a second run of a ``max_running: 1`` definition, QUEUED behind the
    first and started by its end; a pool lowered from 2 slots to 1 while held, one of
    whose holders times out and is retried (issue 31)."""
    return [
        # The launcher holds the pool's one slot; its child's attempt would wait for it:
        # it fails at once (PoolDeadlock), so do the child and the parent, and the slot
        # comes back, whatever write the process died at.
        Plan("pool-nested", WorkflowDefinition("nestparent", (ActivityDefinition(
            "S", launcher=LauncherSpec.workflow("nestkid"), pool="np",
            retry=RetryPolicy(max_attempts=1)),)), W.FAILED, pools=(("np", 1),),
            children=(WorkflowDefinition("nestkid", (act("K"),)),),
            before=_child_takes_the_pool),
        Plan("pool-lowered", WorkflowDefinition("lowered", (
            act("A"), *(replace(act(n, "A"), pool="lp") for n in ("B", "C", "E")),
            act("D", "B", "C", "E"))), W.COMPLETED, pools=(("lp", 2),),
            behaviour=lambda n, a: "hang" if (n, a) == ("B", 1) else "complete",
            before=_raise_again, events=_lower_when_held),
        Plan("pool", WorkflowDefinition("pooled", (
            act("A"), replace(act("B", "A"), pool="cp"), replace(act("C", "A"), pool="cp"),
            act("D", "B", "C"))), W.COMPLETED, events=_one_slot, pools=(("cp", 1),)),
        Plan("pool-keyed", WorkflowDefinition("keyed", (
            act("A"), *(replace(act(n, "A"), pool="kp", pool_key=key)
                        for n, key in (("B", "input.t1"), ("C", "input.t1"), ("E", "A.ok"))),
            act("D", "B", "C", "E"))), W.COMPLETED, events=_one_per_key, pools=(("kp", 1),),
            behaviour=lambda n, a: "hang" if (n, a) == ("B", 1) else "complete",
            input={"n": 1, "t1": "a"}, keyed=("kp~a", "kp~true")),
        Plan("max-running", WorkflowDefinition("maxrun", (act("A"), act("B", "A")),
                                               max_running=1),
             W.COMPLETED, before=_start_blocker, events=_drive_blocker),
    ]


def peer(wb: Whimbrel, **options: Any) -> Whimbrel:
    """Another process's client on ``wb``'s tables: on the in-memory twin when ``wb`` is
    (``Whimbrel.in_memory``), else at ``wb``'s endpoint."""
    if wb.twin is not None:
        other = Whimbrel(transport=wb.twin.connect(), table_prefix=wb.table_prefix, **options)
        other.twin = wb.twin
        return other
    return Whimbrel(endpoint_url=wb.endpoint_url, table_prefix=wb.table_prefix, **options)


def local_client(endpoint: str, table_prefix: str, clock: StepClock,
                 launcher: RecordingLauncher) -> Whimbrel:
    """A client on DynamoDB Local at ``endpoint``, its tables created."""
    client = Whimbrel(endpoint_url=endpoint, table_prefix=table_prefix, clock=clock,
                      launchers={"lambda": launcher})
    client.create_tables()
    return client
