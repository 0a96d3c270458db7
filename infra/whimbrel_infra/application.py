"""The CDK app ``infra/app.py`` runs, configurable through CDK context.

Context keys (``cdk deploy -c whimbrel:tablePrefix=orders_`` or ``cdk.json``):

================================  ==================================================
``whimbrel:stackName``            stack name (default ``Whimbrel``)
``whimbrel:tablePrefix``          table-name prefix (default ``whimbrel_``)
``whimbrel:removalPolicy``        ``retain`` (default) or ``destroy``
``whimbrel:deletionProtection``   ``true``/``false`` (default: on when retained)
``whimbrel:heartbeatRateMinutes`` heartbeat schedule, whole minutes
``whimbrel:lambdaMemoryMb``       memory of each function
``whimbrel:kmsKeyArn``            customer-managed KMS key for tables and the DLQ
``whimbrel:alarmTopicArn``        SNS topic the alarms notify
``whimbrel:alarms``               ``false`` to skip the alarms
``whimbrel:managedPolicies``      ``false`` to skip the two managed policies
``whimbrel:events``               ``false`` to skip the notify function (events)
``whimbrel:eventBusArn``          an EventBridge bus for the events (default bus)
``whimbrel:launchTargets``        Lambda / SQS ARNs activities are launched on
                                  (comma-separated, or a JSON list in cdk.json)
``whimbrel:workflowCode``         a directory of your code bundled with the functions
                                  (relative to where ``cdk`` runs)
``whimbrel:workflowModules``      its modules the functions import and decide for
                                  (comma-separated, or a JSON list in cdk.json)
================================  ==================================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import App, Duration, Environment, RemovalPolicy, Validations
from cdk_nag import AwsSolutionsChecks

from whimbrel.launch.modules import module_names

from .props import WhimbrelProps
from .stack import WhimbrelStack

DEFAULT_STACK_NAME = "Whimbrel"
CDK_JSON = Path(__file__).resolve().parents[1] / "cdk.json"
_PREFIX = "whimbrel:"


def build_app(
    *,
    outdir: str | None = None,
    context: Mapping[str, Any] | None = None,
    props: WhimbrelProps | None = None,
    builtin_validation: bool = True,
) -> tuple[App, WhimbrelStack]:
    """The app with one :class:`WhimbrelStack`, checked by cdk-nag on synth.

    ``cdk-nag``'s AWS Solutions pack runs as a CDK validation plugin: ``app.synth()``
    fails on any unacknowledged finding and writes them to
    ``policy-validation-report.json`` in the cloud assembly.

    Args:
        outdir: Cloud assembly folder; ``None`` lets CDK decide (``$CDK_OUTDIR``).
        context: CDK context, e.g. ``cdk.json``'s; the CLI passes its own.
        props: Overrides the props read from context.
        builtin_validation: CDK's own CloudFormation validation plugin (default rules
            evaluated on every synth). It is the slow part of a synth (~10 s); the
            tests turn it off and run cfn-lint on the template instead.
    """
    app = App(
        outdir=outdir,
        context=dict(context or {}),
        # None keeps CDK's default, so `cdk synth --no-validation` still applies.
        builtin_cloud_formation_validation=None if builtin_validation else False,
    )
    ctx = {key: app.node.try_get_context(key) for key in _CONTEXT_KEYS}
    stack = WhimbrelStack(
        app,
        ctx[f"{_PREFIX}stackName"] or DEFAULT_STACK_NAME,
        props=props or props_from_context(ctx),
        encryption_key_arn=ctx[f"{_PREFIX}kmsKeyArn"],
        alarm_topic_arn=ctx[f"{_PREFIX}alarmTopicArn"],
        launch_target_arns=_arn_list(ctx[f"{_PREFIX}launchTargets"]),
        event_bus_arn=ctx[f"{_PREFIX}eventBusArn"],
        # Unset (offline synth) leaves the stack environment-agnostic.
        env=Environment(
            account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
            region=os.environ.get("CDK_DEFAULT_REGION"),
        ),
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, stack


_CONTEXT_KEYS = tuple(
    f"{_PREFIX}{name}"
    for name in (
        "stackName",
        "tablePrefix",
        "removalPolicy",
        "deletionProtection",
        "heartbeatRateMinutes",
        "lambdaMemoryMb",
        "parallelizationFactor",
        "kmsKeyArn",
        "alarmTopicArn",
        "alarms",
        "managedPolicies",
        "launchTargets",
        "events",
        "eventBusArn",
        "workflowCode",
        "workflowModules",
    )
)


def props_from_context(ctx: Mapping[str, Any]) -> WhimbrelProps:
    """Props from context values, which the CLI passes as strings."""
    kwargs: dict[str, Any] = {}
    if (prefix := ctx.get(f"{_PREFIX}tablePrefix")) is not None:
        kwargs["table_prefix"] = str(prefix)
    if (policy := ctx.get(f"{_PREFIX}removalPolicy")) is not None:
        choices = {"retain": RemovalPolicy.RETAIN, "destroy": RemovalPolicy.DESTROY}
        try:
            kwargs["removal_policy"] = choices[str(policy).lower()]
        except KeyError:
            raise ValueError(
                f"{_PREFIX}removalPolicy must be retain or destroy, not {policy!r}"
            ) from None
    if (protection := ctx.get(f"{_PREFIX}deletionProtection")) is not None:
        kwargs["deletion_protection"] = _flag(protection)
    if (minutes := ctx.get(f"{_PREFIX}heartbeatRateMinutes")) is not None:
        kwargs["heartbeat_rate"] = Duration.minutes(int(minutes))
    if (memory := ctx.get(f"{_PREFIX}lambdaMemoryMb")) is not None:
        kwargs["lambda_memory_mb"] = int(memory)
    if (factor := ctx.get(f"{_PREFIX}parallelizationFactor")) is not None:
        kwargs["parallelization_factor"] = int(factor)
    if (alarms := ctx.get(f"{_PREFIX}alarms")) is not None:
        kwargs["alarms"] = _flag(alarms)
    if (policies := ctx.get(f"{_PREFIX}managedPolicies")) is not None:
        kwargs["managed_policies"] = _flag(policies)
    if (publish := ctx.get(f"{_PREFIX}events")) is not None:
        kwargs["events"] = _flag(publish)
    if code := ctx.get(f"{_PREFIX}workflowCode"):
        kwargs["workflow_code"] = Path(str(code))
    if modules := ctx.get(f"{_PREFIX}workflowModules"):
        kwargs["workflow_modules"] = module_names(
            modules if isinstance(modules, list) else str(modules),
            field=f"{_PREFIX}workflowModules")
    return WhimbrelProps(**kwargs)


def _arn_list(value: Any) -> list[str]:
    if not value:
        return []
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, not {value!r}")
