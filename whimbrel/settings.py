"""Every setting Whimbrel reads from the environment, spelled once.

The facade (``Whimbrel.from_env``), the Lambda handlers, the CLI and activity processes
all read their configuration through :func:`Settings.from_env`; launchers pass an
activity its ids through the ``ENV_ACTIVITY_*`` / ``ENV_WORKFLOW_*`` names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.limits import DEFAULT_PAYLOAD_MAX_BYTES, DEFAULT_PAYLOAD_THRESHOLD_BYTES

ENV_ENDPOINT_URL = "WHIMBREL_ENDPOINT_URL"
ENV_TABLE_PREFIX = "WHIMBREL_TABLE_PREFIX"
ENV_RETENTION_DAYS = "WHIMBREL_RETENTION_DAYS"
ENV_ACTIVITY_EXEC_ID = "WHIMBREL_ACTIVITY_EXEC_ID"
ENV_ACTIVITY_NAME = "WHIMBREL_ACTIVITY_NAME"
ENV_WORKFLOW_EXEC_ID = "WHIMBREL_WORKFLOW_EXEC_ID"
ENV_WORKFLOW_NAME = "WHIMBREL_WORKFLOW_NAME"
#: ``emf``: the engine writes CloudWatch EMF metric lines to stdout (unset/``off``: none).
ENV_METRICS = "WHIMBREL_METRICS"
#: The EventBridge bus (name or ARN) the notify consumer puts events on (``default``).
ENV_EVENT_BUS = "WHIMBREL_EVENT_BUS"
#: A file the notify consumer appends events to as JSON lines instead (local runs).
ENV_EVENTS_FILE = "WHIMBREL_EVENTS_FILE"
#: The store's transport: ``auto`` (the lean client unless it cannot honour the botocore
#: config; default), ``lean`` or ``botocore`` (docs/operations.md, "The transport").
ENV_TRANSPORT = "WHIMBREL_TRANSPORT"
#: The modules of the user's code a deployed Lambda imports at cold start and is a
#: worker for (comma-separated; the CDK construct's ``workflow_modules``): it makes the
#: decisions of their code workflows (lambdas/_shared.py).
ENV_MODULES = "WHIMBREL_MODULES"
#: The S3 bucket for payloads over the threshold (unset: none; today's size limits).
ENV_PAYLOAD_BUCKET = "WHIMBREL_PAYLOAD_BUCKET"
#: The start of every key Whimbrel writes in that bucket (``whimbrel/``).
ENV_PAYLOAD_PREFIX = "WHIMBREL_PAYLOAD_PREFIX"
#: Bytes of JSON over which a payload goes to the bucket (16384).
ENV_PAYLOAD_THRESHOLD_BYTES = "WHIMBREL_PAYLOAD_THRESHOLD_BYTES"
#: The largest payload accepted with a bucket (100000000).
ENV_PAYLOAD_MAX_BYTES = "WHIMBREL_PAYLOAD_MAX_BYTES"
TRANSPORT_CHOICES = ("auto", "lean", "botocore")
#: What ``WHIMBREL_METRICS`` may say.
METRICS_CHOICES = ("off", "emf")

DEFAULT_TABLE_PREFIX = "whimbrel_"
DEFAULT_PAYLOAD_PREFIX = "whimbrel/"
#: How long the rows of an ended run are kept before DynamoDB's TTL deletes them.
DEFAULT_RETENTION_DAYS = 30.0
DAY_SECONDS = 86_400.0

def activity_environment(*, activity_exec_id: str, activity_name: str,
                         workflow_exec_id: str, workflow_name: str, table_prefix: str,
                         endpoint_url: str | None = None) -> dict[str, str]:
    """The variables an activity process receives (docs/contract.md, "The activity's
    environment")."""
    env = {
        ENV_ACTIVITY_EXEC_ID: activity_exec_id,
        ENV_ACTIVITY_NAME: activity_name,
        ENV_WORKFLOW_EXEC_ID: workflow_exec_id,
        ENV_WORKFLOW_NAME: workflow_name,
        ENV_TABLE_PREFIX: table_prefix,
    }
    if endpoint_url:
        env[ENV_ENDPOINT_URL] = endpoint_url
    return env


#: Words that mean "keep forever" in ``WHIMBREL_RETENTION_DAYS``.
_FOREVER = frozenset({"none", "never", "forever", "off"})


def parse_retention_days(raw: str | float | None, field: str = ENV_RETENTION_DAYS,
                         ) -> float | None:
    """Days as a number >= 1, or None for "keep forever" (``none``/``forever``).

    Raises:
        InvalidInput: neither.
    """
    if raw is None:
        return None
    if isinstance(raw, str):
        if raw.strip().lower() in _FOREVER:
            return None
        try:
            raw = float(raw)
        except ValueError:
            raise InvalidInput(f"{field} must be a number of days or 'none', not {raw!r}",
                               field=field) from None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw >= 1 \
            or raw != raw or raw == float("inf"):
        raise InvalidInput(f"{field} must be at least 1 day (or None to keep forever), "
                           f"not {raw!r}", field=field)
    return float(raw)


@dataclass(frozen=True)
class Settings:
    """Where the tables are and how long ended runs are kept."""

    endpoint_url: str | None = None
    table_prefix: str = DEFAULT_TABLE_PREFIX
    region: str | None = None
    retention_days: float | None = DEFAULT_RETENTION_DAYS
    #: ``emf`` or None (off).
    metrics: str | None = None
    event_bus: str | None = None
    events_file: str | None = None
    #: The store's transport (one of ``TRANSPORT_CHOICES``).
    transport: str = "auto"
    #: The S3 bucket for large payloads (None: none) and the start of its keys.
    payload_bucket: str | None = None
    payload_prefix: str = DEFAULT_PAYLOAD_PREFIX
    payload_threshold_bytes: int = DEFAULT_PAYLOAD_THRESHOLD_BYTES
    payload_max_bytes: int = DEFAULT_PAYLOAD_MAX_BYTES

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read ``WHIMBREL_ENDPOINT_URL`` (unset: AWS), ``WHIMBREL_TABLE_PREFIX``,
        ``WHIMBREL_RETENTION_DAYS`` (a number, or ``none``), ``WHIMBREL_METRICS``,
        ``WHIMBREL_EVENT_BUS``, ``WHIMBREL_EVENTS_FILE``, ``WHIMBREL_TRANSPORT``,
        ``WHIMBREL_PAYLOAD_BUCKET``, ``WHIMBREL_PAYLOAD_PREFIX``,
        ``WHIMBREL_PAYLOAD_THRESHOLD_BYTES``, ``WHIMBREL_PAYLOAD_MAX_BYTES`` and the AWS
        region variables.

        Raises:
            InvalidInput: a malformed value.
        """
        env = os.environ if env is None else env
        raw_retention = env.get(ENV_RETENTION_DAYS)
        metrics = (env.get(ENV_METRICS) or "off").strip().lower()
        if metrics not in METRICS_CHOICES:
            raise InvalidInput(f"{ENV_METRICS} must be one of {', '.join(METRICS_CHOICES)}, "
                               f"not {env.get(ENV_METRICS)!r}", field=ENV_METRICS)
        transport = (env.get(ENV_TRANSPORT) or "auto").strip().lower()
        if transport not in TRANSPORT_CHOICES:
            raise InvalidInput(f"{ENV_TRANSPORT} must be one of {', '.join(TRANSPORT_CHOICES)}"
                               f", not {env.get(ENV_TRANSPORT)!r}", field=ENV_TRANSPORT)
        return cls(
            transport=transport,
            endpoint_url=env.get(ENV_ENDPOINT_URL) or None,
            table_prefix=env.get(ENV_TABLE_PREFIX) or DEFAULT_TABLE_PREFIX,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            retention_days=DEFAULT_RETENTION_DAYS if not raw_retention
            else parse_retention_days(raw_retention),
            metrics=None if metrics == "off" else metrics,
            event_bus=env.get(ENV_EVENT_BUS) or None,
            events_file=env.get(ENV_EVENTS_FILE) or None,
            payload_bucket=env.get(ENV_PAYLOAD_BUCKET) or None,
            payload_prefix=env.get(ENV_PAYLOAD_PREFIX) or DEFAULT_PAYLOAD_PREFIX,
            payload_threshold_bytes=_bytes(env, ENV_PAYLOAD_THRESHOLD_BYTES,
                                           DEFAULT_PAYLOAD_THRESHOLD_BYTES),
            payload_max_bytes=_bytes(env, ENV_PAYLOAD_MAX_BYTES, DEFAULT_PAYLOAD_MAX_BYTES),
        )


def _bytes(env: Mapping[str, str], name: str, default: int) -> int:
    """A positive whole number of bytes from ``env`` (unset: ``default``).

    Raises:
        InvalidInput: not one.
    """
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise InvalidInput(f"{name} must be a positive number of bytes, not {raw!r}",
                           field=name)
    return int(raw)
