"""What the engine needs from the outside, as Protocols: launchers and a clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

Clock = Callable[[], float]

ENV_ACTIVITY_EXEC_ID = "WHIMBREL_ACTIVITY_EXEC_ID"
ENV_ACTIVITY_NAME = "WHIMBREL_ACTIVITY_NAME"
ENV_WORKFLOW_EXEC_ID = "WHIMBREL_WORKFLOW_EXEC_ID"
ENV_WORKFLOW_NAME = "WHIMBREL_WORKFLOW_NAME"
ENV_ENDPOINT_URL = "WHIMBREL_ENDPOINT_URL"
ENV_TABLE_PREFIX = "WHIMBREL_TABLE_PREFIX"


@dataclass(frozen=True)
class LaunchRequest:
    """Everything a launcher needs to start one activity attempt."""

    activity_exec_id: str
    activity_name: str
    workflow_exec_id: str
    workflow_name: str
    attempt: int
    config: Mapping[str, object] = field(default_factory=dict)
    endpoint_url: str | None = None
    table_prefix: str = "whimbrel_"

    def environment(self) -> dict[str, str]:
        """The variables an activity process receives (docs/contract.md)."""
        env = {
            ENV_ACTIVITY_EXEC_ID: self.activity_exec_id,
            ENV_ACTIVITY_NAME: self.activity_name,
            ENV_WORKFLOW_EXEC_ID: self.workflow_exec_id,
            ENV_WORKFLOW_NAME: self.workflow_name,
            ENV_TABLE_PREFIX: self.table_prefix,
        }
        if self.endpoint_url:
            env[ENV_ENDPOINT_URL] = self.endpoint_url
        return env


class Launcher(Protocol):
    """Starts an activity somewhere. Called only by the winner of the QUEUED write.

    A launcher must not block for the activity's duration; it hands the work off
    (a thread, a process, an AWS API call) and returns. Raising ``LaunchError`` (or
    any exception) makes the engine fail this attempt with the error.
    """

    def launch(self, request: LaunchRequest) -> None: ...


def runs_in_process(launcher: Launcher) -> bool:
    """True for launchers whose activities run in this process (they may then reuse
    the workflow item the engine just read, instead of reading it again)."""
    return bool(getattr(launcher, "in_process", False))
