"""Verbs of an ``activity_event`` row that are not activity transitions.

A Simple API client reports a contract move by writing its verb (``Transition``) in the
row's ``transition`` attribute; these are the other things one row can ask for
(docs/simple-api.md).
"""

from __future__ import annotations

from enum import StrEnum


class Command(StrEnum):
    """Row verbs beside the contract's transitions."""

    #: The activity is alive: push its heartbeat deadline forward.
    HEARTBEAT = "HEARTBEAT"
    #: Run an ended workflow (``workflow_exec_id``) again from where it broke.
    REDRIVE = "REDRIVE"
    #: Send a named signal (``signal``, optional ``payload`` and ``signal_id``) to a run
    #: (``workflow_exec_id``; no ``activity_exec_id``).
    SIGNAL = "SIGNAL"
    #: Approve or reject an activity waiting for approval (``by``, optional ``comment``).
    APPROVE = "APPROVE"
    REJECT = "REJECT"
    #: Suspend or resume a run (``workflow_exec_id``; no ``activity_exec_id``).
    SUSPEND = "SUSPEND"
    RESUME = "RESUME"
    #: Complete a RUNNING attempt (``activity_exec_id``) and end its run COMPLETED with
    #: the row's ``output`` (issue 22): what has not started is SKIPPED, what runs is asked
    #: to stop as a cancel asks it.
    END_WORKFLOW = "END_WORKFLOW"


#: Verbs whose row addresses a workflow execution rather than an activity execution.
WORKFLOW_COMMANDS = frozenset({Command.SIGNAL, Command.SUSPEND, Command.RESUME,
                               Command.REDRIVE})
