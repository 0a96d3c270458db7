"""Processes for tests/integration/test_where_code_runs.py ("code runs where the code
is", issue 26): an activity module written to a folder only some processes have on
their path, and a driver script each process runs.

The activity module records which process ran each attempt (a file per attempt holding
the pid), so a test can tell the starter, a worker and a one-shot command apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: The activity module (``wc_orders``): ``ship`` records its pid, fails while
#: ``attempt <= fail_attempts``, and, given a ``gate`` file, holds until it exists.
ACTIVITIES = '''
import os
from pathlib import Path


def ship(run):
    record = Path(os.environ["WC_RECORD_DIR"]) / run.activity_exec_id.replace("/", "_")
    record.with_suffix(".pid").write_text(str(os.getpid()))
    given = run.input if isinstance(run.input, dict) else {}
    if run.attempt <= given.get("fail_attempts", 0):
        raise RuntimeError("fails on purpose")
    gate = given.get("gate")
    while gate and not os.path.exists(gate) and not run.stop_event.is_set():
        run.heartbeat()
        run.stop_event.wait(0.05)
    return {"pid": os.getpid(), "attempt": run.attempt}
'''

#: What each process runs: ``python driver.py COMMAND ARGS`` (see the functions).
DRIVER = '''
import json, os, sys
from whimbrel import Whimbrel, WorkflowDefinition

command, *args = sys.argv[1:]
wb = Whimbrel(endpoint_url=os.environ["WC_ENDPOINT"], table_prefix=os.environ["WC_PREFIX"])


def say(**what):
    print(json.dumps(what), flush=True)


if command == "start-and-wait":      # DEFN_JSON INPUT_JSON [close|exit]
    defn = WorkflowDefinition.from_json(args[0])
    wb.register_workflow(defn)
    wx = wb.start_workflow(defn.name, json.loads(args[1]))
    say(wx=wx, pid=os.getpid())
    done = wb.wait(wx, timeout=90)
    say(wx=wx, state=done.state.value, pid=os.getpid())
    if args[2:] == ["close"]:
        wb.close()
    else:  # "exit": leave without closing; the interpreter's exit is the only clean-up
        import threading
        # Said when the main thread has ended, before the thread pools are joined.
        threading._register_atexit(lambda: say(exiting=True))
elif command == "start-many-and-wait":  # DEFN_JSON N INPUT_JSON
    defn = WorkflowDefinition.from_json(args[0])
    wb.register_workflow(defn)
    wxs = [wb.start_workflow(defn.name, json.loads(args[2])) for _ in range(int(args[1]))]
    say(wxs=wxs, pid=os.getpid())
    say(states=[wb.wait(wx, timeout=90).state.value for wx in wxs], pid=os.getpid())
    wb.close()
elif command == "start-and-leave":   # NAME INPUT_JSON: start a registered workflow, close
    wx = wb.start_workflow(args[0], json.loads(args[1]))
    say(wx=wx, pid=os.getpid())
    wb.close()
elif command == "worker":            # MODULE...: run_worker until SIGTERM
    say(worker="ready", pid=os.getpid())
    wb.run_worker(modules=args, concurrency=2)
    say(worker="stopped", pid=os.getpid())
    wb.close()
'''


@dataclass
class Place:
    """Where the processes of one test meet: the tables, the folder holding the
    activity module (on the path of workers only) and the pid records."""

    endpoint: str
    prefix: str
    acts: Path
    records: Path
    driver: Path

    @classmethod
    def make(cls, tmp: Path, endpoint: str, prefix: str) -> Place:
        acts = tmp / "acts"
        acts.mkdir()
        (acts / "wc_orders.py").write_text(ACTIVITIES)
        records = tmp / "records"
        records.mkdir()
        driver = tmp / "driver.py"
        driver.write_text(DRIVER)
        return cls(endpoint, prefix, acts, records, driver)

    def env(self, *, with_code: bool) -> dict[str, str]:
        """The environment of a process; ``with_code``: it can import ``wc_orders``."""
        path = [str(ROOT)] + ([str(self.acts)] if with_code else [])
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(PYTHONPATH=os.pathsep.join(path), WC_ENDPOINT=self.endpoint,
                   WC_PREFIX=self.prefix, WC_RECORD_DIR=str(self.records),
                   WHIMBREL_ENDPOINT_URL=self.endpoint, WHIMBREL_TABLE_PREFIX=self.prefix,
                   AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local",
                   AWS_DEFAULT_REGION="us-east-1", POWERTOOLS_METRICS_DISABLED="true")
        return env

    def spawn(self, *args: str, with_code: bool = True) -> subprocess.Popen[str]:
        """Run the driver in a new process whose working directory has no code."""
        return subprocess.Popen([sys.executable, str(self.driver), *args],
                                env=self.env(with_code=with_code), cwd=self.records,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def cli(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """A one-shot ``whimbrel`` command, run from ``cwd`` without the code."""
        return subprocess.run([sys.executable, "-m", "whimbrel.cli", *args],
                              env=self.env(with_code=False), cwd=cwd, capture_output=True,
                              text=True, timeout=120)

    def ran_in(self) -> dict[str, int]:
        """Which process ran each attempt that started: ``{activity_exec_id-ish: pid}``."""
        return {p.stem: int(p.read_text()) for p in self.records.glob("*.pid")}


def said(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """The next line a driver printed, as JSON (blocks until it prints one)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(30)
        raise AssertionError(f"the process ended (exit {proc.returncode}) without a word: "
                             f"{proc.stderr.read() if proc.stderr else ''}")
    return dict(json.loads(line))
