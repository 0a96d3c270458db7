"""The full logic: start, transition with follow-ups, cancel. Sweep/reconcile live in
:mod:`whimbrel.engine.sweep`.

Every state change is one conditional write through the store. Follow-up work is
idempotent and re-derivable from the tables, so a crash between any two writes is
repaired by a replay (stream redelivery) or by the reconciler (docs/architecture.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

from pynamodb.expressions.update import Action

from whimbrel.contract import checks
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import (
    IllegalTransition,
    InvalidInput,
    StateConflict,
    WorkflowNotFound,
)
from whimbrel.contract.ids import (
    activity_exec_id,
    new_request_id,
    shard_of,
    unit_random,
    workflow_exec_id_for,
)
from whimbrel.contract.limits import MAX_INPUT_BYTES, MAX_OUTPUT_BYTES
from whimbrel.contract.payloads import clip_error, encode_payload
from whimbrel.contract.states import (
    ACTIVITY_PENDING,
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
    WorkflowState,
    next_activity_state,
)
from whimbrel.engine.ending import WorkflowEnding
from whimbrel.engine.ports import LaunchRequest, runs_in_process
from whimbrel.engine.views import ActivityExec
from whimbrel.store import specs
from whimbrel.store.errors import ConditionFailed
from whimbrel.store.models import ActivityExecModel, WorkflowExecModel, history_entry
from whimbrel.store.store import END_NODE

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState


def day_of(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


class Engine(WorkflowEnding):
    """Whimbrel's full logic over one store. Thread-safe; share one per process.

    Args:
        store: the tables.
        clock: returns epoch seconds (inject one to drive time in tests).
        launchers: how activities start, by launcher kind.
        actor: recorded in the history of every move this engine makes.
        reconcile_grace_seconds: first reconcile visit after a start.
    """

    # -- start -----------------------------------------------------------------------

    def start(
        self,
        name: str,
        input: Any = None,
        *,
        version: int | None = None,
        request_id: str | None = None,
        source: str | None = None,
        write_request: bool = True,
    ) -> str:
        """Start (or resume starting) the execution for ``request_id``. Idempotent.

        Raises:
            DefinitionNotFound: unknown workflow name or version.
            InvalidInput: input too large or not JSON; request id used for another workflow.
        """
        payload = encode_payload(input, field="input", max_bytes=MAX_INPUT_BYTES)
        checks.workflow_name(name)
        checks.optional_text(source, "source")
        version, defn = self.definition(name, version)
        request_id = request_id or new_request_id()
        wx = workflow_exec_id_for(request_id)
        now = self.clock()
        if write_request:
            self.store.put_request(self.store.models.workflow_request(
                request_id, workflow_name=name, version=version, input=payload, manual=True,
                source=source, when_epoch=now, workflow_exec_id=wx))
        item = self.store.models.workflow_exec(
            wx,
            workflow_name=name,
            version=version,
            state=W.REQUESTED.value,
            workflow_request_id=request_id,
            input=payload,
            source=source,
            created_epoch=now,
            created_day=day_of(now),
            updated_epoch=now,
            check_shard=shard_of(wx, specs.RECONCILE_SHARDS),
            check_epoch=now + self.reconcile_grace_seconds,
            history=[history_entry(state=W.REQUESTED.value, at=now, by=self.actor)],
        )
        if not self.store.create_workflow(item):
            existing = self.store.get_workflow(wx)
            if existing is None:  # pragma: no cover - deleted between two calls
                raise WorkflowNotFound(wx)
            if existing.workflow_name != name:
                raise InvalidInput(
                    f"request id {request_id!r} already started workflow "
                    f"{existing.workflow_name!r}, not {name!r}",
                    field="workflow_request_id",
                )
            item = existing
        self.resume_start(item, defn)
        return wx

    def resume_start(self, wf: WorkflowExecModel, defn: WorkflowDefinition) -> None:
        """Create what a start needs (idempotently), move to RUNNING, launch the roots."""
        wx = wf.workflow_exec_id
        if wf.state == W.REQUESTED.value:
            self._materialize(wf, defn)
            try:
                self.store.move_workflow(wx, [W.REQUESTED.value], W.RUNNING.value, self.clock(),
                                         workflow_name=wf.workflow_name, actor=self.actor)
            except ConditionFailed:
                pass  # another starter moved it, or it was cancelled meanwhile
            wf = self._workflow(wx)
        if wf.state == W.RUNNING.value:
            for root in defn.roots:
                self._ready_and_launch(wf, defn, root, 1)
        elif wf.state in (W.CANCEL_REQUESTED.value, W.FAILED_WAITING.value):
            self.settle(wx)

    def _materialize(self, wf: WorkflowExecModel, defn: WorkflowDefinition) -> None:
        wx = wf.workflow_exec_id
        now = self.clock()
        m = self.store.models.activity_exec

        def create(act_name: str) -> None:
            spec = defn.activity(act_name)
            self.store.create_activity(m(
                wx,
                activity_exec_id(wx, act_name, 1),
                activity_name=act_name,
                workflow_name=wf.workflow_name,
                workflow_version=int(wf.version),
                attempt=1,
                state=A.REQUESTED.value,
                created_epoch=now,
                updated_epoch=now,
                heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
                history=[history_entry(state=A.REQUESTED.value, at=now, by=self.actor)],
            ))

        jobs = [self._pool.submit(create, n) for n in defn.names]
        # Fan-in edges exist only for activities with two or more upstreams (and for the
        # workflow's end when it has two or more sinks); one-upstream hand-offs need none.
        for act in defn.activities:
            if len(act.depends_on) > 1:
                jobs.append(self._pool.submit(
                    self.store.put_dependencies, wx, act.name, act.depends_on))
        if len(defn.sinks) > 1:
            jobs.append(self._pool.submit(self.store.put_dependencies, wx, END_NODE, defn.sinks))
        for job in jobs:
            job.result()

    # -- transitions -------------------------------------------------------------------

    def transition(
        self,
        activity_exec_id_: str,
        transition: Transition,
        *,
        output: Any = None,
        error: Any = None,
        actor: str | None = None,
        assume: ActivityExecModel | None = None,
    ) -> ActivityExec:
        """Apply one contract move and its follow-ups.

        ``assume`` is a (possibly partial or stale) image of the item to write against
        instead of reading it first; the write stays conditional on its state.

        Raises:
            ActivityNotFound: no such activity execution.
            IllegalTransition: the contract never allows this move for this activity.
            StateConflict: the move was possible once, but another actor moved the
                activity on first.
            InvalidInput: output too large or not JSON.
        """
        transition = Transition(transition)
        item = (assume if assume is not None and assume.state
                else self._remembered(activity_exec_id_) or self._activity(activity_exec_id_))
        current = ActivityState(item.state)
        if (current, transition) not in ACTIVITY_TRANSITIONS:
            # Judge an illegal move on a fresh read, never on a remembered image.
            item = self._activity(activity_exec_id_)
            current = ActivityState(item.state)
        try:
            new_state = next_activity_state(current, transition,
                                            activity_exec_id=activity_exec_id_)
        except IllegalTransition:
            if self._was_possible(item, transition):
                raise StateConflict(
                    expected=[s.value for (s, t) in ACTIVITY_TRANSITIONS if t is transition],
                    actual=current.value, activity_exec_id=activity_exec_id_,
                    transition=transition.value) from None
            raise
        _, defn = self.definition(item.workflow_name, self._workflow_version(item))
        while True:
            actions = self._actions_for(item, defn, new_state, output=output, error=error)
            try:
                moved = self._move(activity_exec_id_, current, new_state,
                                   actor=actor or self.actor, extra=actions)
                break
            except ConditionFailed:
                actual = self.store.get_activity(activity_exec_id_)
                self._remember(actual)
                # Someone moved the activity between our read and our write. If the
                # contract still allows this verb from where it is now, apply it from
                # there: a worker reporting COMPLETED while a cancel turned RUNNING
                # into CANCELLED_RUNNING must end it CANCELLED, not lose the report
                # and leave the workflow waiting forever (test_complete_and_cancel_at_once).
                # Each retry follows a state change, and the contract has no cycles.
                retry_to = None
                if actual is not None and actual.state != current.value:
                    retry_to = ACTIVITY_TRANSITIONS.get((ActivityState(actual.state),
                                                         transition))
                if actual is None or retry_to is None:
                    raise StateConflict(expected=current.value,
                                        actual=actual.state if actual else None,
                                        activity_exec_id=activity_exec_id_,
                                        transition=transition.value) from None
                item, current, new_state = actual, ActivityState(actual.state), retry_to
        self.after(moved)
        return ActivityExec.from_model(moved)

    @staticmethod
    def _was_possible(item: ActivityExecModel, transition: Transition) -> bool:
        seen = {h.state for h in (item.history or [])}
        return any(s.value in seen for (s, t) in ACTIVITY_TRANSITIONS if t is transition)

    def _actions_for(self, item: ActivityExecModel, defn: WorkflowDefinition,
                     new_state: ActivityState, *, output: Any = None,
                     error: Any = None) -> list[Action]:
        m = self.store.models.activity_exec
        now = self.clock()
        out: list[Action] = []
        if new_state is A.RUNNING:
            out += [m.started_epoch.set(now), m.heartbeat_epoch.set(now),
                    m.claim_shard.remove(), m.claim_key.remove()]
            hb = item.heartbeat_timeout_seconds
            if hb:
                out += [m.timer_shard.set(shard_of(item.activity_exec_id, specs.TIMER_SHARDS)),
                        m.timer_epoch.set(now + float(hb))]
        elif new_state is A.READY:
            out += [m.timer_shard.remove(), m.timer_epoch.remove()]
            spec = defn.activity(item.activity_name)
            if not spec.launcher.is_push:
                out += [m.claim_shard.set(shard_of(item.activity_exec_id, specs.CLAIM_SHARDS)),
                        m.claim_key.set(f"{item.workflow_name}/{item.activity_name}/"
                                        f"{item.activity_exec_id}")]
        elif new_state in (A.QUEUED, A.PREPARING):
            out += [m.claim_shard.remove(), m.claim_key.remove(),
                    m.timer_shard.remove(), m.timer_epoch.remove()]
        elif new_state.is_terminal:
            out += [m.ended_epoch.set(now), m.timer_shard.remove(), m.timer_epoch.remove(),
                    m.claim_shard.remove(), m.claim_key.remove()]
            if new_state is A.COMPLETED or output is not None:
                text = encode_payload(output, field="output", max_bytes=MAX_OUTPUT_BYTES)
                if text is not None:
                    out.append(m.output.set(text))
            clipped = clip_error(error)
            if clipped is not None:
                out.append(m.error.set(clipped))
        return out

    def ensure_followups(self, activity_exec_id_: str) -> None:
        """Re-run the follow-ups of the activity's current state (redelivery, repair)."""
        self.after(self._activity(activity_exec_id_))

    def after(self, item: ActivityExecModel) -> None:
        """Follow-ups of the state ``item`` is now in. Idempotent."""
        state = ActivityState(item.state)
        if state not in (A.COMPLETED, A.FAILED, A.TIMED_OUT, A.CANCELLED):
            return
        if state is A.COMPLETED:
            self._after_completed(item, self._workflow_version(item))
            return
        wf = self._workflow(item.workflow_exec_id)
        _, defn = self.definition(wf.workflow_name, int(wf.version))
        if wf.state in (W.FAILED_WAITING.value, W.CANCEL_REQUESTED.value):
            self.settle(wf.workflow_exec_id)
            return
        if wf.state != W.RUNNING.value:
            return
        if state in (A.FAILED, A.TIMED_OUT):
            self._on_failure(wf, defn, item)
        else:  # CANCELLED while the workflow runs: nothing downstream can ever run
            self.fail_workflow(wf.workflow_exec_id, wf.workflow_name,
                               f"activity {item.activity_name} was cancelled")

    def _after_completed(self, item: ActivityExecModel, version: int) -> None:
        """Follow-ups of COMPLETED, with the workflow read overlapping the READY writes.

        The read is issued after our COMPLETED write, as before: of this completion and
        a concurrent fail/cancel, one always sees the other (settle lists activities after
        moving the workflow). Marking dependents READY before the read returns is safe:
        if the workflow turns out not to be RUNNING, settle cancels what we readied, and
        nothing is queued or launched until the read says RUNNING. It saves one
        sequential round trip per hand-off (docs/benchmarks.md).
        """
        wx = item.workflow_exec_id
        wf_read = self._pool.submit(self._workflow, wx)
        _, defn = self.definition(item.workflow_name, version)
        shell = self.store.models.workflow_exec(wx, workflow_name=item.workflow_name,
                                                version=version)
        try:
            readied = self._ready_dependents(shell, defn, item.activity_name)
        finally:
            wf = wf_read.result()
        if wf.state != W.RUNNING.value:
            if readied or wf.state in (W.FAILED_WAITING.value, W.CANCEL_REQUESTED.value):
                self.settle(wx)
            return
        self._launch_readied(wf, defn, readied)
        self._maybe_complete(wf, defn, item.activity_name)

    def _ready_dependents(self, wf: WorkflowExecModel, defn: WorkflowDefinition,
                          name: str) -> list[ActivityExecModel]:
        """Move each dependent whose upstreams all COMPLETED to READY (idempotent);
        returns them (as stubs) for the launch step."""
        wx = wf.workflow_exec_id

        def release(dep: str) -> ActivityExecModel | None:
            if len(defn.activity(dep).depends_on) > 1:
                # Delete our edge, then look for any edge left. Of two upstreams that
                # finish together at least one sees none left (each deletes before it
                # reads); both may, and then the READY write picks one winner.
                self.store.delete_dependency(wx, dep, name)
                if self.store.pending_dependencies(wx, dep):
                    return None
            stub = self._activity_stub(wf, defn, dep, 1)
            self._make_ready(defn, stub)
            return stub

        return [s for s in self._each(release, defn.dependents(name)) if s is not None]

    def _launch_readied(self, wf: WorkflowExecModel, defn: WorkflowDefinition,
                        readied: list[ActivityExecModel]) -> None:
        push = [s for s in readied if defn.activity(s.activity_name).launcher.is_push]
        self._each(lambda stub: self._queue_and_launch(wf, defn, stub, A.READY), push)

    def _maybe_complete(self, wf: WorkflowExecModel, defn: WorkflowDefinition,
                        name: str) -> None:
        sinks = defn.sinks
        if name not in sinks:
            return
        if len(sinks) > 1:
            self.store.delete_dependency(wf.workflow_exec_id, END_NODE, name)
            if self.store.pending_dependencies(wf.workflow_exec_id, END_NODE):
                return
        self._finish_workflow(wf.workflow_exec_id, wf.workflow_name, [W.RUNNING.value],
                              W.COMPLETED)

    def _activity_stub(self, wf: WorkflowExecModel, defn: WorkflowDefinition, name: str,
                       attempt: int) -> ActivityExecModel:
        """The fixed attributes of an attempt, enough to write its moves without a read."""
        spec = defn.activity(name)
        return self.store.models.activity_exec(
            wf.workflow_exec_id, activity_exec_id(wf.workflow_exec_id, name, attempt),
            activity_name=name, workflow_name=wf.workflow_name,
            workflow_version=int(wf.version), attempt=attempt,
            heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds)

    def _make_ready(self, defn: WorkflowDefinition, stub: ActivityExecModel) -> None:
        try:
            self._move(stub.activity_exec_id, A.REQUESTED, A.READY,
                       extra=self._actions_for(stub, defn, A.READY))
        except ConditionFailed:
            pass  # already READY (or further): whoever won may have died before QUEUED

    def _ready_and_launch(self, wf: WorkflowExecModel, defn: WorkflowDefinition, name: str,
                          attempt: int) -> None:
        """Move a REQUESTED attempt on: QUEUED and launched (push launcher, no upstream),
        or READY (and then QUEUED and launched for push launchers)."""
        spec = defn.activity(name)
        item = self._activity_stub(wf, defn, name, attempt)
        if spec.launcher.is_push and not spec.depends_on:
            self._queue_and_launch(wf, defn, item, A.REQUESTED)
            return
        self._make_ready(defn, item)
        if spec.launcher.is_push:
            self._queue_and_launch(wf, defn, item, A.READY)

    def _queue_and_launch(self, wf: WorkflowExecModel, defn: WorkflowDefinition,
                          item: ActivityExecModel, from_state: ActivityState) -> None:
        spec = defn.activity(item.activity_name)
        try:
            self._move(item.activity_exec_id, from_state, A.QUEUED,
                       extra=self._actions_for(item, defn, A.QUEUED))
        except ConditionFailed:
            return  # someone else queued it: only the winner launches
        launcher = self.launchers.get(spec.launcher.kind)
        request = LaunchRequest(
            activity_exec_id=item.activity_exec_id,
            activity_name=item.activity_name,
            workflow_exec_id=wf.workflow_exec_id,
            workflow_name=wf.workflow_name,
            attempt=int(item.attempt),
            config=dict(spec.launcher.config),
            endpoint_url=self.store.endpoint_url,
            table_prefix=self.store.table_prefix,
        )
        try:
            if launcher is None:
                raise RuntimeError(
                    f"no {spec.launcher.kind!r} launcher is configured in this process")
            if runs_in_process(launcher):
                # The run needs the workflow item; this one was read after the upstream
                # finished (or at the start), so hand it over instead of a second read.
                done: Future[WorkflowExecModel] = Future()
                done.set_result(wf)
                self.prefetched_workflow(item.activity_exec_id, done)
            launcher.launch(request)
        except Exception as exc:  # any launch failure fails this attempt, recorded
            log.warning("launch of %s failed: %s", item.activity_exec_id, exc)
            try:
                self.transition(item.activity_exec_id, Transition.FAILED,
                                error=f"launch failed: {type(exc).__name__}: {exc}")
            except StateConflict:
                pass  # the activity moved on by itself (it did start after all)

    def _on_failure(self, wf: WorkflowExecModel, defn: WorkflowDefinition,
                    item: ActivityExecModel) -> None:
        spec = defn.activity(item.activity_name)
        attempt = int(item.attempt)
        if attempt < spec.retry.max_attempts:
            # The failure time is on the item, so every replay computes the same retry.
            failed_at = float(item.ended_epoch or item.updated_epoch)
            delay = spec.retry.delay_after(attempt, unit_random(item.activity_exec_id))
            not_before = failed_at + delay
            nxt = activity_exec_id(wf.workflow_exec_id, item.activity_name, attempt + 1)
            m = self.store.models.activity_exec
            now = self.clock()
            self.store.create_activity(m(
                wf.workflow_exec_id, nxt,
                activity_name=item.activity_name,
                workflow_name=wf.workflow_name,
                workflow_version=int(wf.version),
                attempt=attempt + 1,
                state=A.REQUESTED.value,
                created_epoch=now,
                updated_epoch=now,
                heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
                not_before_epoch=not_before,
                # Armed so the sweep launches it when due (and finds it if we die now).
                timer_shard=shard_of(nxt, specs.TIMER_SHARDS),
                timer_epoch=not_before,
                history=[history_entry(state=A.REQUESTED.value, at=now, by=self.actor)],
            ))
            if not_before <= now:
                self._ready_and_launch(wf, defn, item.activity_name, attempt + 1)
            return
        why = f"activity {item.activity_name} {item.state} after {attempt} attempt(s)"
        if item.error:
            why += f": {item.error}"
        self.fail_workflow(wf.workflow_exec_id, wf.workflow_name, why)


def pending_states() -> Iterable[str]:
    return (s.value for s in ACTIVITY_PENDING)
