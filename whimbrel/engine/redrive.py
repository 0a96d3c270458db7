"""Redrive (a feature): run an ended run again from where it broke (docs/contract.md, "Redrive").

``REDRIVE`` is a move of the workflow machine: FAILED / CANCELLED / TIMED_OUT →
RUNNING, made in one conditional write that also bumps ``redrive_count`` and is
conditional on the count the redriver read — of concurrent redrives exactly one wins,
even if the run ended again in between. Refused while an attempt is still running (a
timed-out run's stragglers): two attempts of one activity never run at once.

The winner then gives every activity that is not resolved (completed, or a failure its
``on_failure`` took over) a new attempt, of the new *generation* (``redrive_count`` on
the attempt; it starts a fresh retry budget), in two phases like a start:

1. the fan-in edges of what will run again (only towards upstreams that are not
   resolved), then every new attempt, REQUESTED; then ``redrive_ready`` on the workflow
   item says phase one is complete;
2. the new attempts whose upstreams are all resolved are moved on (launched).

Nothing is launched before every edge exists, so no activity can become READY early. A
crash in phase one leaves ``redrive_ready`` behind the count: the reconciler (and the
follow-up of any attempt from before the redrive) redoes phase one — nothing of the new
generation ran yet, so no edge was consumed — and then phase two. Completed activities
and their outputs stay; a map keeps its completed items.
"""

from __future__ import annotations

from whimbrel.contract.code.definition import CodeDefinition, is_cleanup_step
from whimbrel.contract.dataflow import split_item
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import NotAllowedNow, StateConflict
from whimbrel.contract.ids import END_NODE, parse_activity_exec_id
from whimbrel.contract.outcomes import UNSUCCESSFUL, generation, resolution, unresolved
from whimbrel.contract.records import REMOVE, ActivityRecord, WorkflowRecord, latest_of
from whimbrel.contract.states import WORKFLOW_REDRIVABLE, ActivityState, WorkflowState
from whimbrel.engine import flow
from whimbrel.engine.admission import admission
from whimbrel.engine.feature import Core, Feature, RunRead

A = ActivityState
W = WorkflowState

#: The states a run may be redriven from (FAILED, CANCELLED, TIMED_OUT).
REDRIVABLE = WORKFLOW_REDRIVABLE


class RedriveNotAllowed(NotAllowedNow):
    """A redrive is not possible now; the message says why."""

    def __init__(self, message: str, *, workflow_exec_id: str, workflow_state: str) -> None:
        super().__init__(message, workflow_exec_id=workflow_exec_id,
                         workflow_state=workflow_state)
        self.workflow_exec_id = workflow_exec_id
        self.workflow_state = workflow_state


