"""The engine's reads (a part of the engine): a run's item and its input, an attempt's
item, payloads kept apart, and the views a caller is shown."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING

from whimbrel.contract import checks
from whimbrel.contract.dataflow import items_prefix
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import ActivityNotFound, DefinitionNotFound, WorkflowNotFound
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.outcomes import map_items, map_output
from whimbrel.contract.payloads import PayloadLimits, is_ref
from whimbrel.contract.records import ActivityRecord, WorkflowRecord, latest_of
from whimbrel.contract.states import ActivityState
from whimbrel.engine.dataviews import run_view, with_child
from whimbrel.engine.payloads import resolved, resolved_all
from whimbrel.engine.shared_reads import SharedReads
from whimbrel.engine.views import ActivityExec, WorkflowExec

if TYPE_CHECKING:
    from whimbrel.engine.feature import Core

log = logging.getLogger("whimbrel.engine")

#: How many runs' inputs kept apart (up to 128 KB each) an engine keeps once read.
KNOWN_INPUTS = 64


class Reads:
    """Consistent reads of runs and attempts, and what a caller is shown of them."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._lock = threading.Lock()
        # Inputs the store keeps apart from their run's item, once read (they never change).
        self._inputs: OrderedDict[str, str | None] = OrderedDict()
        #: Guard reads of a run, shared by this engine's callers (engine/shared_reads.py).
        self.guard_reads: SharedReads[WorkflowRecord] = SharedReads(self.workflow)

    def workflow(self, wx: str) -> WorkflowRecord:
        """The workflow item (consistent read).

        Raises:
            WorkflowNotFound: no such execution.
        """
        checks.text(wx, "workflow_exec_id")
        wf = self.core.store.get_workflow(wx)
        if wf is None:
            raise WorkflowNotFound(wx)
        return wf

    def workflow_after(self, wx: str) -> WorkflowRecord:
        """A consistent read of the workflow item begun after this call: a guard's read
        (created first, read second), shared with this engine's other guards of the run.

        Raises:
            WorkflowNotFound: no such execution.
        """
        return self.guard_reads.read_after(wx)

    def run_input(self, wf: WorkflowRecord) -> str | None:
        """The run's input (JSON text, None when it has none): on the run's item, or, for
        an input the store keeps apart (``input_apart``), read once per process — only
        where it is needed (an attempt's input, a map over the input, the run's status)."""
        if not wf.input_apart:
            return self.payload(wf.input, "input")
        wx = wf.workflow_exec_id
        with self._lock:
            if wx in self._inputs:
                self._inputs.move_to_end(wx)
                return self.payload(self._inputs[wx], "input")
        text = self.core.store.workflow_input(wx)  # kept as stored: S3's cache bounds bytes
        if text is None:
            log.warning("workflow %s: its input, kept apart, is gone (expired?)", wx)
        with self._lock:
            self._inputs[wx] = text
            while len(self._inputs) > KNOWN_INPUTS:
                self._inputs.popitem(last=False)
        return self.payload(text, "input")

    @property
    def limits(self) -> PayloadLimits:
        """How large a payload may be (a payload bucket raises the limits)."""
        return self.core.store.payload_limits

    def payload(self, text: str | None, field: str = "payload") -> str | None:
        """A payload's JSON text whole (a reference read once per process; readers only,
        never a guard). Raises ``PayloadMissing`` when its object cannot be read."""
        return self.core.store.payload_text(text, field)

    def with_input(self, wf: WorkflowRecord) -> WorkflowRecord:
        """``wf`` with its input on it (read when it is kept apart): what a view shows."""
        if is_ref(wf.output):
            wf = replace(wf, output=self.payload(wf.output, "output"))
        return replace(wf, input=self.run_input(wf)) if wf.input_apart or is_ref(wf.input) \
            else wf

    def activity(self, aeid: str) -> ActivityRecord:
        """The activity item (consistent read), remembered.

        Raises:
            ActivityNotFound: no such attempt.
            InvalidInput: not an activity execution id.
        """
        parse_activity_exec_id(aeid)
        item = self.core.store.get_activity(aeid)
        if item is None:
            raise ActivityNotFound(aeid)
        self.core.known.remember(item)
        return item

    def get_workflow(self, wx: str, *, with_activities: bool = True) -> WorkflowExec:
        wf = self.with_input(self.workflow(wx))
        if not with_activities:
            return WorkflowExec.from_record(wf)
        try:
            defn: WorkflowDefinition | None = self.core.definitions.definition_of(wf)
        except DefinitionNotFound:
            defn = None  # still show the run (without map progress or child links)
        return run_view(defn, wf, resolved_all(self.core, self.core.store.list_activities(wx)))

    def get_activity(self, aeid: str) -> ActivityExec:
        item = self.activity(aeid)
        view = ActivityExec.from_record(resolved(self.core, item))
        if item.state is ActivityState.COMPLETED and item.map_size and item.output is None:
            # A map's list too large for its row is kept on its items: never None here.
            items = map_items(resolved_all(self.core, self.core.store.list_activities(
                item.workflow_exec_id, items_prefix(item.activity_name),
                map_size=item.map_size)), item.activity_name)
            view = replace(view, output=map_output(items, item.map_size))
        try:
            defn = self.core.definitions.definition_of(item)
        except DefinitionNotFound:
            return view  # still show the attempt (without its child link)
        return with_child(defn, view, item.child_workflow_exec_id)

    def latest_attempts(self, wx: str) -> dict[str, ActivityRecord]:
        return latest_of(self.core.store.list_activities(wx))
