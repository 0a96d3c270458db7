"""The notify consumer: stream records of ``workflow_exec``, ``activity_exec`` and
``map_item`` (a map's items) in, events out, each exactly once (docs/events.md).

For one record :class:`Notifier` decides from the item's old and new image which facts
it announces — a run ended, an attempt failed for good (``failed_for_good``, engine/rules.py), a
wait started (READY with ``waiting_for``) — then, per event, claims its marker in the
``notification`` table, publishes, and marks it sent (``store/notifications.py``). A
redelivered record finds the marker sent and publishes nothing.

Errors are sorted as in the intake: a retryable one (throttling, a publish that failed)
is raised so the record is retried; anything else Whimbrel raises on purpose means the
record can never make its event (an image that does not decode, a definition gone): it
is recorded as a rejection (source ``notify``) and the batch goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from whimbrel.contract import notifications as events
from whimbrel.contract.code.definition import CodeDefinition
from whimbrel.contract.dataflow import CONTINUE, split_item
from whimbrel.contract.definitions import ActivityDefinition
from whimbrel.contract.errors import InvalidInput, WhimbrelError
from whimbrel.contract.notifications import FAILURE_STATES, Notification
from whimbrel.contract.payloads import decode_payload, is_ref
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import WORKFLOW_TERMINAL, ActivityState, WorkflowState
from whimbrel.contract.waits import WAIT_KINDS
from whimbrel.engine import Engine, ddb_part, failed_for_good, record_rejection
from whimbrel.observe.publishers import Publisher
from whimbrel.store.codec import activity_record, workflow_record
from whimbrel.store.parts.notifications import Claim

__all__ = ["SOURCE_NOTIFY", "MarkerStore", "Notifier", "NotifyOutcome", "NotifyResult"]

log = logging.getLogger("whimbrel.notify")

#: The ``source`` of rejection rows for records the notify consumer could not use.
SOURCE_NOTIFY = "notify"
#: The key a large output (kept in S3) is published under, in its value's place.
OUTPUT_REF = "output_ref"

_ENDED = frozenset(s.value for s in WORKFLOW_TERMINAL)
_FAILED = frozenset(s.value for s in FAILURE_STATES)


class MarkerStore(Protocol):
    """The ``notification`` table: the notify feature's port (implemented by
    ``whimbrel.store.parts.notifications.Markers``, ``store.markers``)."""

    def claim_notification(self, event_id: str, *, detail_type: str, workflow_exec_id: str,
                           now: float) -> Claim: ...

    def mark_notification_sent(self, event_id: str, *, now: float) -> None: ...


class NotifyOutcome(StrEnum):
    PUBLISHED = "PUBLISHED"  #: at least one event went out
    DUPLICATE = "DUPLICATE"  #: its events had gone out already (a redelivery)
    IGNORED = "IGNORED"  #: a write that is no event
    REJECTED = "REJECTED"  #: can never make its event (recorded as a rejection)


@dataclass(frozen=True)
class NotifyResult:
    """What one record did; the handler turns it into log lines and metrics."""

    outcome: NotifyOutcome
    published: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()
    #: Events published again after an unfinished delivery (a PENDING marker).
    resumed: tuple[str, ...] = ()
    reason: str | None = None


class Notifier:
    """Turns stream records of the execution tables into published events.

    Args:
        engine: reads definitions (retry policies, sinks) and a completed run's outputs.
        markers: the ``notification`` table.
        publisher: where events go.
    """

    def __init__(self, engine: Engine, markers: MarkerStore, publisher: Publisher) -> None:
        self.engine = engine
        self.markers = markers
        self.publisher = publisher

    def process(self, record: Mapping[str, Any]) -> NotifyResult:
        """Publish the events ``record`` announces, each once.

        Raises:
            WhimbrelError: only retryable ones (the record should be retried).
        """
        try:
            found = self.notifications(record)
        except WhimbrelError as exc:
            if exc.retryable:
                raise
            reason = f"no event can be made of this record: {exc}"
            record_rejection(self.engine.store, source=SOURCE_NOTIFY, record=record,
                             reason=reason, error_type=type(exc).__name__,
                             now=self.engine.clock())
            return NotifyResult(NotifyOutcome.REJECTED, reason=reason)
        if not found:
            return NotifyResult(NotifyOutcome.IGNORED)
        published: list[str] = []
        duplicates: list[str] = []
        resumed: list[str] = []
        for note in found:
            claim = self.publish_once(note)
            if claim is Claim.SENT:
                duplicates.append(note.event_id)
            else:
                published.append(note.event_id)
                if claim is Claim.RESUMED:
                    resumed.append(note.event_id)
        outcome = NotifyOutcome.PUBLISHED if published else NotifyOutcome.DUPLICATE
        return NotifyResult(outcome, tuple(published), tuple(duplicates), tuple(resumed))

    def publish_once(self, note: Notification) -> Claim:
        """Claim the event's marker, publish unless it was sent, then mark it sent.

        Raises:
            WhimbrelError: (retryable) the claim or the publish failed; the marker stays
                PENDING and the next delivery publishes.
        """
        claim = self.markers.claim_notification(
            note.event_id, detail_type=note.detail_type.value,
            workflow_exec_id=str(note.detail["workflow_exec_id"]), now=self.engine.clock())
        if claim is Claim.SENT:
            return claim
        self.publisher.publish([note])
        self.markers.mark_notification_sent(note.event_id, now=self.engine.clock())
        log.info("event %s %s", note.detail_type.value, note.event_id)
        return claim

    # -- deciding ---------------------------------------------------------------------

    def notifications(self, record: Mapping[str, Any]) -> list[Notification]:
        """The events ``record`` announces (usually none or one).

        Raises:
            InvalidInput: the record's images do not decode.
            DefinitionNotFound: the run's definition is gone.
        """
        if record.get("eventName") not in ("INSERT", "MODIFY"):
            return []
        ddb = ddb_part(record)
        new, old = ddb.get("NewImage"), ddb.get("OldImage")
        if not isinstance(new, Mapping):
            raise InvalidInput("stream record has no dynamodb.NewImage", field="NewImage")
        # Only the state of the old image matters: the move this write made.
        previous = _text(old, "state") if isinstance(old, Mapping) else None
        if "activity_exec_id" in new:
            return self._activity(_decoded(activity_record, new), previous, new)
        return self._workflow(_decoded(workflow_record, new), previous, new)

    def _workflow(self, wf: WorkflowRecord, previous: str | None,
                  image: Mapping[str, Any]) -> list[Notification]:
        if not wf.state.is_terminal or previous in _ENDED:
            return []
        output = self._output(wf) if wf.state is WorkflowState.COMPLETED else None
        return [events.workflow_ended(
            wf, previous=previous, redrive_count=int(_number(image, "redrive_count")),
            output=output)]

    def _output(self, wf: WorkflowRecord) -> Any:
        """The outputs of the run's sinks (what a caller of ``wait`` would look at); for
        a run ended early, the output the attempt that ended it gave."""
        defn = None if wf.ended_by is not None else self.engine.definitions.definition_of(wf)
        if defn is None or isinstance(defn, CodeDefinition):
            # A code run's output is what its function returned, kept on the run item.
            if is_ref(wf.output):  # kept in S3: published as its reference
                return {OUTPUT_REF: wf.output}
            return decode_payload(wf.output, field="output") if wf.output else None
        latest = self.engine.reads.latest_attempts(wf.workflow_exec_id)
        # A sink's output kept in S3 goes out as its reference: an event stays under
        # EventBridge's 256 KB, and publishing reads no object.
        return {name: {OUTPUT_REF: latest[name].output} if is_ref(latest[name].output)
                else self.engine.inputs.output_of(latest[name])  # a map's list whole
                for name in defn.sinks if name in latest
                and latest[name].state is ActivityState.COMPLETED}

    def _activity(self, item: ActivityRecord, previous: str | None,
                  image: Mapping[str, Any]) -> list[Notification]:
        state = item.state
        found: list[Notification] = []
        if state in FAILURE_STATES and previous not in _FAILED:
            spec = self._spec(item)
            if failed_for_good(spec, item) and not _expected_timeout(spec, item):
                found.append(events.activity_failed(
                    item, previous=previous, max_attempts=spec.retry.max_attempts))
        waiting_for = _text(image, "waiting_for")
        if state is ActivityState.READY and previous != ActivityState.READY.value \
                and waiting_for:
            found.append(events.wait_started(item, waiting_for=waiting_for,
                                             approvers=_texts(image, "approvers")))
        return found


    def _spec(self, item: ActivityRecord) -> ActivityDefinition:
        """The definition of ``item``'s activity in the version its run captured (a map's
        item ``m#3`` runs as its map ``m``).

        Raises:
            DefinitionNotFound: that version is not registered.
            InvalidInput: the version has no such activity.
        """
        defn = self.engine.definitions.definition_of(item)
        if isinstance(defn, CodeDefinition):
            # A code run's steps are known from its rows (bound by definition_of), not
            # from names in the definition: a failed step is announced as any activity.
            return defn.activity(item.activity_name)
        if split_item(item.activity_name)[0] not in defn.names:
            raise InvalidInput(f"workflow {defn.name!r} has no activity "
                               f"{item.activity_name!r}", field="activity_name")
        return defn.activity(item.activity_name)


def _expected_timeout(spec: ActivityDefinition, item: ActivityRecord) -> bool:
    """A wait that timed out with ``on_failure: continue``: the run goes on as designed
    (no signal or decision came in time, so the next step runs); that is no failure to
    announce."""
    return spec.launcher.kind in WAIT_KINDS and item.state is ActivityState.TIMED_OUT \
        and spec.on_failure == CONTINUE


def _decoded(decode: Any, image: Mapping[str, Any]) -> Any:
    """An image through the store's codec; what it cannot read is bad input."""
    try:
        return decode(image)
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError,
            RecursionError) as exc:
        raise InvalidInput(f"stream image does not decode: {type(exc).__name__}: {exc}",
                           field="NewImage") from None


def _text(image: Mapping[str, Any], name: str) -> str | None:
    typed = image.get(name)
    value = typed.get("S") if isinstance(typed, Mapping) else None
    return value if isinstance(value, str) and value else None


def _texts(image: Mapping[str, Any], name: str) -> Sequence[str] | None:
    """A list (``L`` of ``S``) or string set (``SS``) attribute; None when absent."""
    typed = image.get(name)
    if not isinstance(typed, Mapping):
        return None
    if isinstance(typed.get("SS"), list):
        return sorted(str(v) for v in typed["SS"])
    if isinstance(typed.get("L"), list):
        return [str(v["S"]) for v in typed["L"] if isinstance(v, Mapping) and "S" in v]
    return None


def _number(image: Mapping[str, Any], name: str) -> float:
    typed = image.get(name)
    try:
        return float(typed["N"]) if isinstance(typed, Mapping) and "N" in typed else 0.0
    except (TypeError, ValueError):
        return 0.0
