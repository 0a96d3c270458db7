"""Props of the :class:`~whimbrel_infra.Whimbrel` construct, and deployment-only defaults.

Everything the engine and the local runtime must agree on (table keys, indexes,
streams, stream-consumer settings, handler paths, the heartbeat rate) lives in
``whimbrel/store/specs.py``. The constants below are purely deployment concerns —
sizes, timeouts, retention — so they live here and nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns

from whimbrel.launch.modules import module_names
from whimbrel.settings import DEFAULT_PAYLOAD_PREFIX
from whimbrel.store.consumers import HEARTBEAT_RATE_SECONDS_AWS
from whimbrel.store.specs import DEFAULT_TABLE_PREFIX, TABLES

from .bundling import SOURCE_PACKAGES

# --- deployment-only defaults (not part of the engine contract) -------------------

#: Lambda memory; also buys CPU. 512 MB keeps a cold import of pydantic short.
DEFAULT_LAMBDA_MEMORY_MB = 512
#: Concurrent batches per stream shard (Lambda's ParallelizationFactor, 1..10). Records
#: of one item (one request, one event row) stay in order at any factor; the engine
#: takes events of one activity in any order (every move is conditional). At 10 a shard
#: feeds ten invocations at once instead of one (docs/benchmarks.md, Simple API).
DEFAULT_PARALLELIZATION_FACTOR = 10
#: A stream batch is at most ``batch_size`` records of a few conditional writes each;
#: a minute is generous and still bounds a stuck invocation (and the shard it blocks).
STREAM_FUNCTION_TIMEOUT_SECONDS = 60
#: Sweep + reconcile page through sparse indexes; two minutes bounds a slow run. A run
#: overlapping the next tick is harmless: every write it makes is conditional.
HEARTBEAT_FUNCTION_TIMEOUT_SECONDS = 120
DEFAULT_LOG_RETENTION = logs.RetentionDays.ONE_MONTH
#: SQS's maximum, so a failed record survives a long weekend before anyone looks.
DLQ_RETENTION_DAYS = 14
#: Days a payload object lives (the bucket's lifecycle rule): the engine's default
#: retention (30 days after a run ends) plus 90 days for the run itself to live.
DEFAULT_PAYLOAD_EXPIRY_DAYS = 120
#: The iterator-age alarm fires at this fraction of the consumer's maximum record age,
#: i.e. well before Lambda starts discarding records to the dead-letter queue.
ITERATOR_AGE_ALARM_FRACTION = 0.5

_TABLE_NAME_CHARS = re.compile(r"^[A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class WhimbrelProps:
    """How a Whimbrel deployment is shaped. Every field has a production-safe default.

    Attributes:
        table_prefix: Prepended to every table name (``whimbrel_`` by default). Clients
            must use the same prefix (``WHIMBREL_TABLE_PREFIX``).
        removal_policy: What happens to the tables, log groups and dead-letter queue
            when they leave the stack. ``RETAIN`` by default: data outlives the stack.
        deletion_protection: DynamoDB deletion protection on every table. ``None``
            means "on exactly when ``removal_policy`` is ``RETAIN``".
        heartbeat_rate: How often the heartbeat listener (sweep + reconcile) runs.
            ``None`` means ``consumers.HEARTBEAT_RATE_SECONDS_AWS``. Whole minutes only.
        heartbeat_enabled: ``False`` deploys the schedule disabled (e.g. to pause).
        encryption_key: A customer-managed KMS key for the tables and the dead-letter
            queue. ``None`` uses AWS-managed keys (no key to pay for or manage).
        lambda_memory_mb: Memory of each of the three functions.
        parallelization_factor: Concurrent batches per shard of every stream the
            functions consume (Lambda's ``ParallelizationFactor``, 1..10; default 10).
        lambda_runtime: ``None`` picks the newest Python runtime this aws-cdk-lib offers.
        log_retention: Retention of the functions' log groups.
        alarms: Deploy the CloudWatch alarms (DLQ not empty, errors, iterator age,
            workflows failed).
        alarm_topic: Where alarms notify; ``None`` leaves the alarms without actions.
        managed_policies: Deploy the two managed policies for workers and clients.
        events: Deploy the ``notify`` function that puts Whimbrel's events (a run ended,
            an activity failed for good, a wait started) on ``event_bus``.
        event_bus: The EventBridge bus for the events; ``None`` uses the account's
            default bus.
        source_root: The checkout holding ``whimbrel/``, ``lambdas/`` and
            ``pyproject.toml``; ``None`` means the one this package lives in.
        bundle_cache_dir: Where bundled dependencies are cached between synths;
            ``None`` means ``$WHIMBREL_BUNDLE_CACHE`` or ``<source_root>/.cache``.
        payloads: Create the payload bucket for payloads over the threshold (every
            function gets ``WHIMBREL_PAYLOAD_BUCKET``); ``False``: none, payloads keep
            DynamoDB-sized limits.
        payload_bucket: Use this bucket instead of creating one (its encryption,
            public access and lifecycle are yours to set).
        payload_prefix: The start of every key Whimbrel writes there.
        payload_expiry_days: Days an object lives (the lifecycle rule on
            ``<payload_prefix>runs/``): above the retention plus your longest run.
            ``None`` means ``DEFAULT_PAYLOAD_EXPIRY_DAYS``.
        workflow_code: A local directory of your code (your code workflows' modules and
            what they import), bundled with the functions' code at the asset's root
            (``/var/task``). ``None``: the functions have Whimbrel's code only and make
            no code workflow's decisions (each is left for a worker).
        workflow_modules: The modules of ``workflow_code`` the functions import at cold
            start (``WHIMBREL_MODULES``): they register the code workflows (``@workflow``)
            found there and make their decisions (docs/code-workflows.md, "Deployed").
            Their ``python`` steps still run in a worker.
    """

    table_prefix: str = DEFAULT_TABLE_PREFIX
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    deletion_protection: bool | None = None
    heartbeat_rate: Duration | None = None
    heartbeat_enabled: bool = True
    encryption_key: kms.IKey | None = None
    lambda_memory_mb: int = DEFAULT_LAMBDA_MEMORY_MB
    parallelization_factor: int = DEFAULT_PARALLELIZATION_FACTOR
    lambda_runtime: lambda_.Runtime | None = None
    log_retention: logs.RetentionDays = DEFAULT_LOG_RETENTION
    alarms: bool = True
    alarm_topic: sns.ITopic | None = None
    managed_policies: bool = True
    events: bool = True
    event_bus: events.IEventBus | None = None
    source_root: Path | None = None
    bundle_cache_dir: Path | None = None
    payloads: bool = True
    payload_bucket: s3.IBucket | None = None
    payload_prefix: str = DEFAULT_PAYLOAD_PREFIX
    payload_expiry_days: int | None = None
    workflow_code: Path | str | None = None
    workflow_modules: Sequence[str] = ()

    def __post_init__(self) -> None:
        self._check_workflow_code()
        if not _TABLE_NAME_CHARS.match(self.table_prefix):
            raise ValueError(
                f"table_prefix {self.table_prefix!r} may only contain letters, digits, "
                "'_', '-' and '.' (DynamoDB table-name characters)"
            )
        longest = max(len(spec.table_name(self.table_prefix)) for spec in TABLES)
        if longest > 255:
            raise ValueError(f"table_prefix {self.table_prefix!r} makes a table name > 255 chars")
        if not 128 <= self.lambda_memory_mb <= 10240:
            raise ValueError(f"lambda_memory_mb must be 128..10240, not {self.lambda_memory_mb}")
        if self.payload_expiry_days is not None and self.payload_expiry_days < 1:
            raise ValueError(f"payload_expiry_days must be at least 1, not "
                             f"{self.payload_expiry_days}")
        if not 1 <= self.parallelization_factor <= 10:  # Lambda's bounds
            raise ValueError("parallelization_factor must be 1..10, not "
                             f"{self.parallelization_factor}")

    def _check_workflow_code(self) -> None:
        """At synth, not at the first cold start: the directory is there, each module is
        a dotted name found in it, and nothing in it would replace Whimbrel's own code."""
        modules = module_names(self.workflow_modules, field="workflow_modules")
        object.__setattr__(self, "workflow_modules", modules)
        if self.workflow_code is None:
            if modules:
                raise ValueError(f"workflow_modules {list(modules)} need workflow_code: the "
                                 "directory holding them, bundled with the functions")
            return
        code = Path(self.workflow_code).expanduser().resolve()
        object.__setattr__(self, "workflow_code", code)
        if not code.is_dir():
            raise ValueError(f"workflow_code {str(code)!r} is not a directory")
        if not modules:
            raise ValueError(f"workflow_code {str(code)!r} needs workflow_modules: the "
                             "modules the functions import at cold start")
        for reserved in SOURCE_PACKAGES:
            if (code / reserved).exists() or (code / f"{reserved}.py").exists():
                raise ValueError(f"workflow_code {str(code)!r} holds {reserved!r}, which "
                                 "would replace Whimbrel's own code in the bundle")
        for module in modules:
            path = code.joinpath(*module.split("."))
            if not (path.with_suffix(".py").is_file() or path.is_dir()):
                raise ValueError(f"workflow_modules: {module!r} is not in workflow_code "
                                 f"{str(code)!r} (no {module.replace('.', '/')}.py, nor a "
                                 "package of that name)")

    @property
    def effective_payload_expiry_days(self) -> int:
        if self.payload_expiry_days is not None:
            return self.payload_expiry_days
        return DEFAULT_PAYLOAD_EXPIRY_DAYS

    @property
    def effective_deletion_protection(self) -> bool:
        if self.deletion_protection is not None:
            return self.deletion_protection
        return self.removal_policy == RemovalPolicy.RETAIN

    @property
    def effective_heartbeat_rate(self) -> Duration:
        if self.heartbeat_rate is not None:
            return self.heartbeat_rate
        return Duration.seconds(HEARTBEAT_RATE_SECONDS_AWS)
