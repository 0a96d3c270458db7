"""Starting a run (part of the core): the workflow item, its activity rows and fan-in
edges in two phases, and the launch of its roots; and finishing a start that died
half-way (docs/architecture.md, "Start").
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import fields, replace
from typing import Any

from whimbrel.contract import attributes as run_attributes
from whimbrel.contract import checks
from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import RequestIdReused, StateConflict
from whimbrel.contract.ids import (
    END_NODE,
    activity_exec_id,
    new_request_id,
    workflow_exec_id_for,
)
from whimbrel.contract.payloads import payload_digest
from whimbrel.contract.priority import check_priority
from whimbrel.contract.records import ActivityRecord, Change, RequestRecord, WorkflowRecord, day_of
from whimbrel.contract.states import (
    ActivityState,
    Transition,
    WorkflowState,
    WorkflowTransition,
    activity_path,
    next_workflow_state,
)
from whimbrel.contract.waits import check_input
from whimbrel.engine import rules
from whimbrel.engine.admission import admission, leaves_for_worker, ready_changes
from whimbrel.engine.core_parts import StartedRun
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.ports import runs_in_process

A = ActivityState
W = WorkflowState
WT = WorkflowTransition

#: Attributes of an activity item, by name: what a READY write sets that a root
#: created READY carries as fields.
_FIELDS = frozenset(f.name for f in fields(ActivityRecord))


def record_fields(changes: dict[str, Any]) -> dict[str, Any]:
    """The fields a READY write carries (the features' ``ready`` additions, such as a
    wait's ``waiting_for``) for a root created READY; the deadline is set apart."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in changes.items()
            if k in _FIELDS and k != "timer_epoch"}


def other_request(existing: WorkflowRecord, asked: WorkflowRecord) -> str | None:
    """How a start under an existing run's request id differs from the one that started
    it (another workflow, another input), or None: the same request again (a retry, a
    redelivered row), which returns that run."""
    if existing.workflow_name != asked.workflow_name:
        return f"of workflow {existing.workflow_name!r}, not {asked.workflow_name!r}"
    # Runs from before the digest was kept carry their input unless it was kept apart;
    # one kept apart is not read back for this (it is taken as the same).
    before = existing.input_digest if existing.input_digest is not None else \
        None if existing.input_apart else payload_digest(existing.input)
    if before is not None and before != asked.input_digest:
        return "with another input"
    return None


