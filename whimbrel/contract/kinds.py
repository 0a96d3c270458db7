"""Launcher kinds as objects: what each kind of activity accepts and how it behaves.

Every ``LauncherSpec.kind`` names one :class:`LauncherKind` in the one table,
``contract.launching.LAUNCHER_KINDS`` (the run kinds below, then the waits of
``contract/waits.py``). Definitions check a launcher's settings against its kind; the
engine, the CLI and the console ask the kind what it is (pulled by a worker, pushed by
the engine, or a wait) instead of comparing names, so a new kind is one object here (and
its launcher in ``whimbrel/launch``) or one wait in ``contract/waits.py``: no code
elsewhere picks a kind by ``else``. docs/architecture.md, "Adding a kind", lists the files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.limits import WORKFLOW_NAME_PATTERN
from whimbrel.contract.shapes import ActivityShape

_PY_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_WORKFLOW_NAME = re.compile(WORKFLOW_NAME_PATTERN)


class How(StrEnum):
    """How an attempt of a kind gets going once it is READY."""

    #: Claimed by a worker from the ``claimable`` index (``external``).
    PULL = "pull"
    #: Moved to QUEUED by the engine, and started by the winner of that write.
    PUSH = "push"
    #: Nothing runs it: it waits READY for its event (``contract/waits.py``).
    WAIT = "wait"


class UnknownKind(InvalidInput):
    """A launcher kind no table lists: nothing guesses what it might be."""

    def __init__(self, kind: str, known: Mapping[str, object]) -> None:
        super().__init__(f"unknown launcher type {kind!r} (known: "
                         f"{', '.join(sorted(known))})", field="launcher")
        self.kind = kind


class LauncherKind:
    """One kind of launcher: its name, the settings it needs (``required``) or accepts
    (``settings``; None: any), how it gets going and whether its code runs only in a
    worker for it (docs/contract.md, "Who runs code")."""

    how = How.PUSH

    def __init__(self, name: str, required: tuple[str, ...] = (), *,
                 settings: frozenset[str] | None = None, worker: bool = False) -> None:
        self.name = name
        self.required = required
        self.settings = settings
        self.worker = worker

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def problems(self, config: Mapping[str, Any], where: str) -> list[str]:
        """Every problem of a launcher of this kind with settings ``config``."""
        out = [f"{where}: launcher {self.name!r} needs {key!r}"
               for key in self.required if not config.get(key)]
        if self.settings is not None:
            out += [f"{where}: {self.name} launcher has no setting {key!r} (it takes "
                    f"{', '.join(sorted(self.settings))})"
                    for key in sorted(map(str, set(config) - self.settings))]
        return out + self.config_problems(config, where)

    def config_problems(self, config: Mapping[str, Any], where: str) -> list[str]:
        """What this kind checks of its settings beyond ``required``/``settings``."""
        return []

    def definition_problems(self, spec: ActivityShape) -> list[str]:
        """What an activity of this kind may not have that others may."""
        return []


class External(LauncherKind):
    """``external``: launches nothing; a worker claims it."""

    how = How.PULL


class Python(LauncherKind):
    """``python``: ``module:function``, run only in a worker for it."""

    def config_problems(self, config: Mapping[str, Any], where: str) -> list[str]:
        target = config.get("target")
        if target and not _PY_TARGET.match(str(target)):
            return [f"{where}: python launcher target {target!r} is not 'module:function'"]
        return []


class Command(LauncherKind):
    """``command``: a subprocess with the activity ids in its environment."""

    def config_problems(self, config: Mapping[str, Any], where: str) -> list[str]:
        argv = config.get("argv")
        if argv and not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            return [f"{where}: command launcher argv must be a list of strings"]
        return []


class Workflow(LauncherKind):
    """``workflow``: a child run, started by the engine itself (engine/children.py)."""

    def config_problems(self, config: Mapping[str, Any], where: str) -> list[str]:
        out: list[str] = []
        name, version = config.get("workflow"), config.get("version")
        if name and (not isinstance(name, str) or not _WORKFLOW_NAME.match(name)):
            out.append(f"{where}: workflow launcher names {name!r}, not a workflow name "
                       f"({WORKFLOW_NAME_PATTERN})")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                    or not 1 <= version <= 2**31 - 1):
            out.append(f"{where}: workflow launcher version must be an integer >= 1")
        unknown = sorted(set(config) - {"workflow", "version"})
        if unknown:
            out.append(f"{where}: workflow launcher has unknown setting(s) "
                       f"{', '.join(map(str, unknown))}")
        return out


#: The kinds whose code runs somewhere (or is claimed): every kind but the waits.
RUN_KINDS: tuple[LauncherKind, ...] = (
    External("external"),
    Python("python", ("target",), worker=True),
    Command("command", ("argv",)),
    LauncherKind("lambda", ("function",)),
    LauncherKind("sqs", ("queue_url",)),
    LauncherKind("ecs", ("cluster", "task_definition")),
    Workflow("workflow", ("workflow",)),
)
