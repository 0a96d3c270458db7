"""The activity side: claim, heartbeat from a background thread, complete or fail."""

from __future__ import annotations

import logging
import random
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from whimbrel.contract.code.definition import CodeDefinition, is_cleanup_step
from whimbrel.contract.conditions import INPUT_FROM_ERROR
from whimbrel.contract.dataflow import handlers, split_item
from whimbrel.contract.errors import (
    ActivityCancelled,
    ActivityStopped,
    ActivityTimedOut,
    InvalidInput,
    StateConflict,
    StoreError,
    WhimbrelError,
)
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.limits import MAX_HEARTBEAT_DETAILS_BYTES
from whimbrel.contract.payloads import decode_payload, encode_payload
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
    WorkflowState,
)
from whimbrel.engine import ActivityExec, Conditions, Engine, Pace, tracing

log = logging.getLogger("whimbrel.worker")
A = ActivityState
#: The error type of an attempt whose ``input_from`` failed on its document.
INPUT_ERROR = INPUT_FROM_ERROR
#: The background heartbeat never wakes more often than this.
MIN_BEAT_SLEEP_SECONDS = 0.05


def heartbeat(engine: Engine, activity_exec_id: str,
              image: ActivityRecord | None = None, details: Any = None) -> ActivityState:
    """Record that the activity is alive and push its deadline forward; ``details`` (any
    JSON value), when given, replace the progress the attempt keeps (the next attempt
    reads them as ``ActivityRun.previous_details``). Always writes.

    Returns the activity's state (RUNNING).

    Raises:
        ActivityCancelled: the activity was cancelled (the heartbeat was still recorded
            when it is CANCELLED_RUNNING); stop work.
        ActivityTimedOut: the system already gave up on this activity.
        StateConflict: the activity is not running (never started, or finished).
        InvalidInput: ``details`` not JSON or too large (nothing was written).
    """
    return engine.heartbeats.heartbeat(activity_exec_id, image, _details(details))


def _details(details: Any) -> str | None:
    return encode_payload(details, field="details", max_bytes=MAX_HEARTBEAT_DETAILS_BYTES)


