"""cdk-nag (AWS Solutions) acknowledgements for the construct's own resources.

Each acknowledgement is scoped to the one resource it excuses and names the exact
finding (``RuleId[finding]``), so a new wildcard elsewhere still fails the check.
Users who run cdk-nag on an app that embeds :class:`~whimbrel_infra.Whimbrel` get
these for free; grants they add to their own roles are theirs to acknowledge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

from whimbrel.store.consumers import StreamConsumerSpec
from whimbrel.store.specs import table_spec

from .props import WhimbrelProps


class Acknowledged(Protocol):
    """What :func:`acknowledge_findings` reads of the construct (``Whimbrel``, which
    calls it: a protocol here, so this module does not import the construct's)."""

    @property
    def props(self) -> WhimbrelProps: ...
    @property
    def tables(self) -> Mapping[str, dynamodb.Table]: ...
    @property
    def functions(self) -> Mapping[str, lambda_.Function]: ...
    @property
    def dead_letter_queue(self) -> sqs.IQueue: ...
    @property
    def payload_bucket(self) -> s3.IBucket | None: ...
    @property
    def worker_policy(self) -> iam.ManagedPolicy | None: ...
    @property
    def client_policy(self) -> iam.ManagedPolicy | None: ...
    @property
    def stream_consumers(self) -> Mapping[str, tuple[StreamConsumerSpec, ...]]: ...

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
_PAYLOAD_PREFIX_REASON = (
    "Payload objects are keyed by run and content under the deployment's key prefix "
    "(<prefix>runs/<workflow_exec_id>/<sha256>.json), unknown until written; the grant "
    "names s3:GetObject/s3:PutObject on that prefix of the one payload bucket only."
)
_PAYLOAD_EXPIRY_REASON = (
    "The payload expiry function deletes the objects of a run whose item TTL removed, "
    "under <prefix>runs/<workflow_exec_id>/, a key known only from the stream record: "
    "s3:DeleteObject on the runs/ part of the prefix of the one payload bucket only."
)
_ACCESS_LOGS_REASON = (
    "The payload bucket holds engine-internal copies of run payloads, reached only "
    "through the functions' and policies' grants on its prefix; server access logs "
    "would need a second bucket per deployment. Enable CloudTrail S3 data events on it "
    "for an audit trail of object access."
)
_DLQ_REASON = (
    "This queue is itself the dead-letter queue (on-failure destination) of the stream "
    "event source mappings; giving a dead-letter queue its own dead-letter queue would "
    "only move failed records one hop further. An alarm fires when it is not empty."
)


def acknowledge_findings(whimbrel: Acknowledged) -> None:
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
    payload_acks = []
    bucket = whimbrel.payload_bucket
    if bucket is not None:
        payload_acks = [Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::<{_logical_id(bucket)}.Arn>/"
               f"{whimbrel.props.payload_prefix}{tail}]", reason=reason)
            for tail, reason in (("*", _PAYLOAD_PREFIX_REASON),
                                 ("runs/*", _PAYLOAD_EXPIRY_REASON))]
        if isinstance(bucket, s3.Bucket):
            Validations.of(bucket).acknowledge(
                Acknowledgment(id="AwsSolutions-S1", reason=_ACCESS_LOGS_REASON))
    for grantee in grantees:
        Validations.of(grantee).acknowledge(*index_acks, *kms_acks, *payload_acks)

    for name in whimbrel.stream_consumers:
        role = whimbrel.functions[name].role
        if role is not None:
            Validations.of(role).acknowledge(
                Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=_LIST_STREAMS_REASON)
            )


def _logical_id(bucket: s3.IBucket) -> str:
    cfn = bucket.node.default_child
    return Stack.of(bucket).get_logical_id(cfn) if isinstance(cfn, s3.CfnBucket) \
        else bucket.node.id


def _index_wildcard(logical_name: str, table: dynamodb.Table) -> Acknowledgment:
    cfn_table = table.node.default_child
    assert isinstance(cfn_table, dynamodb.CfnTable)
    logical_id = Stack.of(table).get_logical_id(cfn_table)
    indexes = ", ".join(index.name for index in table_spec(logical_name).indexes)
    return Acknowledgment(
        id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/index/*]",
        reason=_INDEX_REASON.format(table=logical_name, indexes=indexes),
    )
