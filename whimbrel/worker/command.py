"""Run a command as an activity: RUNNING, heartbeats, exit code, stop on cancel."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence

from whimbrel.contract.errors import ActivityStopped
from whimbrel.engine import Engine
from whimbrel.worker.run import run_activity

STDERR_TAIL_LINES = 20


class CommandFailed(Exception):
    """The child exited non-zero; the message holds the exit code and stderr tail."""

    concise = True

    def __init__(self, code: int, tail: str) -> None:
        super().__init__(f"command exited with code {code}" + (f"\n{tail}" if tail else ""))
        self.code = code


def run_command(engine: Engine, activity_exec_id: str, argv: Sequence[str], *,
                env: Mapping[str, str] | None = None, kill_grace_seconds: float = 5.0,
                poll_seconds: float = 0.2) -> int:
    """Run ``argv`` as activity ``activity_exec_id`` and return the child's exit code.

    COMPLETED on exit code 0, FAILED otherwise (with the tail of stderr). When the
    activity is cancelled or times out the child gets SIGTERM, then SIGKILL after
    ``kill_grace_seconds``.
    """
    code = -1
    try:
        with run_activity(engine, activity_exec_id) as act:
            child_env = {**os.environ, **(env or {})}
            proc = subprocess.Popen(list(argv), env=child_env, stderr=subprocess.PIPE,
                                    text=True, errors="replace", start_new_session=True)
            tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
            reader = threading.Thread(target=_drain, args=(proc, tail), daemon=True)
            reader.start()
            while True:
                try:
                    code = proc.wait(timeout=poll_seconds)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if act.stop_requested is not None:
                    stop_process(proc, kill_grace_seconds)
                    reader.join(timeout=1)
                    # run_activity ends the activity quietly on a stop; report the
                    # child's fate the shell way (128 + signal).
                    rc = proc.returncode
                    code = 128 - rc if rc is not None and rc < 0 else (rc or 143)
                    raise act.stop_requested
            reader.join(timeout=5)
            if code != 0:
                raise CommandFailed(code, "".join(tail).rstrip())
            act.output = {"exit_code": 0}
    except CommandFailed as exc:
        return exc.code
    except ActivityStopped:
        return code if code >= 0 else 143
    return code


def _drain(proc: subprocess.Popen[str], tail: collections.deque[str]) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        tail.append(line)


def stop_process(proc: subprocess.Popen[str], grace: float) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        proc.wait()