class Redrive(Feature):
    """The REDRIVE move and its follow-ups."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.store = core.store

    # -- hooks ------------------------------------------------------------------------------

    def finish_start(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        """A redriven run's first reconcile step: finish its redrive's phase one if a
        crash cut it short (nothing else may move before)."""
        return self.followups(wf, defn)

    def waiting_attempt(self, wf: WorkflowRecord, name: str) -> int | None:
        if not wf.redrives:
            return None
        latest = latest_of(self.store.list_activities(wf.workflow_exec_id, f"{name}:"))
        return latest[name].attempt if name in latest else 1

    def follow_up(self, item: ActivityRecord, run: RunRead) -> bool:
        if item.state not in UNSUCCESSFUL or split_item(item.activity_name)[1] is not None:
            return False
        wf = run.get()
        if flow.proceeds(wf) and generation(item) < wf.redrives:
            # An attempt from before the redrive (a late follow-up, a reconcile visit):
            # its activity got (or gets now) a new attempt; it fails nothing.
            self.followups(wf, self.core.definitions.definition_of(wf))
            return True
        return False

    # -- the move ---------------------------------------------------------------------------

    def redrive(self, wx: str, *, actor: str | None = None,
                parent: str | None = None) -> WorkflowRecord:
        """Move an ended run back to RUNNING and start what did not complete.

        A child run is redriven only by its parent's redrive (``parent``: the parent's
        new attempt, which adopts the child; engine/children.py), never by itself: its
        parent would not hear of it.

        Raises:
            WorkflowNotFound: no such execution.
            RedriveNotAllowed: the run is not FAILED, CANCELLED or TIMED_OUT, an attempt
                of it still runs, another redrive won, or it is a child run.
        """
        wf = self.core.reads.workflow(wx)
        state = wf.state.value
        if wf.parent_activity_exec_id and parent is None:
            up = parse_activity_exec_id(wf.parent_activity_exec_id).workflow_exec_id
            raise RedriveNotAllowed(
                f"workflow {wx} is a child run (started by {wf.parent_activity_exec_id}): "
                f"redrive the parent {up}; its redrive redrives this run in place",
                workflow_exec_id=wx, workflow_state=state)
        if wf.state not in REDRIVABLE:
            raise RedriveNotAllowed(
                f"workflow {wx} is {state}: only a FAILED, CANCELLED or TIMED_OUT run can "
                "be redriven", workflow_exec_id=wx, workflow_state=state)
        acts = self.store.list_activities(wx)
        running = sorted(a.activity_exec_id for a in acts
                         if a.state is None or not a.state.is_terminal)
        cleaned = sorted(a.activity_name for a in acts if is_cleanup_step(a.step))
        if cleaned:
            # Its history holds what the clean-up did after the cancel: a replay that
            # runs on from the cut would meet those steps where the code asks for others.
            raise RedriveNotAllowed(
                f"workflow {wx}'s code cleaned up after its cancel (clean-up steps "
                f"{', '.join(cleaned[:5])}): it cannot run on from where it was cut; "
                "start a new run instead", workflow_exec_id=wx, workflow_state=state)
        if running:
            raise RedriveNotAllowed(
                f"workflow {wx} still has running attempts ({', '.join(running[:5])}); "
                "redrive it once they have stopped", workflow_exec_id=wx,
                workflow_state=state)
        defn = self.core.definitions.definition_of(wf)
        now = self.core.clock()
        check = now + self.core.reconcile_grace_seconds
        if defn.timeout_seconds is not None:  # its deadline counts from the redrive
            check = min(check, now + float(defn.timeout_seconds))
        changes = {"redrive_count": wf.redrives + 1, "redriven_epoch": now,
                   "check_epoch": check, "ended_epoch": REMOVE, "expires_epoch": REMOVE,
                   "error": REMOVE}
        if parent is not None:  # the adopting attempt, in the same write as the move
            changes["parent_activity_exec_id"] = parent
        # max_running: a redriven run takes a run slot like a start, in the same write;
        # with none free it is refused (a redrive is an operator's act: try again later).
        ask = admission(self.core, wf, defn, None, changes)
        if ask is not None and not ask.go:
            raise RedriveNotAllowed(
                f"workflow {wx}: {defn.max_running} run(s) of {wf.workflow_name!r} are "
                "running (max_running); redrive it when one has ended",
                workflow_exec_id=wx, workflow_state=state)
        if ask is not None:
            changes.update(ask.changes)
        if wf.input_apart:
            # Its input, kept apart, must not expire while it runs again: off first.
            self.store.expire_workflow_data(wx, None)
        try:
            moved = self.store.move_workflow(
                wx, REDRIVABLE, W.RUNNING, changes,
                now=now, actor=actor or self.core.actor, workflow_name=wf.workflow_name,
                if_unchanged={"redrive_count": wf.redrives})
        except StateConflict as lost:
            if ask is not None:
                ask.lost(lost.current)
            current = lost.current.state.value if lost.current is not None else state
            raise RedriveNotAllowed(
                f"workflow {wx} was redriven by another caller meanwhile (it is {current})",
                workflow_exec_id=wx, workflow_state=current) from None
        if ask is not None:
            ask.landed(moved)
        self.followups(moved, defn)
        return moved

    def followups(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        """Phase one (if not complete) and phase two of the run's latest redrive.
        Idempotent; True if phase one had to be (re)done."""
        gen = wf.redrives
        if not gen or wf.redrive_ready == gen or not flow.proceeds(wf):
            return False
        wx = wf.workflow_exec_id
        if isinstance(defn, CodeDefinition):  # its function decides what runs again
            self.store.set_workflow(wx, {"redrive_ready": gen}, states=[wf.state])
            self.core.hooks.observe(Feature.started, wf, defn)
            return True
        latest = latest_of(self.store.list_activities(wx))
        open_ = set(unresolved(defn, latest))
        todo = [n for n in defn.topological_order() if n in open_
                and (n not in latest or generation(latest[n]) < gen)]
        for name in todo:
            deps = defn.activity(name).depends_on
            if len(deps) > 1 and any(d in open_ for d in deps):
                self.store.put_dependencies(wx, name, [d for d in deps if d in open_])
        sinks = [s for s in defn.sinks if s in open_]
        if len(defn.sinks) > 1 and sinks:
            self.store.put_dependencies(wx, END_NODE, sinks)
        now = self.core.clock()

        def successor(name: str) -> ActivityRecord:
            before = latest[name].attempt if name in latest else 0
            record = self.core.flow.new_attempt(wf, defn, name, before + 1, now).with_changes(
                retry_base=before)
            self.store.create_activity(record)
            return record

        attempts = {r.activity_name: r.attempt for r in self.core.threads.each(successor, todo)}
        attempts.update({n: a.attempt for n, a in latest.items()
                         if n in open_ and generation(a) == gen})
        # Only while the run is as judged (not failed or cancelled since).
        self.store.set_workflow(wx, {"redrive_ready": gen}, states=[wf.state])
        ready = [n for n in attempts if all(resolution(defn, latest, d) is not None
                                            for d in defn.activity(n).depends_on)]
        self.core.threads.each(lambda n: self.core.flow.advance(wf, defn, n, attempts[n]), ready)
        if not attempts:
            self.core.flow.complete_if_done(wf, defn)  # nothing was left to run
        return True
