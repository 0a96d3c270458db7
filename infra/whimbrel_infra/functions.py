"""The engine functions, the notify function, their stream mappings, dead-letter queue
and schedule.

Handler paths and every stream-consumer setting (batch size, retries, record age,
bisect, partial failures, filters) come from ``whimbrel.store.specs`` — the same
values the local runtime honours — so the deployed and local stacks behave alike.
Consumers that name the same ``function`` (the notify consumers of ``workflow_exec``,
``activity_exec`` and ``map_item``) are mappings of one function.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from whimbrel.settings import ENV_EVENT_BUS, ENV_METRICS, ENV_MODULES
from whimbrel.store.consumers import (
    ENGINE_CONSUMERS,
    HEARTBEAT_HANDLER,
    NOTIFY_CONSUMERS,
    NOTIFY_FUNCTION,
    StreamConsumerSpec,
)

from .access import grant_engine_access, grant_notify_access, grant_registering
from .props import (
    DLQ_RETENTION_DAYS,
    HEARTBEAT_FUNCTION_TIMEOUT_SECONDS,
    STREAM_FUNCTION_TIMEOUT_SECONDS,
    WhimbrelProps,
)
from .tables import construct_id

#: The environment variable the handlers read their table prefix from.
TABLE_PREFIX_ENV = "WHIMBREL_TABLE_PREFIX"
HEARTBEAT_NAME = "heartbeat"
ARCHITECTURE = lambda_.Architecture.ARM_64


@dataclass(frozen=True)
class EngineFunctions:
    """The deployed functions, keyed by function name (a consumer's ``function_name``,
    plus ``heartbeat``), and what feeds them."""

    by_name: Mapping[str, lambda_.Function]
    dead_letter_queue: sqs.Queue
    heartbeat_rule: events.Rule
    #: The stream consumers feeding each function, by function name.
    consumers: Mapping[str, tuple[StreamConsumerSpec, ...]]
    #: Where the notify function puts events (None when events are off).
    event_bus: events.IEventBus | None = None


def deployed_consumers(props: WhimbrelProps) -> tuple[StreamConsumerSpec, ...]:
    """The engine's consumers, and the notify ones unless events are off."""
    return ENGINE_CONSUMERS + (NOTIFY_CONSUMERS if props.events else ())


def dead_letter_queue(scope: Construct, props: WhimbrelProps) -> sqs.Queue:
    """Where stream records go after their bounded retries; encrypted, TLS only."""
    if props.encryption_key is not None:
        encryption = sqs.QueueEncryption.KMS
    else:
        encryption = sqs.QueueEncryption.SQS_MANAGED
    return sqs.Queue(
        scope,
        "StreamDeadLetterQueue",
        encryption=encryption,
        encryption_master_key=props.encryption_key,
        enforce_ssl=True,
        retention_period=Duration.days(DLQ_RETENTION_DAYS),
        removal_policy=props.removal_policy,
    )


def build_functions(
    scope: Construct,
    props: WhimbrelProps,
    tables: Mapping[str, dynamodb.Table],
    code: lambda_.Code,
    runtime: lambda_.Runtime,
) -> EngineFunctions:
    dlq = dead_letter_queue(scope, props)
    functions: dict[str, lambda_.Function] = {}
    fed: dict[str, tuple[StreamConsumerSpec, ...]] = {}
    bus: events.IEventBus | None = None
    if props.events:
        bus = props.event_bus or events.EventBus.from_event_bus_name(
            scope, "DefaultEventBus", "default")
    for consumer in deployed_consumers(props):
        name = consumer.function_name
        fn = functions.get(name)
        if fn is None:
            notify = name == NOTIFY_FUNCTION
            # notify decides nothing: the bus is its only setting of its own.
            environment = ({ENV_EVENT_BUS: bus.event_bus_arn} if bus else {}) if notify \
                else workflow_environment(props)
            fn = make_function(
                scope,
                name,
                consumer.handler,
                Duration.seconds(STREAM_FUNCTION_TIMEOUT_SECONDS),
                props,
                code,
                runtime,
                environment=environment,
            )
            if notify:
                assert bus is not None  # notify consumers are deployed with events only
                grant_notify_access(fn, tables)
                bus.grant_put_events_to(fn)
            else:
                grant_engine_access(fn, tables)
                if props.workflow_modules:
                    grant_registering(fn, tables)
            functions[name] = fn
        fn.add_event_source(stream_source(consumer, tables[consumer.table.logical_name], dlq,
                                           props.parallelization_factor))
        fed[name] = (*fed.get(name, ()), consumer)

    heartbeat = make_function(
        scope,
        HEARTBEAT_NAME,
        HEARTBEAT_HANDLER,
        Duration.seconds(HEARTBEAT_FUNCTION_TIMEOUT_SECONDS),
        props,
        code,
        runtime,
        # A failed tick is not retried: the next tick sweeps and reconciles everything
        # again, and the errors alarm reports the failure.
        retry_attempts=0,
        environment=workflow_environment(props),
    )
    grant_engine_access(heartbeat, tables, sweeps=True)
    if props.workflow_modules:
        grant_registering(heartbeat, tables)
    functions[HEARTBEAT_NAME] = heartbeat
    rule = events.Rule(
        scope,
        "HeartbeatSchedule",
        description="Whimbrel heartbeat listener: time out silent activities, reconcile.",
        schedule=events.Schedule.rate(props.effective_heartbeat_rate),
        enabled=props.heartbeat_enabled,
        targets=[targets.LambdaFunction(heartbeat, retry_attempts=0)],
    )
    return EngineFunctions(by_name=functions, dead_letter_queue=dlq, heartbeat_rule=rule,
                           consumers=fed, event_bus=bus)


