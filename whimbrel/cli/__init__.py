"""The ``whimbrel`` command line (docs/cli.md).

Importing this package registers every command on :data:`app`.
"""

from whimbrel.cli import (
    cmd_batch,
    cmd_control,
    cmd_data,
    cmd_exec,
    cmd_local,
    cmd_notify,
    cmd_pools,
    cmd_runs,
    cmd_schedules,
    cmd_setup,
    cmd_ui,
    cmd_waits,
    cmd_worker,
)
from whimbrel.cli.app import ExitCode, app, main

__all__ = ["ExitCode", "app", "cmd_batch", "cmd_control", "cmd_data", "cmd_exec", "cmd_local",
           "cmd_notify", "cmd_pools", "cmd_runs", "cmd_schedules", "cmd_setup", "cmd_ui",
           "cmd_waits", "cmd_worker", "main"]
