"""CloudWatch alarms: records dead-lettered, handler errors, streams falling behind,
workflows that failed, sweep items that failed."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from whimbrel.contract.states import WorkflowState
from whimbrel.observe.emf import (
    DIM_PREFIX,
    DIM_STATE,
    NAMESPACE,
    SWEEP_ERRORS,
    WORKFLOWS_ENDED,
)

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
    for name, consumers in functions.consumers.items():
        max_age = min(c.max_record_age_seconds for c in consumers)
        threshold_ms = max_age * 1000 * ITERATOR_AGE_ALARM_FRACTION
        streams = " and ".join(c.table.logical_name for c in consumers)
        alarms.append(
            cloudwatch.Alarm(
                scope,
                construct_id(name, "IteratorAgeAlarm"),
                alarm_name=f"{prefix}{name}_iterator_age",
                alarm_description=f"The {name} function falls behind on the {streams} "
                f"stream; records older than {max_age} s are dead-lettered.",
                metric=functions.by_name[name].metric(
                    "IteratorAge", period=_PERIOD, statistic=cloudwatch.Stats.MAXIMUM
                ),
                threshold=threshold_ms,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        )
    alarms.append(_workflows_failed(scope, prefix))
    alarms.append(_sweep_errors(scope, prefix))
    if topic is not None:
        for alarm in alarms:
            alarm.add_alarm_action(actions.SnsAction(topic))
    return alarms


def _workflows_failed(scope: Construct, prefix: str) -> cloudwatch.Alarm:
    """Runs that ended FAILED or TIMED_OUT, from the engine's EMF metrics (every function
    and every in-process client with ``WHIMBREL_METRICS=emf`` reports them)."""
    ended = {
        key: cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=WORKFLOWS_ENDED,
            dimensions_map={DIM_PREFIX: prefix, DIM_STATE: state.value},
            period=_PERIOD,
            statistic=cloudwatch.Stats.SUM,
        )
        for key, state in (("failed", WorkflowState.FAILED),
                           ("timed_out", WorkflowState.TIMED_OUT))
    }
    return cloudwatch.Alarm(
        scope,
        "WorkflowsFailedAlarm",
        alarm_name=f"{prefix}workflows_failed",
        alarm_description="Workflow runs ended FAILED or TIMED_OUT; find them with "
        "`whimbrel list --state FAILED --state TIMED_OUT --days 1`.",
        metric=cloudwatch.MathExpression(
            # FILL: a period with failures but no time-outs (or the reverse) still adds up.
            expression="FILL(failed, 0) + FILL(timed_out, 0)",
            using_metrics=dict(ended),
            period=_PERIOD,
            label="Workflows FAILED or TIMED_OUT",
        ),
        threshold=0,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )


def _sweep_errors(scope: Construct, prefix: str) -> cloudwatch.Alarm:
    """Items a sweep pass could not handle (the pass went on with the others; the item
    is visited again next pass), from the engine's EMF ``SweepErrors`` metric."""
    return cloudwatch.Alarm(
        scope,
        "SweepErrorsAlarm",
        alarm_name=f"{prefix}sweep_errors",
        alarm_description="A sweep pass failed on some items (the others were handled); "
        "`whimbrel sweep` names them under errors, the listener's log has the traceback.",
        metric=cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=SWEEP_ERRORS,
            dimensions_map={DIM_PREFIX: prefix},
            period=_PERIOD,
            statistic=cloudwatch.Stats.SUM,
        ),
        threshold=0,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