def workflow_environment(props: WhimbrelProps) -> dict[str, str]:
    """What makes an engine function a worker for the user's code workflows: the modules
    it imports at cold start (lambdas/_shared.py); nothing without workflow code."""
    if not props.workflow_modules:
        return {}
    return {ENV_MODULES: ",".join(props.workflow_modules)}


def make_function(
    scope: Construct,
    name: str,
    handler: str,
    timeout: Duration,
    props: WhimbrelProps,
    code: lambda_.Code,
    runtime: lambda_.Runtime,
    retry_attempts: int | None = None,
    environment: Mapping[str, str] | None = None,
) -> lambda_.Function:
    # An explicit role and log group instead of the AWSLambdaBasicExecutionRole managed
    # policy: the role may write to its own log group and nothing else.
    role = iam.Role(
        scope,
        construct_id(name, "Role"),
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"Whimbrel {name} handler",
    )
    log_group = logs.LogGroup(
        scope,
        construct_id(name, "Logs"),
        retention=props.log_retention,
        removal_policy=props.removal_policy,
    )
    log_group.grant_write(role)
    return lambda_.Function(
        scope,
        construct_id(name, "Function"),
        description=f"Whimbrel {name} handler (tables {props.table_prefix}*)",
        runtime=runtime,
        architecture=ARCHITECTURE,
        handler=handler,
        code=code,
        role=role,
        log_group=log_group,
        memory_size=props.lambda_memory_mb,
        timeout=timeout,
        retry_attempts=retry_attempts,
        environment={
            TABLE_PREFIX_ENV: props.table_prefix,
            "POWERTOOLS_SERVICE_NAME": "whimbrel",
            "POWERTOOLS_METRICS_NAMESPACE": "Whimbrel",
            # The engine's workflow and activity ends as EMF lines (the failed-workflows
            # alarm reads them).
            ENV_METRICS: "emf",
            **(environment or {}),
        },
    )


def stream_source(
    consumer: StreamConsumerSpec, table: dynamodb.Table, dlq: sqs.Queue,
    parallelization_factor: int,
) -> sources.DynamoEventSource:
    return sources.DynamoEventSource(
        table,
        starting_position=lambda_.StartingPosition[consumer.starting_position],
        batch_size=consumer.batch_size,
        max_batching_window=Duration.seconds(consumer.max_batching_window_seconds),
        retry_attempts=consumer.max_retry_attempts,
        max_record_age=Duration.seconds(consumer.max_record_age_seconds),
        bisect_batch_on_error=consumer.bisect_batch_on_error,
        report_batch_item_failures=consumer.report_batch_item_failures,
        # The deployment's, not the spec's (1, which the local pump keeps: it runs one
        # invocation at a time and handles a batch's records concurrently itself).
        parallelization_factor=parallelization_factor,
        on_failure=sources.SqsDlq(dlq),
        # The spec holds Lambda's filter JSON already; only serialise it.
        filters=[{"pattern": json.dumps(pattern)} for pattern in consumer.filter_patterns],
    )
