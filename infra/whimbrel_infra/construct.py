"""``Whimbrel``: the reusable L3 construct that deploys the whole engine."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from whimbrel.store.consumers import NOTIFY_FUNCTION, PAYLOAD_EXPIRY_CONSUMER, StreamConsumerSpec

from . import access
from .alarms import build_alarms
from .bundling import LambdaBundle, lambda_code, newest_python_runtime
from .functions import ARCHITECTURE, build_functions
from .nag import acknowledge_findings
from .payloads import (
    build_expiry_function,
    build_payload_bucket,
    grant_payloads,
    grant_policy,
    wire_functions,
)
from .props import WhimbrelProps
from .tables import build_tables


class Whimbrel(Construct):
    """Whimbrel's tables, stream handlers, heartbeat schedule, events, policies and alarms.

    Example::

        from whimbrel_infra import Whimbrel, WhimbrelProps

        engine = Whimbrel(self, "Whimbrel", props=WhimbrelProps(table_prefix="orders_"))
        engine.worker_policy  # attach to your activity workers' roles
        engine.grant_activity_worker(my_worker_function)

        # Your code workflows, decided by the functions (python steps: a worker runs them)
        WhimbrelProps(workflow_code=Path("src"), workflow_modules=["shop.workflows"])

    Attributes:
        props: The props this instance was built with (defaults filled in).
        tables: Every table, keyed by its logical name in ``whimbrel.store.specs``.
        functions: The functions, keyed by name: ``workflow_request``,
            ``activity_event``, ``heartbeat`` and (with events) ``notify``.
        stream_consumers: The stream consumers (``whimbrel.store.specs``) feeding each
            function, by function name.
        event_bus: Where ``notify`` puts events (``None`` with ``events=False``).
        dead_letter_queue: Where stream records land after their bounded retries.
        heartbeat_rule: The EventBridge schedule of the heartbeat listener.
        payload_bucket: Where payloads over the threshold live (``None`` with
            ``payloads=False``).
        worker_policy: Managed policy for activity workers (``None`` if not deployed).
        client_policy: Managed policy for Full Logic API clients (``None`` likewise).
        alarms: The CloudWatch alarms (empty if not deployed).
        bundle: How the Lambda code asset is built.
    """

    def __init__(self, scope: Construct, construct_id: str, *, props: WhimbrelProps | None = None):
        super().__init__(scope, construct_id)
        self.props = props or WhimbrelProps()
        runtime = self.props.lambda_runtime or newest_python_runtime()
        self.bundle = LambdaBundle.for_lambda(
            runtime,
            ARCHITECTURE,
            source_root=self.props.source_root,
            cache_dir=self.props.bundle_cache_dir,
            workflow_code=Path(self.props.workflow_code) if self.props.workflow_code else None,
        )
        self.tables: Mapping[str, dynamodb.Table] = build_tables(self, self.props)
        code = lambda_code(self.bundle, runtime)
        engine = build_functions(self, self.props, self.tables, code, runtime)
        self.payload_bucket: s3.IBucket | None = build_payload_bucket(self, self.props)
        if self.payload_bucket is not None:
            wire_functions(self.payload_bucket, self.props, engine.by_name)
            # Its own grants (list and delete run objects), not the engine's.
            expiry = build_expiry_function(self, self.props, self.payload_bucket,
                                           self.tables, engine.dead_letter_queue, code,
                                           runtime)
            name = PAYLOAD_EXPIRY_CONSUMER.function_name
            engine = replace(engine, by_name={**engine.by_name, name: expiry},
                             consumers={**engine.consumers,
                                        name: (PAYLOAD_EXPIRY_CONSUMER,)})
        self.functions: Mapping[str, lambda_.Function] = engine.by_name
        self.stream_consumers: Mapping[str, tuple[StreamConsumerSpec, ...]] = engine.consumers
        self.event_bus: events.IEventBus | None = engine.event_bus
        self.dead_letter_queue: sqs.Queue = engine.dead_letter_queue
        self.heartbeat_rule: events.Rule = engine.heartbeat_rule

        self.worker_policy: iam.ManagedPolicy | None = None
        self.client_policy: iam.ManagedPolicy | None = None
        if self.props.managed_policies:
            prefix = self.props.table_prefix
            self.worker_policy = access.activity_worker_policy(self, prefix, self.tables)
            self.client_policy = access.full_logic_client_policy(self, prefix, self.tables)
            if self.payload_bucket is not None:
                for policy in (self.worker_policy, self.client_policy):
                    grant_policy(policy, self.payload_bucket, self.props)

        self.alarms: list[cloudwatch.Alarm] = []
        if self.props.alarms:
            self.alarms = build_alarms(
                self, self.props.table_prefix, engine, self.props.alarm_topic
            )

        acknowledge_findings(self)

    def table(self, logical_name: str) -> dynamodb.Table:
        """The table of one spec, e.g. ``table("activity_event")``."""
        return self.tables[logical_name]

    def grant_activity_worker(self, grantee: iam.IGrantable) -> None:
        """Give ``grantee`` what the ``worker_policy`` holds, without the managed policy."""
        access.grant_activity_worker(grantee, self.tables)
        if self.payload_bucket is not None:
            grant_payloads(grantee, self.payload_bucket, self.props)

    def grant_full_logic_client(self, grantee: iam.IGrantable) -> None:
        """Give ``grantee`` what the ``client_policy`` holds, without the managed policy."""
        access.grant_full_logic_client(grantee, self.tables)
        if self.payload_bucket is not None:
            grant_payloads(grantee, self.payload_bucket, self.props)

    def allow_launching(self, *targets: Any) -> None:
        """Let the engine functions start activities on ``targets``.

        Every engine function may launch (a request starts the first activities, an
        event readies dependents, the heartbeat launches retries), so each gets the
        grant; the ``notify`` and ``payload_expiry`` functions launch nothing and get
        none. Accepted: Lambda
        functions (``lambda`` launcher: async invoke), SQS queues (``sqs``: send
        message) and ECS task definitions (``ecs``: RunTask + PassRole; set
        ``container`` in the launcher config, since DescribeTaskDefinition cannot be
        granted on one resource).

        Raises:
            TypeError: a target of another kind.
        """
        engine = [fn for name, fn in self.functions.items()
                  if name not in (NOTIFY_FUNCTION, PAYLOAD_EXPIRY_CONSUMER.function_name)]
        for target in targets:
            for fn in engine:
                if hasattr(target, "grant_invoke"):
                    # The launcher invokes the unqualified function; grant_invoke would
                    # add every version and alias (ARN:*), a wildcard cdk-nag flags.
                    iam.Grant.add_to_principal(
                        grantee=fn,
                        actions=["lambda:InvokeFunction"],
                        resource_arns=[target.function_arn],
                    )
                elif hasattr(target, "grant_send_messages"):
                    target.grant_send_messages(fn)
                elif hasattr(target, "grant_run"):
                    target.grant_run(fn)
                else:
                    raise TypeError(
                        f"cannot launch activities on {target!r}: expected a Lambda "
                        "function, an SQS queue or an ECS task definition"
                    )

    def grant_start_workflow(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` start workflows through the Simple Lambda API (one PutItem)."""
        access.grant_start_workflow(grantee, self.tables)
