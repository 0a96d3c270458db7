"""Data-driven workflows on the public facade: redrive (mixed into
:class:`whimbrel.Whimbrel`). Maps, child workflows and failure handlers need no method:
they are fields of the definition (``map_over``, ``LauncherSpec.workflow``,
``on_failure``)."""

from __future__ import annotations

from whimbrel.contract import checks
from whimbrel.engine import Engine, Redrive


class DataFlows:
    """Redrive."""

    engine: Engine

    def redrive_workflow(self, workflow_exec_id: str) -> None:
        """Run a FAILED, CANCELLED or TIMED_OUT run again from where it broke: every
        activity that did not complete (and whose failure no ``on_failure`` took over)
        gets a new attempt, completed ones keep their output and never run again, and
        the run is RUNNING again (``WorkflowExec.redrive_count`` counts redrives). Of
        concurrent redrives of one run exactly one takes effect.

        Raises:
            InvalidInput: a malformed id.
            WorkflowNotFound: no such execution.
            RedriveNotAllowed: the run is not FAILED, CANCELLED or TIMED_OUT, one of its
                attempts still runs, or another redrive of it won (the message says).
        """
        checks.text(workflow_exec_id, "workflow_exec_id")
        self.engine.feature(Redrive).redrive(workflow_exec_id)
