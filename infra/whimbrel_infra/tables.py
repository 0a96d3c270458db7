"""The DynamoDB tables, generated from ``whimbrel.store.specs.TABLES``.

Nothing here names a key, an index or a stream: each table is a translation of its
:class:`~whimbrel.store.specs.TableSpec`, the same spec ``create_tables()`` reads.
"""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from whimbrel.store.specs import TABLES, IndexSpec, Key, TableSpec

from .props import WhimbrelProps

_ATTRIBUTE_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}


def construct_id(logical_name: str, suffix: str = "") -> str:
    """``activity_exec`` → ``ActivityExec`` + suffix: stable CloudFormation logical ids."""
    return "".join(part.capitalize() for part in logical_name.split("_")) + suffix


def build_tables(scope: Construct, props: WhimbrelProps) -> dict[str, dynamodb.Table]:
    """One table per spec, keyed by the spec's logical name."""
    return {spec.logical_name: _table(scope, spec, props) for spec in TABLES}


def _table(scope: Construct, spec: TableSpec, props: WhimbrelProps) -> dynamodb.Table:
    if props.encryption_key is not None:
        encryption = dynamodb.TableEncryption.CUSTOMER_MANAGED
    else:
        encryption = dynamodb.TableEncryption.AWS_MANAGED
    table = dynamodb.Table(
        scope,
        construct_id(spec.logical_name, "Table"),
        table_name=spec.table_name(props.table_prefix),
        partition_key=_attribute(spec.hash_key),
        sort_key=_attribute(spec.range_key) if spec.range_key else None,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        stream=dynamodb.StreamViewType[spec.stream] if spec.stream else None,
        time_to_live_attribute=spec.ttl_attribute,
        encryption=encryption,
        encryption_key=props.encryption_key,
        deletion_protection=props.effective_deletion_protection,
        removal_policy=props.removal_policy,
    )
    for index in spec.indexes:
        _add_index(table, index)
    return table


def _add_index(table: dynamodb.Table, index: IndexSpec) -> None:
    table.add_global_secondary_index(
        index_name=index.name,
        partition_key=_attribute(index.hash_key),
        sort_key=_attribute(index.range_key) if index.range_key else None,
        projection_type=dynamodb.ProjectionType[index.projection],
        non_key_attributes=list(index.non_key_attributes) or None,
    )


def _attribute(key: Key) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=key.name, type=_ATTRIBUTE_TYPES[key.type])
