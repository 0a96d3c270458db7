"""Data-driven workflows, put together: maps, child workflows, failure handlers and
redrive (issue 14), as one layer of the engine between the hand-offs (``flow.py``) and
the calls of :class:`~whimbrel.engine.engine.Engine`.

Each part overrides the hand-off it extends and calls ``super()``, so the parts compose
in any order (and with other layers of the same kind).
"""

from __future__ import annotations

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import NotAllowedNow
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import Transition
from whimbrel.engine.children import CHILD, Children
from whimbrel.engine.handlers import FailureHandling
from whimbrel.engine.maps import Maps, is_map_node
from whimbrel.engine.redrive import Redriving


class EngineDriven(NotAllowedNow):
    """A move asked for an attempt only the engine moves: a map's own row (its items
    decide its end) or an attempt that runs a child workflow (the child decides)."""

    def __init__(self, *, activity_exec_id: str, transition: str, what: str) -> None:
        super().__init__(
            f"{transition} refused for {activity_exec_id}: it {what}, and only the engine "
            "moves it; cancel the workflow instead", activity_exec_id=activity_exec_id,
            transition=transition)
        self.activity_exec_id = activity_exec_id


def refuse_outside_move(defn: WorkflowDefinition, item: ActivityRecord,
                        verb: Transition) -> None:
    """Raise when an outside caller asks to move an attempt the engine drives.

    Raises:
        EngineDriven: a map's own row, or an attempt running a child workflow.
    """
    spec = defn.activity(item.activity_name)
    what = None
    if is_map_node(spec, item.activity_name):
        what = "is a map (its items decide its end)"
    elif spec.launcher.kind == CHILD:
        what = "runs a child workflow (the child's end decides its end)"
    if what is not None:
        raise EngineDriven(activity_exec_id=item.activity_exec_id, transition=verb.value,
                           what=what)


class DataFlow(Redriving, Children, Maps, FailureHandling):
    """Maps, child workflows, failure handlers and redrive."""

    def finish_redrive(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        """The reconciler's first step on a redriven run: finish its redrive's phase one
        if a crash cut it short (nothing else may move before). True if it did."""
        return self.redrive_followups(wf, defn)

    def repair_data(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                    acts: list[ActivityRecord]) -> bool:
        """The reconciler's part for maps and child workflows; True if it repaired."""
        maps = self.repair_maps(wf, defn, acts)
        return self.repair_children(wf, defn, acts) or maps
