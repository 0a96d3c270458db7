"""CloudWatch alarms: records dead-lettered, handler errors, streams falling behind."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from whimbrel.store.specs import STREAM_CONSUMERS

from .functions import EngineFunctions
from .props import ITERATOR_AGE_ALARM_FRACTION
from .tables import construct_id

_PERIOD = Duration.minutes(5)


def build_alarms(
    scope: Construct, prefix: str, functions: EngineFunctions, topic: sns.ITopic | None
) -> list[cloudwatch.Alarm]:
    """The alarms, named after the table prefix (``whimbrel_dead_letter_queue_not_empty``)."""
    alarms = [
        cloudwatch.Alarm(
            scope,
            "DeadLetterQueueNotEmptyAlarm",
            alarm_name=f"{prefix}dead_letter_queue_not_empty",
            alarm_description="Stream records failed all retries and were dead-lettered; "
            "inspect the queue, fix the cause, then re-drive or discard them.",
            metric=functions.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1), statistic=cloudwatch.Stats.MAXIMUM
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
    ]
    for name, fn in functions.by_name.items():
        alarms.append(
            cloudwatch.Alarm(
                scope,
                construct_id(name, "ErrorsAlarm"),
                alarm_name=f"{prefix}{name}_errors",
                alarm_description=f"The Whimbrel {name} handler failed invocations.",
                metric=fn.metric_errors(period=_PERIOD, statistic=cloudwatch.Stats.SUM),
                threshold=0,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        )
    for consumer in STREAM_CONSUMERS:
        threshold_ms = consumer.max_record_age_seconds * 1000 * ITERATOR_AGE_ALARM_FRACTION
        alarms.append(
            cloudwatch.Alarm(
                scope,
                construct_id(consumer.name, "IteratorAgeAlarm"),
                alarm_name=f"{prefix}{consumer.name}_iterator_age",
                alarm_description=f"The {consumer.name} stream is falling behind; records "
                f"older than {consumer.max_record_age_seconds} s are dead-lettered.",
                metric=functions.by_name[consumer.name].metric(
                    "IteratorAge", period=_PERIOD, statistic=cloudwatch.Stats.MAXIMUM
                ),
                threshold=threshold_ms,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        )
    if topic is not None:
        for alarm in alarms:
            alarm.add_alarm_action(actions.SnsAction(topic))
    return alarms