class ActivityRun:
    """Handed to the code of a running activity.

    Attributes:
        input: the workflow's input merged with the activity's static input (a map
            item's: its element; a failure handler's: the error it handles).
        upstream: outputs of the activities this one depends on, by name.
        output: set this to the activity's result; recorded on COMPLETED.
        item_index: a map item's index in its list (None for any other activity).
        previous_details: the heartbeat details of the attempt before (see the property).
    """

    def __init__(self, engine: Engine, activity: ActivityExec, input: Any,
                 upstream: dict[str, Any] | None = None,
                 image: ActivityRecord | None = None) -> None:
        self._engine = engine
        self._image = image
        self.activity = activity
        self.activity_exec_id = activity.activity_exec_id
        self.activity_name = activity.activity_name
        self.workflow_exec_id = activity.workflow_exec_id
        self.workflow_name = activity.workflow_name
        self.attempt = activity.attempt
        self.input = input
        self._upstream = upstream
        self._upstream_errors: dict[str, str] | None = None
        self.item_index = split_item(activity.activity_name)[1]
        self.output: Any = None
        self._stop: ActivityStopped | None = None
        self.stop_event = threading.Event()
        #: True once :meth:`end_workflow` completed the attempt.
        self.ended = False
        self._span: tracing.Span | None = None
        self._trace = image.traceparent if image is not None else None
        self._pace = Pace.of(image, engine.clock())
        self._pace_lock = threading.Lock()  # the background thread and the code share it
        self._previous: tuple[Any] | None = None

    @property
    def trace_context(self) -> dict[str, str]:
        """The W3C trace context to continue this attempt's trace elsewhere
        (``traceparent`` and, when there is one, ``tracestate``; empty when the run is not
        traced): the attempt's own span while ``run_activity`` runs, else the run's."""
        if self._span is not None and self._span.get_span_context().is_valid:
            return tracing.headers_of(self._span)
        return tracing.headers(self._trace)

    @property
    def upstream(self) -> dict[str, Any]:
        """Outputs of the activities this one depends on, by name (read on first use:
        an activity that never looks at them costs no Query)."""
        if self._upstream is None:
            self._upstream, self._upstream_errors = upstream_view(self._engine, self.activity)
        return self._upstream

    @property
    def upstream_errors(self) -> dict[str, str]:
        """Errors of the upstreams this activity runs past (``on_failure: continue``;
        their ``upstream`` entry is None), by name."""
        if self._upstream_errors is None:
            self._upstream, self._upstream_errors = upstream_view(self._engine, self.activity)
        return self._upstream_errors

    @property
    def stop_requested(self) -> ActivityStopped | None:
        """The reason to stop, once the background heartbeat learned of one."""
        return self._stop

    def _note_stop(self, exc: ActivityStopped) -> None:
        self._stop = exc
        self.stop_event.set()

    @property
    def previous_details(self) -> Any:
        """The latest heartbeat ``details`` an earlier attempt of this activity kept (its
        progress, to resume from), or None. Read on first use (one Query)."""
        if self._previous is None:
            text = self._engine.heartbeats.previous_details(
                self.workflow_exec_id, self.activity_name, self.attempt)
            self._previous = (decode_payload(text, field="heartbeat_details"),)
        return self._previous[0]

    def heartbeat(self, details: Any = None) -> None:
        """Say the activity is alive, and (``details``: any JSON value) how far it got.

        Writes only when it is worth a write (engine/heartbeats.py): when 80% of the
        heartbeat timeout has passed since the last one written, or when ``details``
        changed; in between, at most every third of the timeout, one read learns whether
        to stop. Call it as often as you like.

        Raises:
            ActivityCancelled: cancelled; finish up and return (or let it propagate).
            ActivityTimedOut: the result will be ignored.
            InvalidInput: ``details`` not JSON or too large (nothing was written).
        """
        if self._stop is not None:
            raise self._stop
        text = _details(details)
        with self._pace_lock:
            now = self._engine.clock()
            plan = self._pace.plan(now, text)
            try:
                if plan == "write":
                    self._engine.heartbeats.heartbeat(self.activity_exec_id, self._image, text)
                    self._pace.wrote(now, text)
                    tracing.heartbeat_event(self._span)
                elif plan == "check":
                    self._engine.heartbeats.check_running(self.activity_exec_id)
                    self._pace.checked(now)
            except ActivityStopped as exc:
                self._note_stop(exc)
                raise

    def _next_beat_in(self) -> float:
        with self._pace_lock:
            return self._pace.next_in(self._engine.clock())

    def check(self) -> None:
        """Raise if the background heartbeat learned that the activity must stop."""
        if self._stop is not None:
            raise self._stop

    def end_workflow(self, output: Any = None) -> bool:
        """Complete this attempt now and end its run COMPLETED with ``output`` (the run's
        output, in place of its sinks'). What has not started is SKIPPED; what runs is
        asked to stop, as a cancel asks it (its heartbeat says so). Leaving the block
        afterwards records nothing more.

        Returns:
            True when this call ended the run; False when another end came first (another
            attempt's ``end_workflow``, a cancel): this attempt then ended as a plain
            report of its end would (COMPLETED with ``output``, or CANCELLED).

        Raises:
            InvalidInput: ``output`` is not JSON or too large (nothing was recorded).
            StateConflict: the attempt is no longer RUNNING (cancelled or timed out).
        """
        self.output = output
        moved = self._engine.feature(Conditions).end_early(self.activity_exec_id, output,
                                                               image=self._image)
        self.ended = True
        return moved.state is A.COMPLETED and bool(moved.ends_workflow)


def activity_input(engine: Engine, activity: ActivityExec,
                   wf: WorkflowRecord | None = None) -> tuple[Any, WorkflowState]:
    """The activity's input (workflow input merged with its static input) and the
    workflow's state, from ``wf`` when the caller already read the workflow item."""
    if wf is None:
        wf = engine.reads.workflow(activity.workflow_exec_id)
    defn = engine.definitions.definition_of(wf)
    name = activity.activity_name
    own = engine.known.remembered(activity.activity_exec_id)
    if own is None and (split_item(name)[1] is not None or name in handlers(defn)):
        own = engine.reads.activity(activity.activity_exec_id)  # its input is on its row
    return engine.inputs.launch_input(wf, defn, own.input if own else None, name), wf.state


def upstream_outputs(engine: Engine, activity: ActivityExec) -> dict[str, Any]:
    """What ``activity`` sees of its upstreams, by name: the outputs of those that
    COMPLETED (a handler's in place of a failure it handled; None past a failure with
    ``on_failure: continue``)."""
    return upstream_view(engine, activity)[0]


def upstream_view(engine: Engine,
                  activity: ActivityExec) -> tuple[dict[str, Any], dict[str, str]]:
    """:func:`upstream_outputs` and the errors of the upstreams it runs past."""
    version = activity.workflow_version
    if version is None:
        version = engine.reads.workflow(activity.workflow_exec_id).version
    _, defn = engine.definitions.definition(activity.workflow_name, version)
    if isinstance(defn, CodeDefinition) or not defn.activity(activity.activity_name).depends_on:
        # (a code run's step has no upstreams: its input is what the code gave it)
        return {}, {}
    return engine.inputs.upstream_values(activity.workflow_exec_id, defn, activity.activity_name)


