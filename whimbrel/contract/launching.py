"""How an activity is started (``LauncherSpec``) and retried (``RetryPolicy``): the
per-activity values of a definition, each able to list its own problems."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from whimbrel.contract import checks, waits
from whimbrel.contract.kinds import RUN_KINDS, How, LauncherKind, UnknownKind

#: How the error of an attempt whose launch failed begins (engine/flow.py): such an
#: attempt never ran (a child launcher's attempt started no child run).
LAUNCH_FAILED = "launch failed: "

#: The one table of launcher kinds, by name: the run kinds (contract/kinds.py), then the
#: waits (contract/waits.py). Everything that asks what a kind is asks this table.
_KINDS: dict[str, LauncherKind] = {
    **{kind.name: kind for kind in RUN_KINDS}, **waits.WAIT_KINDS}
LAUNCHER_KINDS: Mapping[str, LauncherKind] = _KINDS


def kind_of(name: str) -> LauncherKind:
    """The kind named ``name``.

    Raises:
        UnknownKind: no kind of that name (an InvalidInput naming the known ones).
    """
    kind = LAUNCHER_KINDS.get(name)
    if kind is None:
        raise UnknownKind(name, LAUNCHER_KINDS)
    return kind


def register(kind: LauncherKind) -> Callable[[], None]:
    """Add a launcher kind (a wait if it is a :class:`~whimbrel.contract.waits.WaitKind`)
    to the table, for an extension or a test; returns what removes it again.

    Raises:
        ValueError: a kind of that name is already registered.
    """
    if kind.name in LAUNCHER_KINDS:
        raise ValueError(f"launcher kind {kind.name!r} is already registered")
    _KINDS[kind.name] = kind
    if isinstance(kind, waits.WaitKind):
        waits.WAIT_KINDS[kind.name] = kind

    def unregister() -> None:
        _KINDS.pop(kind.name, None)
        waits.WAIT_KINDS.pop(kind.name, None)
    return unregister


def worker_kinds() -> frozenset[str]:
    """Kinds whose code runs only in a process that is a *worker* for it (docs/contract.md,
    "Who runs code"): anywhere else an attempt waits READY in the ``claimable`` index
    (under the worker shards) until a worker claims it."""
    return frozenset(name for name, kind in LAUNCHER_KINDS.items() if kind.worker)


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
    def spec(self) -> LauncherKind:
        """Its kind (raises UnknownKind for a kind no table lists)."""
        return kind_of(self.kind)

    @property
    def is_push(self) -> bool:
        """Moved to QUEUED by the engine; the winner of that write starts it."""
        return self.spec.how is How.PUSH

    @property
    def is_pull(self) -> bool:
        """Claimed by a worker from the ``claimable`` index (``external``)."""
        return self.spec.how is How.PULL

    @property
    def needs_worker(self) -> bool:
        """Runs only in a worker for it (``python``); a process that is not one leaves it
        READY and claimable, and a worker claims it."""
        return self.spec.worker

    @property
    def worker_target(self) -> str | None:
        """The ``module:function`` a worker runs (None: not a worker kind)."""
        return str(self.config.get("target", "")) if self.needs_worker else None

    @property
    def is_wait(self) -> bool:
        return self.spec.how is How.WAIT

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
    def workflow(cls, name: str, *, version: int | None = None) -> LauncherSpec:
        """Start the registered workflow ``name`` (at ``version``; the latest when the
        activity starts if None) with the activity's input, as a child run; the activity
        ends with the child's output when the child COMPLETES, FAILED when it fails or is
        cancelled."""
        config: dict[str, Any] = {"workflow": name}
        if version is not None:
            config["version"] = version
        return cls("workflow", config)

    @classmethod
    def parse(cls, raw: Any) -> LauncherSpec:
        """Accept ``"python:mod:func"``, ``"lambda:fn"``, ``"workflow:name"``,
        ``"external"``, a mapping ``{type: ..., ...}`` or a LauncherSpec."""
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
            if kind == "workflow" and rest:
                return cls.workflow(rest)
            return cls(raw)
        if isinstance(raw, Mapping):
            data = dict(raw)
            kind = data.pop("type", data.pop("kind", "external"))
            return cls(str(kind), data)
        raise TypeError(f"launcher must be a string or a mapping, not {checks.kind(raw)}")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, **dict(self.config)}

    def problems(self, where: str) -> list[str]:
        kind = LAUNCHER_KINDS.get(self.kind)
        if kind is None:
            return [f"{where}: unknown launcher type {self.kind!r} (known: "
                    f"{', '.join(sorted(LAUNCHER_KINDS))})"]
        return kind.problems(self.config, where)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon a failed or timed-out activity runs again.

    ``max_attempts`` counts the first run: 1 means no retry. The delay before attempt
    ``n + 1`` is ``initial_interval_seconds * backoff_rate ** (n - 1)``, capped at
    ``max_interval_seconds``, then reduced by up to ``jitter`` (a fraction in [0, 1]).
    An error whose type name (``error_type``: the exception's class name for ``python``
    activities) is in ``non_retryable`` fails the activity for good at once.
    """

    max_attempts: int = 1
    initial_interval_seconds: float = 1.0
    backoff_rate: float = 2.0
    max_interval_seconds: float = 300.0
    jitter: float = 0.0
    non_retryable: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Accept a list (YAML, JSON) or one name; keep the canonical tuple.
        names = self.non_retryable
        if isinstance(names, str):
            names = (names,)
        if isinstance(names, list | tuple):
            object.__setattr__(self, "non_retryable", tuple(names))

    def retries(self, error_type: str | None) -> bool:
        """Whether an attempt that failed with ``error_type`` may be retried at all."""
        return error_type is None or error_type not in self.non_retryable

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
        names = self.non_retryable
        if not isinstance(names, tuple) or not all(
                isinstance(n, str) and 0 < len(n) <= 256 for n in names):
            out.append(f"{where}: retry.non_retryable must be a list of error type names "
                       "(non-empty strings of at most 256 characters)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "initial_interval_seconds": self.initial_interval_seconds,
            "backoff_rate": self.backoff_rate,
            "max_interval_seconds": self.max_interval_seconds,
            "jitter": self.jitter,
            # Only when set: a definition without it keeps its canonical JSON (and so
            # its registered version).
            **({"non_retryable": list(self.non_retryable)} if self.non_retryable else {}),
        }
