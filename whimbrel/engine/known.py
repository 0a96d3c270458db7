"""What this engine last saw of each activity (a part of the engine): the last image of
the items it wrote or read, and workflow reads started ahead for a run that follows.

An image is used only as the *expected* state of the next conditional write, never as
the truth: a stale entry makes that write lose, and the store hands back the item as it
is.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future

from whimbrel.contract.records import ActivityRecord, Changes, WorkflowRecord
from whimbrel.contract.states import ActivityState
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.metrics import report_activity_end
from whimbrel.engine.payloads import resolved
from whimbrel.engine.views import ActivityExec

#: How many activity items an engine remembers from its own writes and reads.
KNOWN_ITEMS = 4096


class Known:
    """The last images of activity items, and workflow reads started ahead."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._lock = threading.Lock()
        self._known: OrderedDict[str, ActivityRecord] = OrderedDict()
        # Workflow reads started for the run that follows (a claim, a launch).
        self._prefetch: OrderedDict[str, Future[WorkflowRecord]] = OrderedDict()

    def remember(self, item: ActivityRecord | None) -> None:
        if item is None or item.state is None:
            return
        with self._lock:
            self._known[item.activity_exec_id] = item
            self._known.move_to_end(item.activity_exec_id)
            while len(self._known) > KNOWN_ITEMS:
                self._known.popitem(last=False)

    def remembered(self, aeid: str) -> ActivityRecord | None:
        """What this engine last wrote or read of ``aeid`` (may be stale), or None."""
        with self._lock:
            return self._known.get(aeid)

    def remembered_activity(self, aeid: str) -> ActivityExec | None:
        item = self.remembered(aeid)
        return ActivityExec.from_record(resolved(self.core, item)) if item is not None else None


    def prefetched_workflow(self, aeid: str, read: Future[WorkflowRecord]) -> None:
        """Keep a read of ``aeid``'s workflow item, started ahead, for its run."""
        with self._lock:
            self._prefetch[aeid] = read
            while len(self._prefetch) > KNOWN_ITEMS:
                self._prefetch.popitem(last=False)

    def take_prefetched_workflow(self, aeid: str) -> Future[WorkflowRecord] | None:
        with self._lock:
            return self._prefetch.pop(aeid, None)


    def move(self, aeid: str, expected: ActivityState, path: Sequence[ActivityState],
             changes: Changes, *, actor: str | None = None,
             due_by: float | None = None, claimed: bool = False,
             written_by: float | None = None, late_at: float | None = None,
             ) -> ActivityRecord:
        """``store.move_activity`` that remembers the new image.

        Raises:
            StateConflict: the activity was not in ``expected`` (``current`` says where).
        """
        moved = self.core.store.move_activity(aeid, expected, path, changes, now=self.core.clock(),
                                         actor=actor or self.core.actor, due_by=due_by,
                                         claimed=claimed, written_by=written_by,
                                         late_at=late_at)
        self.remember(moved)
        if path[-1].is_terminal:
            report_activity_end(self.core.metrics, moved)
            # e.g. its pool slot is given back (pools.py)
            self.core.hooks.observe(Feature.attempt_ended, moved)
        return moved
