"""cdk-nag (AWS Solutions) acknowledgements for the construct's own resources.

Each acknowledgement is scoped to the one resource it excuses and names the exact
finding (``RuleId[finding]``), so a new wildcard elsewhere still fails the check.
Users who run cdk-nag on an app that embeds :class:`~whimbrel_infra.Whimbrel` get
these for free; grants they add to their own roles are theirs to acknowledge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from constructs import IConstruct

from whimbrel.store.specs import table_spec

if TYPE_CHECKING:
    from .construct import Whimbrel

_INDEX_REASON = (
    "Grants on a table also cover its global secondary indexes ({table}/index/*); the "
    "engine queries its sparse indexes ({indexes}) and CDK's grant methods express that "
    "as the index wildcard of this one table only, not of any other resource."
)
_LIST_STREAMS_REASON = (
    "dynamodb:ListStreams does not support resource-level permissions (see the Service "
    "Authorization Reference for DynamoDB); CDK's DynamoEventSource grants it on '*' "
    "for the event source mapping. Reading a stream is granted on this table's stream "
    "ARN only."
)
_KMS_REASON = (
    "CDK's grants for a customer-managed key: writing an encrypted table or queue needs "
    "kms:GenerateDataKey* and kms:ReEncrypt* (their variants, e.g. WithoutPlaintext, "
    "ReEncryptFrom/To); the statement names the one key of this deployment only."
)
_DLQ_REASON = (
    "This queue is itself the dead-letter queue (on-failure destination) of the stream "
    "event source mappings; giving a dead-letter queue its own dead-letter queue would "
    "only move failed records one hop further. An alarm fires when it is not empty."
)


def acknowledge_findings(whimbrel: Whimbrel) -> None:
    """Acknowledge, with reasons, the findings the construct's design implies."""
    Validations.of(whimbrel.dead_letter_queue).acknowledge(
        Acknowledgment(id="AwsSolutions-SQS3", reason=_DLQ_REASON)
    )

    index_acks = [
        _index_wildcard(name, table)
        for name, table in whimbrel.tables.items()
        if table_spec(name).indexes
    ]
    grantees: list[IConstruct] = [fn.role for fn in whimbrel.functions.values() if fn.role]
    grantees += [p for p in (whimbrel.worker_policy, whimbrel.client_policy) if p is not None]
    kms_acks = []
    if whimbrel.props.encryption_key is not None:
        kms_acks = [
            Acknowledgment(id=f"AwsSolutions-IAM5[Action::{action}]", reason=_KMS_REASON)
            for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*")
        ]
    for grantee in grantees:
        Validations.of(grantee).acknowledge(*index_acks, *kms_acks)

    for name in whimbrel.stream_consumers:
        role = whimbrel.functions[name].role
        if role is not None:
            Validations.of(role).acknowledge(
                Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=_LIST_STREAMS_REASON)
            )


def _index_wildcard(logical_name: str, table: dynamodb.Table) -> Acknowledgment:
    cfn_table = table.node.default_child
    assert isinstance(cfn_table, dynamodb.CfnTable)
    logical_id = Stack.of(table).get_logical_id(cfn_table)
    indexes = ", ".join(index.name for index in table_spec(logical_name).indexes)
    return Acknowledgment(
        id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/index/*]",
        reason=_INDEX_REASON.format(table=logical_name, indexes=indexes),
    )
