"""How an activity is started (``LauncherSpec``) and retried (``RetryPolicy``): the
per-activity values of a definition, each able to list its own problems."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from whimbrel.contract import waits

_PY_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

#: Launcher kinds and the config keys each one requires.
LAUNCHER_KINDS: Mapping[str, tuple[str, ...]] = {
    "external": (),
    "python": ("target",),
    "command": ("argv",),
    "lambda": ("function",),
    "sqs": ("queue_url",),
    "ecs": ("cluster", "task_definition"),
    # Waits (contract/waits.py): not launched at all; their settings are checked there.
    "timer": (),
    "signal": ("name",),
    "approval": (),
}


@dataclass(frozen=True)
class LauncherSpec:
    """How an activity is started. ``kind`` selects a launcher; ``config`` is its settings.

    ``external`` (the default) launches nothing: the activity waits in READY until a
    worker claims it. ``timer``, ``signal`` and ``approval`` are *waits*: nothing runs
    them; they sit in READY until their time, signal or decision comes. Every other kind
    is a *push* launcher: the engine moves the activity to QUEUED and the winner of that
    write starts it.
    """

    kind: str = "external"
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_push(self) -> bool:
        return self.kind != "external" and not self.is_wait

    @property
    def is_pull(self) -> bool:
        """Claimed by a worker from the ``claimable`` index (``external``)."""
        return self.kind == "external"

    @property
    def is_wait(self) -> bool:
        return self.kind in waits.WAIT_KINDS

    @classmethod
    def external(cls) -> LauncherSpec:
        return cls("external")

    @classmethod
    def python(cls, target: str) -> LauncherSpec:
        """Run ``module:function`` in the launching process's thread pool."""
        return cls("python", {"target": target})

    @classmethod
    def command(cls, argv: Sequence[str], **config: Any) -> LauncherSpec:
        """Run ``argv`` as a subprocess with the activity ids in its environment."""
        return cls("command", {"argv": list(argv), **config})

    @overload
    @classmethod
    def timer(cls, seconds: float) -> LauncherSpec: ...
    @overload
    @classmethod
    def timer(cls, *, until_input: str) -> LauncherSpec: ...

    @classmethod
    def timer(cls, seconds: float | None = None, *,
              until_input: str | None = None) -> LauncherSpec:
        """A wait that completes ``seconds`` after it becomes READY, or at the time (epoch
        seconds or ISO-8601) found at key ``until_input`` of its input. Its output is
        ``{"fired_at": <epoch>}``."""
        if (seconds is None) == (until_input is None):
            raise TypeError("LauncherSpec.timer() takes either seconds or until_input")
        return cls("timer", {"seconds": seconds} if seconds is not None
                   else {"until_input": until_input})

    @classmethod
    def signal(cls, name: str, *, timeout_seconds: float | None = None) -> LauncherSpec:
        """A wait that completes when signal ``name`` is sent to its run (a signal sent
        earlier is kept until then); its output is the signal's payload. Past
        ``timeout_seconds`` it is TIMED_OUT."""
        config: dict[str, Any] = {"name": name}
        if timeout_seconds is not None:
            config["timeout_seconds"] = timeout_seconds
        return cls("signal", config)

    @classmethod
    def approval(cls, *, approvers: Sequence[str] = (),
                 timeout_seconds: float | None = None) -> LauncherSpec:
        """A wait for a person's decision: ``approve`` completes it, ``reject`` fails it.
        With ``approvers``, only they may decide. Past ``timeout_seconds`` it is
        TIMED_OUT."""
        config: dict[str, Any] = {}
        if approvers:
            config["approvers"] = list(approvers)
        if timeout_seconds is not None:
            config["timeout_seconds"] = timeout_seconds
        return cls("approval", config)

    @classmethod
    def parse(cls, raw: Any) -> LauncherSpec:
        """Accept ``"python:mod:func"``, ``"external"``, a mapping ``{type: ..., ...}``
        or a LauncherSpec."""
        if isinstance(raw, LauncherSpec):
            return raw
        if raw is None:
            return cls()
        if isinstance(raw, str):
            kind, _, rest = raw.partition(":")
            if kind == "python" and rest:
                return cls.python(rest)
            if kind == "lambda" and rest:
                return cls("lambda", {"function": rest})
            return cls(raw)
        if isinstance(raw, Mapping):
            data = dict(raw)
            kind = data.pop("type", data.pop("kind", "external"))
            return cls(str(kind), data)
        raise TypeError(f"launcher must be a string or a mapping, not {type(raw).__name__}")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, **dict(self.config)}

    def problems(self, where: str) -> list[str]:
        if self.kind not in LAUNCHER_KINDS:
            kinds = ", ".join(sorted(LAUNCHER_KINDS))
            return [f"{where}: unknown launcher type {self.kind!r} (known: {kinds})"]
        out = [
            f"{where}: launcher {self.kind!r} needs {key!r}"
            for key in LAUNCHER_KINDS[self.kind]
            if not self.config.get(key)
        ]
        target = self.config.get("target")
        if self.kind == "python" and target and not _PY_TARGET.match(str(target)):
            out.append(f"{where}: python launcher target {target!r} is not 'module:function'")
        argv = self.config.get("argv")
        if self.kind == "command" and argv and not (
            isinstance(argv, list) and all(isinstance(a, str) for a in argv)
        ):
            out.append(f"{where}: command launcher argv must be a list of strings")
        out.extend(waits.config_problems(self.kind, self.config, where))
        return out


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon a failed or timed-out activity runs again.

    ``max_attempts`` counts the first run: 1 means no retry. The delay before attempt
    ``n + 1`` is ``initial_interval_seconds * backoff_rate ** (n - 1)``, capped at
    ``max_interval_seconds``, then reduced by up to ``jitter`` (a fraction in [0, 1]).
    """

    max_attempts: int = 1
    initial_interval_seconds: float = 1.0
    backoff_rate: float = 2.0
    max_interval_seconds: float = 300.0
    jitter: float = 0.0

    def delay_after(self, attempt: int, unit_random: float = 0.0) -> float:
        """Seconds to wait after ``attempt`` failed; ``unit_random`` in [0, 1) picks the
        jitter (callers derive it from the activity id so a replay computes the same)."""
        base = self.initial_interval_seconds * self.backoff_rate ** max(attempt - 1, 0)
        capped = min(base, self.max_interval_seconds)
        return capped * (1.0 - self.jitter * unit_random)

    def problems(self, where: str) -> list[str]:
        out: list[str] = []
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            out.append(f"{where}: retry.max_attempts must be an integer >= 1")
        elif self.max_attempts > 100:
            out.append(f"{where}: retry.max_attempts must be at most 100")
        for name in ("initial_interval_seconds", "max_interval_seconds"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value < 0:
                out.append(f"{where}: retry.{name} must be a number >= 0")
        if not isinstance(self.backoff_rate, int | float) or self.backoff_rate < 1:
            out.append(f"{where}: retry.backoff_rate must be a number >= 1")
        if not isinstance(self.jitter, int | float) or not 0 <= self.jitter <= 1:
            out.append(f"{where}: retry.jitter must be between 0 and 1")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "initial_interval_seconds": self.initial_interval_seconds,
            "backoff_rate": self.backoff_rate,
            "max_interval_seconds": self.max_interval_seconds,
            "jitter": self.jitter,
        }
