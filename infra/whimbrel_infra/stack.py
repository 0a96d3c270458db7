"""``WhimbrelStack``: a stack holding one :class:`Whimbrel` and its outputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from aws_cdk import Arn, ArnFormat, CfnOutput, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from .construct import Whimbrel
from .props import WhimbrelProps
from .tables import construct_id


class WhimbrelStack(Stack):
    """The stack ``infra/app.py`` deploys. Extra keyword arguments go to ``Stack``.

    Outputs: every table's name, the dead-letter queue's URL, the managed policies'
    ARNs and the event bus's ARN, so scripts and other stacks can find them.

    Args:
        props: The construct's props.
        encryption_key_arn: An existing customer-managed KMS key to use (overrides
            ``props.encryption_key``); convenient from CDK context.
        alarm_topic_arn: An existing SNS topic for the alarms (overrides
            ``props.alarm_topic``).
        launch_target_arns: Lambda functions and SQS queues the engine may launch
            activities on (see :meth:`Whimbrel.allow_launching`), by ARN.
        event_bus_arn: An existing EventBridge bus for the events (overrides
            ``props.event_bus``; the default bus otherwise).

    Raises:
        ValueError: a launch target ARN that is neither a Lambda function nor a queue.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        props: WhimbrelProps | None = None,
        encryption_key_arn: str | None = None,
        alarm_topic_arn: str | None = None,
        launch_target_arns: Sequence[str] = (),
        event_bus_arn: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault(
            "description", "Whimbrel: a serverless, decentralized workflow engine on DynamoDB"
        )
        super().__init__(scope, construct_id_, **kwargs)
        props = props or WhimbrelProps()
        if encryption_key_arn:
            key = kms.Key.from_key_arn(self, "EncryptionKey", encryption_key_arn)
            props = dataclasses.replace(props, encryption_key=key)
        if alarm_topic_arn:
            topic = sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn)
            props = dataclasses.replace(props, alarm_topic=topic)
        if event_bus_arn:
            bus = events.EventBus.from_event_bus_arn(self, "EventBus", event_bus_arn)
            props = dataclasses.replace(props, event_bus=bus)
        self.whimbrel = Whimbrel(self, "Whimbrel", props=props)
        for index, arn in enumerate(launch_target_arns):
            self.whimbrel.allow_launching(_import_launch_target(self, f"LaunchTarget{index}", arn))

        for logical_name, table in self.whimbrel.tables.items():
            CfnOutput(
                self,
                construct_id(logical_name, "TableName"),
                value=table.table_name,
                description=f"DynamoDB table {logical_name}",
            )
        CfnOutput(
            self,
            "DeadLetterQueueUrl",
            value=self.whimbrel.dead_letter_queue.queue_url,
            description="Stream records that failed every retry",
        )
        if self.whimbrel.worker_policy is not None:
            CfnOutput(
                self,
                "ActivityWorkerPolicyArn",
                value=self.whimbrel.worker_policy.managed_policy_arn,
                description="Attach to the IAM roles of activity workers",
            )
        if self.whimbrel.event_bus is not None:
            CfnOutput(
                self,
                "EventBusArn",
                value=self.whimbrel.event_bus.event_bus_arn,
                description="Where Whimbrel's events go (source whimbrel): add rules here",
            )
        if self.whimbrel.client_policy is not None:
            CfnOutput(
                self,
                "FullLogicClientPolicyArn",
                value=self.whimbrel.client_policy.managed_policy_arn,
                description="Attach to the IAM roles of Full Logic API clients",
            )


def _import_launch_target(scope: Construct, construct_id_: str, arn: str) -> Any:
    service = Arn.split(arn, ArnFormat.COLON_RESOURCE_NAME).service
    if service == "lambda":
        return lambda_.Function.from_function_arn(scope, construct_id_, arn)
    if service == "sqs":
        return sqs.Queue.from_queue_arn(scope, construct_id_, arn)
    raise ValueError(
        f"launch target {arn!r} is neither a Lambda function nor an SQS queue; grant ECS "
        "task definitions with Whimbrel.allow_launching in your own app"
    )