class Starting:
    """A run's start in two phases, its roots, and the repair of a start cut short. A
    part of the engine: ``engine.starting.op(…)``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def driven(self, spec: ActivityDefinition, name: str) -> bool:
        """Whether a root is created REQUESTED and advanced: a feature moves its attempts
        itself (``Feature.drives``), its ``when`` decides first whether it runs at all
        (engine/conditions.py takes the advance over), or its pool decides when it starts
        (the advance asks ``admit``: engine/pools.py)."""
        return spec.when is not None or spec.pool is not None \
            or self.core.hooks.first_answer(Feature.drives, spec, name) is not None

    def start(
        self,
        name: str,
        input: Any = None,
        *,
        version: int | None = None,
        request_id: str | None = None,
        source: str | None = None,
        write_request: bool = True,
        parent: str | None = None,
        priority: int | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> StartedRun:
        """Start (or resume starting) the execution for ``request_id``. Idempotent: the
        run's id, saying whether this start created it (:class:`StartedRun`).

        The starter writes the workflow item RUNNING (REQUESTED → RUNNING in one write:
        nobody else can act on a run that does not exist yet), creates the activity rows,
        reads the workflow item back — nothing is launched unless it is still RUNNING —
        and launches the roots. A definition's ``max_running`` may hold it: the item is
        written QUEUED instead (REQUESTED → QUEUED), and it starts when a run slot frees
        (engine/pools.py).

        ``parent`` is the activity attempt that starts this run as its child; ``priority``
        (0-9, None: the default) orders it among QUEUED runs and its attempts among waiting
        ones (contract/priority.py); ``attributes`` are the caller's, the run is listed by
        them (contract/attributes.py): their index items are written before the run's item.

        Raises:
            DefinitionNotFound: unknown workflow name or version.
            InvalidInput: input too large or not JSON; bad attributes.
            RequestIdReused: the request id started a run of another workflow, or with
                another input (the same request again returns its run).
        """
        payload = self.core.reads.limits.encode(input, "input", run_input=True)
        attrs = run_attributes.check(attributes)
        if priority is not None:
            check_priority(priority)
        checks.workflow_name(name)
        checks.optional_text(source, "source")
        request_id = new_request_id() if request_id is None else request_id
        wx = workflow_exec_id_for(request_id)  # refuses an empty or malformed id
        version, defn = self.core.definitions.definition(name, version)
        for hook in self.core.starting_hooks:  # e.g. the client becomes a worker for it
            hook(defn)
        check_input(defn.activities, input)  # a timer's time must be in the input
        now = self.core.clock()
        expires = None
        if write_request:
            # The trace expires a day after the end of any run shorter than a day, so
            # the end needs no write to it (ending.py, before_end).
            expires = rules.expiry(now + rules.RETENTION_SLACK_SECONDS,
                                   self.core.definitions.retention(defn))
        record = WorkflowRecord(
            workflow_exec_id=wx, workflow_name=name, version=version, state=W.RUNNING,
            workflow_request_id=request_id, input=payload, source=source, created_epoch=now,
            created_day=day_of(now), updated_epoch=now,
            check_epoch=self.next_check(now, now, defn), request_expires_epoch=expires,
            parent_activity_exec_id=parent, priority=priority,
            attributes=run_attributes.encode(attrs), input_digest=payload_digest(payload),
            history=(Change(W.REQUESTED.value, now, self.core.actor),
                     Change(W.RUNNING.value, now, self.core.actor)))
        record = self.core.hooks.shape(Feature.begin, record)  # e.g. its trace context
        # max_running: a run slot in the same write as the item, or the item QUEUED.
        ask = admission(self.core, record, defn, None, {})
        if ask is not None:
            state = W.RUNNING if ask.go else next_workflow_state(W.REQUESTED, WT.QUEUE)
            record = replace(record, state=state, **ask.changes, history=(
                record.history[0], Change(state.value, now, self.core.actor)))
        if write_request:
            self.core.store.cold.put_request(RequestRecord(
                request_id, name, now, version=version, input=payload, manual=True,
                source=source, workflow_exec_id=wx, expires_epoch=expires,
                traceparent=record.traceparent, priority=priority))
        if attrs:  # before the run's item: a listing checks the run's own attributes
            self.core.store.put_attributes(
                record, {k: run_attributes.value_text(v) for k, v in attrs.items()},
                rules.expiry(now + rules.ATTRIBUTE_SLACK_SECONDS,
                             self.core.definitions.retention(defn)))
        if not self.core.store.create_workflow(record):
            existing = self.core.reads.workflow(wx)
            other = other_request(existing, record)
            if other is not None:
                if ask is not None:
                    ask.lost(None)
                raise RequestIdReused(request_id=request_id, workflow_exec_id=wx, why=other)
            if ask is not None:
                ask.lost(existing)  # a replay: what it took serves the run, or goes back
            self.resume_start(existing, defn)  # repairs a start that died half-way
            return StartedRun(wx, created=False)
        if ask is not None:
            ask.landed(record)  # QUEUED: it waits among the pool's waiters
        if record.state is W.RUNNING:
            self.launch_roots(record, defn, self.materialize(record, defn))
        return StartedRun(wx, created=True)

    def next_check(self, created: float, now: float, defn: WorkflowDefinition,
                   interval: float | None = None) -> float:
        """The next reconcile visit of a live run: after ``interval`` (the grace period
        when None), and never later than the run's own deadline."""
        visit = now + (self.core.reconcile_grace_seconds if interval is None else interval)
        if defn.timeout_seconds is not None:
            return min(visit, created + float(defn.timeout_seconds))
        return visit

    def resume_start(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     rows: list[ActivityRecord] | None = None) -> bool:
        """Finish a start that died half-way (a redelivered request, the reconciler).
        Idempotent; True if something was missing.

        A root's row is created only once every other row and edge exists (phase two of
        ``materialize``), so a run with all its roots needs nothing; one with no root
        redoes phase one (no root ever ran, so no edge was consumed yet).
        """
        wx = wf.workflow_exec_id
        if wf.state is W.REQUESTED:  # an item from before the one-write start
            self.materialize(wf, defn)
            try:
                wf = self.core.store.move_workflow(wx, [W.REQUESTED], W.RUNNING, {},
                                              now=self.core.clock(), actor=self.core.actor,
                                              workflow_name=wf.workflow_name)
            except StateConflict:
                pass
        if wf.state is not W.RUNNING:
            self.core.ending.settle(wx)
            return False
        if wf.roots_ready is not None:
            return False  # the start finished: a missing first attempt was lost (lost.py)
        have = {a.activity_name for a in (self.core.store.list_activities(wx)
                                          if rows is None else rows)}
        missing_roots = [r for r in defn.roots if r not in have]
        if not missing_roots:
            # Died after its last root, before saying so: say it now (lost.py).
            if self.core.store.set_workflow(wx, {"roots_ready": self.core.clock()},
                                         states=[W.RUNNING]):
                self.core.hooks.observe(Feature.started, wf, defn)  # a code run's decision
            return False
        created = self.materialize(wf, defn, phase_one=len(missing_roots) == len(defn.roots))
        self.launch_roots(wf, defn, created)
        return True

    def materialize(self, wf: WorkflowRecord, defn: WorkflowDefinition, *,
                    phase_one: bool = True) -> dict[str, ActivityState]:
        """Create a run's activity rows and fan-in edges (idempotently); returns the
        roots whose rows this call created, with the state each was created in.

        Phase one: the rows of activities with upstreams (REQUESTED) and the edges.
        Phase two, once all of phase one is written: the roots, in their first state —
        QUEUED for a push launcher (its creator launches it), READY for a pull one (it
        becomes claimable), REQUESTED for an in-process launcher (its one-write move to
        RUNNING comes after the workflow read, and a crash before that leaves it for
        the reconciler, not for a time-out).
        """
        wx = wf.workflow_exec_id
        now = self.core.clock()
        if phase_one:
            jobs: list[Future[Any]] = [
                self.core.threads.submit(self.core.store.create_activity,
                                  self.core.flow.new_attempt(wf, defn, a.name, 1, now))
                for a in defn.activities if a.depends_on]
            # Fan-in edges exist only for activities with two or more upstreams (and for
            # the workflow's end when it has two or more sinks); one-upstream hand-offs
            # need none. Unconditional puts: no root exists yet, so none was consumed.
            for act in defn.activities:
                if len(act.depends_on) > 1:
                    jobs.append(self.core.threads.submit(
                        self.core.store.put_dependencies, wx, act.name, act.depends_on))
            if len(defn.sinks) > 1:
                jobs.append(self.core.threads.submit(self.core.store.put_dependencies, wx, END_NODE,
                                              defn.sinks))
            for job in jobs:
                job.result()
        created = self.core.threads.each(lambda root: (root, self.create_root(wf, defn, root, now)),
                              defn.roots)
        return {r: state for r, state in created if state is not None}

    def create_root(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                    now: float) -> ActivityState | None:
        """Create the first attempt of root ``name``; the state it was created in, or None
        when it existed already."""
        spec = defn.activity(name)
        record = self.core.flow.new_attempt(wf, defn, name, 1, now)
        launcher = self.core.launchers.get(spec.launcher.kind)
        # Code this process is no worker for is created READY, claimable by a worker.
        # (The launch itself is decided when the REQUESTED root is advanced.)
        pushed = spec.launcher.is_push and not leaves_for_worker(self.core, spec,
                                                                 launch=False)
        if (pushed and launcher is not None and runs_in_process(launcher)) \
                or self.driven(spec, name):  # a map expands when advanced (maps.py)
            return A.REQUESTED if self.core.store.create_activity(record) else None
        verb = Transition.QUEUED if pushed else Transition.READY
        path = activity_path(A.REQUESTED, verb)
        changes = rules.changes_for(spec, A.REQUESTED, path[-1], now=now,
                                    workflow_name=wf.workflow_name,
                                    retention=self.core.definitions.retention(defn))
        if path[-1] is A.READY:
            changes = ready_changes(self.core, spec, wf, now, changes)
        timer = changes.get("timer_epoch")
        record = record.with_changes(
            state=path[-1], timer_epoch=timer if isinstance(timer, float) else None,
            **record_fields(changes),
            history=record.history + tuple(Change(s.value, now, self.core.actor) for s in path))
        if "claimable" in changes:
            claim = changes["claimable"]
            made = self.core.store.create_claimable(record, claim=tuple(claim[2:]) or None)
        else:
            made = self.core.store.create_activity(record)
        return path[-1] if made else None

    def launch_roots(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     created: Mapping[str, ActivityState]) -> None:
        """Launch the roots, if the workflow is (still) RUNNING: a QUEUED root by the actor
        that created it, an in-process one by the winner of its move to RUNNING."""
        # Every first attempt exists now: say so (roots_ready, engine/lost.py), in the write
        # that also checks the run is still RUNNING (it replaces a read of the item).
        if not self.core.store.set_workflow(wf.workflow_exec_id, {"roots_ready": self.core.clock()},
                                         states=[W.RUNNING]):
            self.core.ending.settle(wf.workflow_exec_id)  # cancelled while starting
            return
        current = wf

        def go(name: str) -> None:
            spec = defn.activity(name)
            if self.driven(spec, name):
                self.core.flow.advance(current, defn, name, 1)  # e.g. expands a map (maps.py)
                return
            if not spec.launcher.is_push:  # READY, waiting to be claimed (or its event)
                if name in created:  # a signal sent while the run started is kept
                    ready = ActivityRecord(
                        wf.workflow_exec_id, activity_exec_id(wf.workflow_exec_id, name, 1),
                        name, wf.workflow_name, 1, A.READY, workflow_version=wf.version)
                    self.core.hooks.observe(Feature.readied, current, defn, ready)
                return
            path = self.core.flow.plan(current, defn, name, A.REQUESTED)
            if path[-1:] == (A.RUNNING,):
                self.core.flow.advance(current, defn, name, 1)
            elif path[-1:] == (A.READY,):
                # Left for a worker: created READY and claimable (create_root), or created
                # REQUESTED while this process was still a worker (its client began to
                # close, or the interpreter to exit, since): READY and claimable now.
                if created.get(name) is A.REQUESTED:
                    self.core.flow.advance(current, defn, name, 1)
            elif name in created:
                self.core.launches.launch(current, defn, ActivityRecord(
                    wf.workflow_exec_id, activity_exec_id(wf.workflow_exec_id, name, 1),
                    name, wf.workflow_name, 1, A.QUEUED, workflow_version=wf.version))

        self.core.threads.each(go, defn.roots)
        self.core.hooks.observe(Feature.started, wf, defn)
