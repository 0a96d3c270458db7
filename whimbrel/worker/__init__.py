"""The activity side: heartbeats, run_activity, command supervision."""

from whimbrel.worker.command import run_command
from whimbrel.worker.run import ActivityRun, heartbeat, run_activity

__all__ = ["ActivityRun", "heartbeat", "run_activity", "run_command"]