class _Heartbeater(threading.Thread):
    """Heartbeats in the background, waking when the attempt's pace says a write or a
    read is due (``interval``, when given, caps the sleep)."""

    def __init__(self, run: ActivityRun, interval: float | None) -> None:
        super().__init__(name=f"whimbrel-heartbeat-{run.activity_exec_id}", daemon=True)
        self.run_ = run
        self.interval = interval
        self.done = threading.Event()

    def _sleep(self) -> float:
        due = self.run_._next_beat_in()
        return max(MIN_BEAT_SLEEP_SECONDS, min(due, self.interval) if self.interval else due)

    def run(self) -> None:
        while not self.done.wait(self._sleep()):
            try:
                if isinstance(self.run_.stop_requested, ActivityTimedOut):
                    # Its code runs on: its beats (recorded, never its state) keep its
                    # pool slot until the code stops (engine/pool_holders.py).
                    self.run_._engine.heartbeats.beat_after_time_out(self.run_.activity_exec_id)
                else:
                    self.run_.heartbeat()
            except ActivityTimedOut:
                continue
            except ActivityStopped:
                return
            except WhimbrelError as exc:  # transient store trouble: try again next tick
                log.warning("heartbeat of %s failed: %s", self.run_.activity_exec_id, exc)


@contextmanager
def run_activity(engine: Engine, activity_exec_id: str, *,
                 heartbeat_interval: float | None = None) -> Iterator[ActivityRun]:
    """Mark the activity RUNNING (unless a claim already did), heartbeat in the
    background, and on exit record COMPLETED with ``run.output`` or FAILED with the error.

    Raises:
        ActivityCancelled / ActivityTimedOut: before the block, when the activity can no
            longer run. Inside the block they end the activity quietly.
        StateConflict: someone else is running this activity.
    """
    key = parse_activity_exec_id(activity_exec_id)
    # The workflow item (input, state) is read while the RUNNING write is in flight (or
    # was read by whoever moved it to RUNNING): the hand-off costs no extra round trip.
    wf_read = (engine.known.take_prefetched_workflow(activity_exec_id)
               or engine.threads.in_background(engine.reads.workflow, key.workflow_exec_id))
    try:
        image = _start(engine, activity_exec_id)
        wf = wf_read.result()
    finally:
        wf_read.cancel()
    current = ActivityExec.from_record(image)
    try:
        input_, wf_state = activity_input(engine, current, wf)
    except InvalidInput as exc:  # an input_from expression failed on its document
        _finish(engine, image, Transition.FAILED, error=str(exc),
                error_type=INPUT_ERROR)
        raise
    run = ActivityRun(engine, current, input_, image=image)
    beat: _Heartbeater | None = None
    hb = current.heartbeat_timeout_seconds
    if hb:
        beat = _Heartbeater(run, heartbeat_interval)
        beat.start()
    try:
        if wf_state not in (WorkflowState.RUNNING, WorkflowState.SUSPENDED) and not (
                # a code run's clean-up step runs while its run is being cancelled
                wf_state is WorkflowState.CANCEL_REQUESTED and is_cleanup_step(image.step)):
            # The workflow is ending (or was never running): stop before doing any work.
            _finish(engine, image, Transition.CANCEL)
            raise ActivityCancelled(activity_exec_id)
        # The activity's code runs inside its span: its own spans join the run's trace.
        with tracing.activity_span(image) as run._span:
            yield run
    except ActivityStopped as exc:
        run._note_stop(exc)
        _finish(engine, image, Transition.FAILED, error=str(exc),
                error_type=type(exc).__name__)
    except BaseException as exc:
        if run.ended:  # it completed already (end_workflow): nothing more to record
            raise
        _finish(engine, image, Transition.FAILED, error=_describe(exc),
                error_type=type(exc).__name__)
        raise
    else:
        if not run.ended:
            _finish(engine, image, Transition.COMPLETED, output=run.output)
    finally:
        if beat is not None:
            beat.done.set()


