"""The payload bucket: where payloads over the threshold live (docs/operations.md,
"Large payloads"). Created private — SSE-S3 encryption, public access blocked, TLS
enforced by its policy, a lifecycle rule on the key prefix — or taken from the caller;
each function gets only the object actions it uses, on the prefix only.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from whimbrel.settings import ENV_PAYLOAD_BUCKET, ENV_PAYLOAD_PREFIX
from whimbrel.store.consumers import NOTIFY_FUNCTION, PAYLOAD_EXPIRY_CONSUMER

from .functions import make_function, stream_source
from .props import STREAM_FUNCTION_TIMEOUT_SECONDS, WhimbrelProps

#: Object actions by who does what: the engine functions, workers and clients write
#: payloads and read them; notify only reads (a map's item outputs, assembled).
READ_WRITE = ("s3:GetObject", "s3:PutObject")
READ = ("s3:GetObject",)


def build_payload_bucket(scope: Construct, props: WhimbrelProps) -> s3.IBucket | None:
    """The bucket (``props.payload_bucket``, a new one, or None with ``payloads=False``)."""
    if props.payload_bucket is not None:
        return props.payload_bucket
    if not props.payloads:
        return None
    return s3.Bucket(
        scope,
        "PayloadBucket",
        # SSE-S3: no key to manage, and no KMS request charge on every GET and PUT.
        encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        # Objects are immutable by key (content-addressed): versions would only keep
        # what the lifecycle rule expires.
        versioned=False,
        removal_policy=props.removal_policy,
        lifecycle_rules=[s3.LifecycleRule(
            id="whimbrel-payloads-expire",
            prefix=f"{props.payload_prefix}runs/",
            expiration=Duration.days(props.effective_payload_expiry_days),
            abort_incomplete_multipart_upload_after=Duration.days(1),
        )],
    )


def objects_arn(bucket: s3.IBucket, props: WhimbrelProps) -> str:
    return bucket.arn_for_objects(f"{props.payload_prefix}*")


def wire_functions(bucket: s3.IBucket, props: WhimbrelProps,
                   functions: Mapping[str, lambda_.Function]) -> None:
    """Tell every function where payloads go and let it do what it does there."""
    for name, fn in functions.items():
        fn.add_environment(ENV_PAYLOAD_BUCKET, bucket.bucket_name)
        fn.add_environment(ENV_PAYLOAD_PREFIX, props.payload_prefix)
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=list(READ if name == NOTIFY_FUNCTION else READ_WRITE),
            resources=[objects_arn(bucket, props)]))


def grant_policy(policy: iam.ManagedPolicy, bucket: s3.IBucket, props: WhimbrelProps) -> None:
    """Workers and Full Logic clients write and read payloads."""
    policy.add_statements(iam.PolicyStatement(actions=list(READ_WRITE),
                                              resources=[objects_arn(bucket, props)]))


def grant_payloads(grantee: iam.IGrantable, bucket: s3.IBucket, props: WhimbrelProps) -> None:
    """What :func:`grant_policy` gives, on a role of the caller's."""
    iam.Grant.add_to_principal(grantee=grantee, actions=list(READ_WRITE),
                               resource_arns=[objects_arn(bucket, props)])


def runs_arn(bucket: s3.IBucket, props: WhimbrelProps) -> str:
    """Every run's objects (``<prefix>runs/<workflow_exec_id>/...``)."""
    return bucket.arn_for_objects(f"{props.payload_prefix}runs/*")


def build_expiry_function(scope: Construct, props: WhimbrelProps, bucket: s3.IBucket,
                          tables: Mapping[str, dynamodb.Table], dlq: sqs.Queue,
                          code: lambda_.Code, runtime: lambda_.Runtime) -> lambda_.Function:
    """The function that deletes a run's objects when TTL removes its item
    (whimbrel/store/blob_expiry.py). It reads the run table's stream (granted by its
    event source) and may list and delete run objects, nothing else: no table access,
    no GetObject or PutObject."""
    consumer = PAYLOAD_EXPIRY_CONSUMER
    fn = make_function(
        scope, consumer.function_name, consumer.handler,
        Duration.seconds(STREAM_FUNCTION_TIMEOUT_SECONDS), props, code, runtime,
        environment={ENV_PAYLOAD_BUCKET: bucket.bucket_name,
                     ENV_PAYLOAD_PREFIX: props.payload_prefix})
    fn.add_event_source(stream_source(consumer, tables[consumer.table.logical_name], dlq,
                                      props.parallelization_factor))
    # Listing is a bucket action: limited by its prefix condition to the run objects.
    fn.add_to_role_policy(iam.PolicyStatement(
        actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
        conditions={"StringLike": {"s3:prefix": [f"{props.payload_prefix}runs/*"]}}))
    # DeleteObjects (up to 1,000 keys a request) is authorised as s3:DeleteObject per key.
    fn.add_to_role_policy(iam.PolicyStatement(actions=["s3:DeleteObject"],
                                              resources=[runs_arn(bucket, props)]))
    return fn