def _start(engine: Engine, activity_exec_id: str) -> ActivityRecord:
    """Move the activity to RUNNING (unless this process already did: a claim, or the
    engine's one-write launch of an in-process activity)."""
    known = engine.known.remembered(activity_exec_id)
    if known is not None and known.state is A.RUNNING:
        return known
    try:
        return engine.moves.start_running(activity_exec_id)
    except StateConflict as lost:
        current = lost.current or engine.reads.activity(activity_exec_id)
    if current.state is A.RUNNING:
        return current  # claimed by another path of this worker
    if current.state is A.CANCELLED:
        raise ActivityCancelled(activity_exec_id, current.state.value)
    if current.state is A.TIMED_OUT:
        raise ActivityTimedOut(activity_exec_id)
    raise StateConflict(expected=[A.READY.value, A.QUEUED.value, A.PREPARING.value],
                        actual=current.state.value if current.state else None,
                        activity_exec_id=activity_exec_id,
                        transition=Transition.RUNNING.value, current=current)


#: Back-off between tries of an attempt's end write after retryable store trouble
#: (throttling past the store's own retries): first pause and cap, doubled each time
#: with jitter.
FINISH_BACKOFF_SECONDS = (0.1, 10.0)


def _finish(engine: Engine, image: ActivityRecord, transition: Transition, *,
            output: Any = None, error: str | None = None,
            error_type: str | None = None) -> None:
    """Record the attempt's end, and keep trying while the store's trouble is
    retryable: a result must not be lost to throttling (issue 19).

    Bounded by the attempt's own close deadline (past it the sweep times the attempt
    out, and the result would be refused anyway). An attempt with no close deadline is
    retried as long as this process lives (its heartbeat, if it has one, keeps running
    meanwhile); a process that dies is the crash case its heartbeat timeout covers
    (docs/reliability.md). A try after one whose write landed although it raised finds
    the attempt already in the end state: that is success, and the follow-ups (which
    may be what failed) are run again (they are idempotent).
    """
    aeid = image.activity_exec_id
    deadline = image.close_epoch
    pause, cap = FINISH_BACKOFF_SECONDS
    tries = 0
    while True:
        try:
            _finish_once(engine, image, transition, output=output, error=error,
                         error_type=error_type, again=tries > 0)
            return
        except StoreError as exc:
            if not exc.retryable or (deadline is not None and engine.clock() >= deadline):
                engine.incidents.count("finish_given_up")
                log.error("end of %s (%s) not recorded after %d tries: %s", aeid,
                          transition.value, tries + 1, exc)
                raise
            tries += 1
            engine.incidents.count("finish_retried")
            wait = pause * (0.5 + random.random() / 2)  # jitter
            log.warning("end of %s (%s) not recorded yet (%s): again in %.2f s", aeid,
                        transition.value, exc, wait)
            time.sleep(wait)
            pause = min(pause * 2, cap)


def _finish_once(engine: Engine, image: ActivityRecord, transition: Transition, *,
                 output: Any, error: str | None, error_type: str | None,
                 again: bool) -> None:
    aeid = image.activity_exec_id
    try:
        try:
            engine.moves.finish(aeid, transition, output=output, error=error,
                          error_type=error_type, image=image)
        except InvalidInput as exc:
            # The result itself is unusable (too large, not JSON): record why instead of
            # leaving the activity RUNNING with nothing to end it.
            engine.moves.finish(aeid, Transition.FAILED, error=f"output rejected: {exc}",
                          error_type=type(exc).__name__, image=image)
    except StateConflict as exc:
        current = exc.current if exc.current is not None or not again \
            else engine.reads.activity(aeid)
        if again and current is not None and current.state in _ends_of(transition):
            # A retry of a write that landed (its answer, or a follow-up, failed):
            # the attempt's end is recorded; redo what follows it.
            engine.incidents.count("finish_landed")
            engine.flow.after(current)
            return
        # TIMED_OUT (or already finished): the system moved on; the result is ignored.
        log.warning("result of %s not recorded: %s", aeid, exc)
    except ActivityStopped as exc:
        log.warning("result of %s not recorded: %s", aeid, exc)
    except StoreError:
        raise
    except WhimbrelError as exc:
        if exc.to_dict().get("current") in (A.TIMED_OUT.value, A.CANCELLED.value):
            log.warning("result of %s not recorded: %s", aeid, exc)
            return
        raise


def _ends_of(transition: Transition) -> set[ActivityState]:
    """The states ``transition`` leads to (COMPLETED from RUNNING; CANCELLED from
    CANCELLED_RUNNING...), plus FAILED for an end whose output was rejected."""
    ends = {t for (_, v), t in ACTIVITY_TRANSITIONS.items() if v is transition}
    return ends | ({A.FAILED} if transition is Transition.COMPLETED else set())


def _describe(exc: BaseException) -> str:
    if getattr(exc, "concise", False):  # the message already says all (e.g. exit codes)
        return str(exc)
    tail = "".join(traceback.format_exception(exc)[-6:])
    return f"{type(exc).__name__}: {exc}\n{tail}"
