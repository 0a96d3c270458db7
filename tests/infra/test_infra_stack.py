"""The synthesized stack against the single source of truth, ``whimbrel.store.specs``.

Every test here reads one synthesis (the session fixture ``synthesized``), so they
stay in this one file: with ``pytest -n 2 --dist loadfile`` the app is synthesized
on one worker only, while the bundle tests run on the other.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _infra_support import INFRA, Synthesized
from aws_cdk import Validations
from cdk_nag import AwsSolutionsChecks
from whimbrel_infra.bundling import RUNTIME_PROVIDED, newest_python_runtime
from whimbrel_infra.functions import TABLE_PREFIX_ENV
from whimbrel_infra.props import DEFAULT_PARALLELIZATION_FACTOR

from whimbrel.contract.records import WorkflowRecord
from whimbrel.contract.states import WorkflowState
from whimbrel.observe.emf import EmfMetrics
from whimbrel.settings import ENV_EVENT_BUS, ENV_METRICS
from whimbrel.store.consumers import (
    HEARTBEAT_HANDLER,
    HEARTBEAT_RATE_SECONDS_AWS,
    NOTIFY_HANDLER,
    PAYLOAD_EXPIRY_CONSUMER,
    STREAM_CONSUMERS,
)
from whimbrel.store.specs import (
    ACTIVITY_EVENT,
    ACTIVITY_EXEC,
    ACTIVITY_EXEC_DEPENDENCY,
    DEFAULT_TABLE_PREFIX,
    MAP_ITEM,
    NOTIFICATION,
    TABLES,
    WORKFLOW_DEFINITION,
    WORKFLOW_EXEC,
    WORKFLOW_REQUEST,
    TableSpec,
    create_table_request,
)

pytestmark = pytest.mark.infra

PREFIX = DEFAULT_TABLE_PREFIX  # cdk.json sets no prefix, so the default applies
#: One function per distinct function name (the notify consumers share one), + heartbeat.
FUNCTIONS = {c.function_name for c in STREAM_CONSUMERS} | {"heartbeat"}


# --- helpers ------------------------------------------------------------------------


def _table_id(syn: Synthesized, spec: TableSpec) -> str:
    name = spec.table_name(PREFIX)
    [logical_id] = [
        k
        for k, r in syn.of_type("AWS::DynamoDB::Table").items()
        if r["Properties"]["TableName"] == name
    ]
    return logical_id


def _function_id(syn: Synthesized, handler: str) -> str:
    [logical_id] = [
        k
        for k, r in syn.of_type("AWS::Lambda::Function").items()
        if r["Properties"]["Handler"] == handler
    ]
    return logical_id


def _queue_id(syn: Synthesized) -> str:
    [logical_id] = syn.of_type("AWS::SQS::Queue")
    return logical_id


def _listify(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _identity_statements(syn: Synthesized) -> list[tuple[str, dict[str, Any]]]:
    """Every statement of every identity policy (roles' inline, policies, managed)."""
    found: list[tuple[str, dict[str, Any]]] = []
    for logical_id, resource in syn.resources.items():
        props = resource.get("Properties", {})
        documents = []
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents.append(props["PolicyDocument"])
        if resource["Type"] == "AWS::IAM::Role":
            documents += [p["PolicyDocument"] for p in props.get("Policies", [])]
        for document in documents:
            found += [(logical_id, statement) for statement in document["Statement"]]
    return found


def _table_arn_references(value: Any) -> set[str]:
    """Logical ids whose ``Arn`` (the table or its indexes, not its stream) ``value`` uses."""
    refs: set[str] = set()
    if isinstance(value, dict):
        if value.get("Fn::GetAtt", [None, None])[1] == "Arn":
            refs.add(value["Fn::GetAtt"][0])
        for inner in value.values():
            refs |= _table_arn_references(inner)
    elif isinstance(value, list):
        for inner in value:
            refs |= _table_arn_references(inner)
    return refs


def _references(value: Any) -> set[str]:
    """Logical ids a Ref / Fn::GetAtt inside ``value`` points at."""
    refs: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value:
            refs.add(value["Ref"])
        if "Fn::GetAtt" in value:
            refs.add(value["Fn::GetAtt"][0])
        for inner in value.values():
            refs |= _references(inner)
    elif isinstance(value, list):
        for inner in value:
            refs |= _references(inner)
    return refs


# --- tables -------------------------------------------------------------------------


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.logical_name)
def test_table_matches_its_spec(synthesized: Synthesized, spec: TableSpec) -> None:
    props = synthesized.resources[_table_id(synthesized, spec)]["Properties"]
    # create_table_request is what create_tables() sends to DynamoDB (Local); the
    # CloudFormation properties have the same shape, so the two must agree exactly.
    request = create_table_request(spec, PREFIX)

    assert props["KeySchema"] == request["KeySchema"]
    key = lambda d: d["AttributeName"]  # noqa: E731
    assert sorted(props["AttributeDefinitions"], key=key) == sorted(
        request["AttributeDefinitions"], key=key
    )
    by_name = lambda d: d["IndexName"]  # noqa: E731
    assert sorted(props.get("GlobalSecondaryIndexes", []), key=by_name) == sorted(
        request.get("GlobalSecondaryIndexes", []), key=by_name
    )
    assert "LocalSecondaryIndexes" not in props
    assert props["BillingMode"] == request["BillingMode"] == "PAY_PER_REQUEST"
    if spec.stream:
        assert props["StreamSpecification"] == {"StreamViewType": spec.stream}
    else:
        assert "StreamSpecification" not in props
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    # TTL is on for every table (issue 11: tables that don't grow forever).
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_epoch",
                                                 "Enabled": True}
    assert props["SSESpecification"]["SSEEnabled"] is True


def test_every_table_comes_from_the_specs(synthesized: Synthesized) -> None:
    names = {
        r["Properties"]["TableName"] for r in synthesized.of_type("AWS::DynamoDB::Table").values()
    }
    assert names == {spec.table_name(PREFIX) for spec in TABLES}


def test_tables_are_retained_and_protected_by_default(synthesized: Synthesized) -> None:
    for resource in synthesized.of_type("AWS::DynamoDB::Table").values():
        assert resource["DeletionPolicy"] == "Retain"
        assert resource["UpdateReplacePolicy"] == "Retain"
        assert resource["Properties"]["DeletionProtectionEnabled"] is True


# --- functions, stream mappings, schedule --------------------------------------------


def payload_bucket_id(synthesized: Synthesized) -> str:
    [bucket] = [k for k, r in synthesized.resources.items() if r["Type"] == "AWS::S3::Bucket"]
    return bucket


def test_functions_run_the_newest_python_on_arm64(synthesized: Synthesized) -> None:
    functions = synthesized.of_type("AWS::Lambda::Function")
    handlers = {r["Properties"]["Handler"] for r in functions.values()}
    assert handlers == {c.handler for c in STREAM_CONSUMERS} | {HEARTBEAT_HANDLER}
    runtime = newest_python_runtime().name
    for resource in functions.values():
        props = resource["Properties"]
        assert props["Runtime"] == runtime
        assert props["Architectures"] == ["arm64"]
        assert 0 < props["Timeout"] <= 900
        variables = dict(props["Environment"]["Variables"])
        # Only the notify function names the bus (the default bus, by ARN).
        bus = variables.pop(ENV_EVENT_BUS, None)
        assert (bus is not None) is (props["Handler"] == NOTIFY_HANDLER)
        if bus is not None:
            assert json.dumps(bus).endswith(':event-bus/default"]]}')
        assert variables == {
            TABLE_PREFIX_ENV: PREFIX,
            "POWERTOOLS_SERVICE_NAME": "whimbrel",
            "POWERTOOLS_METRICS_NAMESPACE": "Whimbrel",
            ENV_METRICS: "emf",  # the engine's ends as EMF lines, for the alarm
            # Large payloads: the construct's bucket (issue 27).
            "WHIMBREL_PAYLOAD_BUCKET": {"Ref": payload_bucket_id(synthesized)},
            "WHIMBREL_PAYLOAD_PREFIX": "whimbrel/",
        }
        # Each function logs to its own log group, which has a retention.
        [log_group] = _references(props["LoggingConfig"])
        retention = synthesized.resources[log_group]["Properties"].get("RetentionInDays")
        assert isinstance(retention, int) and retention > 0  # never "keep forever"
    assert len(functions) == len(FUNCTIONS)
    # One code asset shared by the functions (one upload per deploy).
    assert len({json.dumps(r["Properties"]["Code"]) for r in functions.values()}) == 1


@pytest.mark.parametrize("consumer", STREAM_CONSUMERS, ids=lambda c: c.name)
def test_event_source_mapping_matches_its_consumer_spec(
    synthesized: Synthesized, consumer: Any
) -> None:
    function_id = _function_id(synthesized, consumer.handler)
    stream = {"Fn::GetAtt": [_table_id(synthesized, consumer.table), "StreamArn"]}
    [mapping] = [
        r["Properties"]
        for r in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if r["Properties"]["FunctionName"] == {"Ref": function_id}
        and r["Properties"]["EventSourceArn"] == stream
    ]
    assert mapping["StartingPosition"] == consumer.starting_position
    assert mapping["BatchSize"] == consumer.batch_size
    assert mapping["MaximumBatchingWindowInSeconds"] == consumer.max_batching_window_seconds
    assert mapping["MaximumRetryAttempts"] == consumer.max_retry_attempts
    assert mapping["MaximumRecordAgeInSeconds"] == consumer.max_record_age_seconds
    assert mapping["BisectBatchOnFunctionError"] is consumer.bisect_batch_on_error
    # The app's default: ten concurrent batches per shard (issue 19).
    assert mapping["ParallelizationFactor"] == DEFAULT_PARALLELIZATION_FACTOR == 10
    response_types = mapping.get("FunctionResponseTypes", [])
    assert ("ReportBatchItemFailures" in response_types) is consumer.report_batch_item_failures
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert patterns == [dict(p) for p in consumer.filter_patterns]
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": [_queue_id(synthesized), "Arn"]
    }


def test_one_mapping_per_stream_consumer(synthesized: Synthesized) -> None:
    assert len(synthesized.of_type("AWS::Lambda::EventSourceMapping")) == len(STREAM_CONSUMERS)


def test_dead_letter_queue_is_encrypted_and_tls_only(synthesized: Synthesized) -> None:
    queue_id = _queue_id(synthesized)
    props = synthesized.resources[queue_id]["Properties"]
    assert props.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in props
    [policy] = synthesized.of_type("AWS::SQS::QueuePolicy").values()
    assert policy["Properties"]["Queues"] == [{"Ref": queue_id}]
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_heartbeat_runs_on_its_schedule(synthesized: Synthesized) -> None:
    [rule] = synthesized.of_type("AWS::Events::Rule").values()
    minutes = HEARTBEAT_RATE_SECONDS_AWS // 60
    unit = "minute" if minutes == 1 else "minutes"
    assert rule["Properties"]["ScheduleExpression"] == f"rate({minutes} {unit})"
    assert rule["Properties"]["State"] == "ENABLED"
    [target] = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [_function_id(synthesized, HEARTBEAT_HANDLER), "Arn"]}


# --- IAM ----------------------------------------------------------------------------


def test_no_wildcard_actions_in_identity_policies(synthesized: Synthesized) -> None:
    statements = _identity_statements(synthesized)
    assert statements
    for logical_id, statement in statements:
        for action in _listify(statement["Action"]):
            assert "*" not in action, f"{logical_id} allows {action}"


def test_data_table_permissions_name_their_tables(synthesized: Synthesized) -> None:
    table_ids = set(synthesized.of_type("AWS::DynamoDB::Table"))
    for logical_id, statement in _identity_statements(synthesized):
        actions = _listify(statement["Action"])
        if not any(a.startswith("dynamodb:") for a in actions):
            continue
        if actions == ["dynamodb:ListStreams"]:
            # Has no resource-level permissions; CDK's stream mapping grants it on "*".
            assert statement["Resource"] == "*"
            continue
        for resource in _listify(statement["Resource"]):
            assert resource != "*", f"{logical_id}: {actions} on *"
            assert _references(resource) <= table_ids, f"{logical_id}: {resource}"


def test_engine_functions_touch_request_and_event_items_never(
    synthesized: Synthesized,
) -> None:
    # They read those two tables' streams (through their mappings), not their items.
    inputs = {_table_id(synthesized, WORKFLOW_REQUEST), _table_id(synthesized, ACTIVITY_EVENT)}
    function_roles = {
        r["Properties"]["Role"]["Fn::GetAtt"][0]
        for r in synthesized.of_type("AWS::Lambda::Function").values()
    }
    for policy in synthesized.of_type("AWS::IAM::Policy").values():
        if not {ref["Ref"] for ref in policy["Properties"]["Roles"]} & function_roles:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert not _table_arn_references(statement["Resource"]) & inputs, statement


def test_every_engine_function_can_start_child_runs(synthesized: Synthesized) -> None:
    """A child workflow is started by the engine in whichever function runs the parent's
    hand-off (a stream record, a sweep): it reads the definition and creates the child's
    workflow item, activity rows and edges — never a request row (issue 14)."""
    # (spec, actions) pairs: a TableSpec holds its attributes as a dict, so it is no key.
    needed = [(ACTIVITY_EXEC, {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query",
                              "dynamodb:GetItem"}),
              (WORKFLOW_EXEC, {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem"}),
              (ACTIVITY_EXEC_DEPENDENCY, {"dynamodb:BatchWriteItem", "dynamodb:DeleteItem",
                                         "dynamodb:Query"}),
              (WORKFLOW_DEFINITION, {"dynamodb:Query", "dynamodb:GetItem"})]
    # The engine's functions: all but notify (it only reads the streams and publishes)
    # and payload expiry (it only reads a stream and deletes objects).
    roles = {r["Properties"]["Role"]["Fn::GetAtt"][0]
             for r in synthesized.of_type("AWS::Lambda::Function").values()
             if r["Properties"]["Handler"] not in (NOTIFY_HANDLER,
                                                   PAYLOAD_EXPIRY_CONSUMER.handler)}
    assert len(roles) == 3
    for role in roles:
        allowed: dict[str, set[str]] = {}
        for policy in synthesized.of_type("AWS::IAM::Policy").values():
            if role not in {ref["Ref"] for ref in policy["Properties"]["Roles"]}:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                for table_id in _table_arn_references(statement["Resource"]):
                    allowed.setdefault(table_id, set()).update(_listify(statement["Action"]))
        for spec, actions in needed:
            assert actions <= allowed.get(_table_id(synthesized, spec), set()), (role, spec)


def test_nothing_may_delete_or_alter_tables(synthesized: Synthesized) -> None:
    for logical_id, statement in _identity_statements(synthesized):
        actions = set(_listify(statement["Action"]))
        assert not actions & {"dynamodb:DeleteTable", "dynamodb:UpdateTable"}, logical_id


def test_activity_worker_policy_is_narrow(synthesized: Synthesized) -> None:
    [policy] = [
        r["Properties"]
        for r in synthesized.of_type("AWS::IAM::ManagedPolicy").values()
        if r["Properties"]["ManagedPolicyName"] == f"{PREFIX}activity_worker"
    ]
    allowed: dict[str, set[str]] = {}
    for statement in policy["PolicyDocument"]["Statement"]:
        for table_id in _references(statement["Resource"]):
            allowed.setdefault(table_id, set()).update(_listify(statement["Action"]))
    assert allowed[_table_id(synthesized, ACTIVITY_EVENT)] == {"dynamodb:PutItem"}
    assert "dynamodb:UpdateItem" in allowed[_table_id(synthesized, ACTIVITY_EXEC)]
    assert "dynamodb:UpdateItem" in allowed[_table_id(synthesized, MAP_ITEM)]  # map items
    every_action = set().union(*allowed.values())
    assert not every_action & {"dynamodb:DeleteItem", "dynamodb:Scan", "dynamodb:BatchWriteItem"}


def test_full_logic_client_policy_covers_every_table(synthesized: Synthesized) -> None:
    [policy] = [
        r["Properties"]
        for r in synthesized.of_type("AWS::IAM::ManagedPolicy").values()
        if r["Properties"]["ManagedPolicyName"] == f"{PREFIX}full_logic_client"
    ]
    referenced = _references(policy["PolicyDocument"])
    assert {_table_id(synthesized, spec) for spec in TABLES} <= referenced


# --- alarms and outputs ---------------------------------------------------------------


def test_alarms_watch_dlq_errors_and_iterator_age(synthesized: Synthesized) -> None:
    alarms = [r["Properties"] for r in synthesized.of_type("AWS::CloudWatch::Alarm").values()]
    metrics = [a.get("MetricName") for a in alarms]
    assert metrics.count("ApproximateNumberOfMessagesVisible") == 1
    assert metrics.count("Errors") == len(FUNCTIONS)
    # One per function fed by streams (the notify function reads two).
    assert metrics.count("IteratorAge") == len(FUNCTIONS) - 1
    for alarm in alarms:
        assert alarm["AlarmName"].startswith(PREFIX)  # operators find them by prefix
        if alarm.get("MetricName") == "IteratorAge":
            # Fires before records age out into the dead-letter queue.
            ages = {c.function_name: c.max_record_age_seconds * 1000
                    for c in STREAM_CONSUMERS}  # the same for consumers of one function
            name = alarm["AlarmName"].removeprefix(PREFIX).removesuffix("_iterator_age")
            assert alarm["Threshold"] < ages[name]


def test_failed_workflows_alarm_reads_the_engines_emf_metric(synthesized: Synthesized) -> None:
    [alarm] = [
        r["Properties"]
        for r in synthesized.of_type("AWS::CloudWatch::Alarm").values()
        if r["Properties"]["AlarmName"] == f"{PREFIX}workflows_failed"
    ]
    stats = {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert set(stats) == {"failed", "timed_out"}
    # What EmfMetrics writes for a run that ended FAILED, as CloudWatch would index it.
    written = _emf_line("FAILED")
    [cloudwatch] = written["_aws"]["CloudWatchMetrics"]
    for key, state in (("failed", "FAILED"), ("timed_out", "TIMED_OUT")):
        metric = stats[key]["Metric"]
        assert metric["Namespace"] == cloudwatch["Namespace"]
        assert metric["MetricName"] in {m["Name"] for m in cloudwatch["Metrics"]}
        dimensions = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
        assert dimensions == {"TablePrefix": PREFIX, "State": state}
        # An alarm matches a series only on its exact dimension set: EmfMetrics emits it.
        assert sorted(dimensions) in [sorted(s) for s in cloudwatch["Dimensions"]]
        assert stats[key]["Stat"] == "Sum"
    assert written["State"] == "FAILED" and written["TablePrefix"] == PREFIX
    [expression] = [m for m in alarm["Metrics"] if "Expression" in m]
    assert expression["Expression"] == "FILL(failed, 0) + FILL(timed_out, 0)"
    assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"


def test_sweep_errors_alarm_reads_the_engines_emf_metric(synthesized: Synthesized) -> None:
    """Issue 20: one bad item no longer stops a sweep pass; it is counted, and alarmed."""
    [alarm] = [
        r["Properties"]
        for r in synthesized.of_type("AWS::CloudWatch::Alarm").values()
        if r["Properties"]["AlarmName"] == f"{PREFIX}sweep_errors"
    ]
    out = io.StringIO()
    EmfMetrics(PREFIX, stream=out).sweep_failed("reconcile", "wx-1", "KeyError")
    written: dict[str, Any] = json.loads(out.getvalue())
    [cloudwatch] = written["_aws"]["CloudWatchMetrics"]
    assert alarm["MetricName"] in {m["Name"] for m in cloudwatch["Metrics"]}
    assert alarm["Namespace"] == cloudwatch["Namespace"]
    dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
    assert dimensions == {"TablePrefix": PREFIX}
    assert sorted(dimensions) in [sorted(s) for s in cloudwatch["Dimensions"]]
    assert written["SweepErrors"] == 1.0 and written["Part"] == "reconcile"
    assert alarm["Threshold"] == 0 and alarm["Statistic"] == "Sum"


def _emf_line(state: str) -> dict[str, Any]:
    out = io.StringIO()
    EmfMetrics(PREFIX, stream=out).workflow_ended(WorkflowRecord(
        "wx", "etl", 1, WorkflowState(state), created_epoch=1.0, ended_epoch=3.0))
    line: dict[str, Any] = json.loads(out.getvalue())
    return line


def test_outputs_name_tables_queue_and_policies(synthesized: Synthesized) -> None:
    outputs = synthesized.template.to_json()["Outputs"]
    table_ids = {_table_id(synthesized, spec) for spec in TABLES}
    output_refs = set().union(*(_references(o["Value"]) for o in outputs.values()))
    assert table_ids <= output_refs
    assert {"DeadLetterQueueUrl", "ActivityWorkerPolicyArn", "FullLogicClientPolicyArn",
            "EventBusArn"} <= set(outputs)
    assert json.dumps(outputs["EventBusArn"]["Value"]).endswith(':event-bus/default"]]}')


# --- events: the notify function -------------------------------------------------------


def _role_statements(syn: Synthesized, function_id: str) -> list[dict[str, Any]]:
    role_id = syn.resources[function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in syn.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_notify_reads_three_streams_and_puts_events_on_the_default_bus(
    synthesized: Synthesized,
) -> None:
    notify = _function_id(synthesized, NOTIFY_HANDLER)
    streams = {
        json.dumps(r["Properties"]["EventSourceArn"])
        for r in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if r["Properties"]["FunctionName"] == {"Ref": notify}
    }
    assert streams == {
        json.dumps({"Fn::GetAtt": [_table_id(synthesized, spec), "StreamArn"]})
        for spec in (WORKFLOW_EXEC, ACTIVITY_EXEC, MAP_ITEM)
    }
    statements = _role_statements(synthesized, notify)
    [put] = [s for s in statements if "events:PutEvents" in _listify(s["Action"])]
    assert _listify(put["Action"]) == ["events:PutEvents"]
    assert json.dumps(put["Resource"]).endswith(':event-bus/default"]]}')
    # Only notify may put events.
    for function_id in synthesized.of_type("AWS::Lambda::Function"):
        if function_id != notify:
            assert not [
                s for s in _role_statements(synthesized, function_id)
                if any(a.startswith("events:") for a in _listify(s["Action"]))
            ]


def test_notify_changes_no_execution_and_owns_the_markers(synthesized: Synthesized) -> None:
    notify = _function_id(synthesized, NOTIFY_HANDLER)
    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
              "dynamodb:BatchWriteItem"}
    written: set[str] = set()
    for statement in _role_statements(synthesized, notify):
        if writes & set(_listify(statement["Action"])):
            written |= _table_arn_references(statement["Resource"])
    markers = _table_id(synthesized, NOTIFICATION)
    assert markers in written
    assert not {_table_id(synthesized, spec)
                for spec in (WORKFLOW_EXEC, ACTIVITY_EXEC, MAP_ITEM)} & written
    # And no engine function touches the markers.
    for function_id in synthesized.of_type("AWS::Lambda::Function"):
        if function_id != notify:
            for statement in _role_statements(synthesized, function_id):
                assert markers not in _table_arn_references(statement["Resource"])


# --- cdk-nag and cfn-lint ---------------------------------------------------------------


def test_cdk_nag_report_has_no_findings(synthesized: Synthesized) -> None:
    # app.synth() already raised on any unacknowledged finding; the report written to
    # the cloud assembly must agree.
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    violations = [v for plugin in report["pluginReports"] for v in plugin["violations"]]
    assert violations == []
    # And the rule pack run directly over the tree (not only as a synth plugin).
    result = AwsSolutionsChecks().validate_scope(synthesized.app)
    assert [v.rule_name for v in result.violations] == []


def test_every_acknowledgement_has_a_written_reason(synthesized: Synthesized) -> None:
    acknowledged: dict[str, str] = {}
    pending = [synthesized.app.node]
    while pending:
        node = pending.pop()
        for entry in node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule_id, reason in entry.data.items():
                    acknowledged[f"{node.path}: {rule_id}"] = reason
        pending += [child.node for child in node.children]
    assert acknowledged, "expected the construct's acknowledgements"
    for where, reason in acknowledged.items():
        assert isinstance(reason, str) and len(reason.split()) >= 8, f"{where}: {reason!r}"


def test_cfn_lint_passes(synthesized: Synthesized) -> None:
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run(
        [
            str(cfn_lint),
            "--config-file",
            str(INFRA / ".cfnlintrc"),
            "-t",
            str(synthesized.template_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- the synthesized (Lambda-platform) asset --------------------------------------------


def test_asset_holds_handlers_sources_and_lambda_platform_wheels(
    synthesized: Synthesized,
) -> None:
    [code] = {
        json.dumps(r["Properties"]["Code"])
        for r in synthesized.of_type("AWS::Lambda::Function").values()
    }
    asset = synthesized.outdir / f"asset.{json.loads(code)['S3Key'].removesuffix('.zip')}"
    assert asset.is_dir()
    for handler in [c.handler for c in STREAM_CONSUMERS] + [HEARTBEAT_HANDLER]:
        module = handler.rsplit(".", 1)[0]
        assert (asset / (module.replace(".", "/") + ".py")).is_file(), handler
    assert (asset / "whimbrel" / "store" / "specs.py").is_file()
    for top_level in ("aws_lambda_powertools", "pydantic", "pydantic_core", "yaml"):
        assert (asset / top_level).is_dir(), top_level
    # Native extensions are built for Lambda's arm64, never for this host.
    native = [p.name for p in asset.rglob("*.so")]
    assert any("aarch64" in name for name in native), native
    assert not [name for name in native if "x86_64" in name]
    # The runtime provides the AWS SDK; shipping botocore would add ~90 MB.
    for name in RUNTIME_PROVIDED:
        assert not (asset / name).exists(), name
    assert not list(asset.rglob("__pycache__"))


def test_payload_bucket_is_private_encrypted_tls_only_and_expires(
        synthesized: Synthesized) -> None:
    """Issue 27: the bucket of large payloads."""
    bucket = synthesized.resources[payload_bucket_id(synthesized)]
    props = bucket["Properties"]
    assert bucket["DeletionPolicy"] == "Retain"
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True}
    [rule] = props["LifecycleConfiguration"]["Rules"]
    assert (rule["Prefix"], rule["ExpirationInDays"], rule["Status"]) == (
        "whimbrel/runs/", 120, "Enabled")
    [policy] = [r for r in synthesized.resources.values()
                if r["Type"] == "AWS::S3::BucketPolicy"]
    [deny] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {
        "Bool": {"aws:SecureTransport": "false"}}


def test_payload_grants_are_object_actions_on_the_prefix_only(
        synthesized: Synthesized) -> None:
    bucket_id = payload_bucket_id(synthesized)
    seen: dict[str, list[str]] = {}
    expiry: list[tuple[list[str], str, Any]] = []
    for key, resource in synthesized.resources.items():
        if resource["Type"] not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            continue
        for st in resource["Properties"]["PolicyDocument"]["Statement"]:
            text = json.dumps(st["Resource"])
            if bucket_id not in text:
                continue
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            if key.startswith("WhimbrelPayloadExpiry"):
                expiry.append((sorted(actions), text, st.get("Condition")))
                continue
            assert text.endswith('"/whimbrel/*"]]}'), st  # the prefix, never the bucket
            seen[key] = sorted(actions)
    notify = [v for k, v in seen.items() if k.startswith("WhimbrelNotify")]
    others = [v for k, v in seen.items() if not k.startswith("WhimbrelNotify")]
    assert notify == [["s3:GetObject"]]
    # The three engine functions and the two managed policies.
    assert others == [["s3:GetObject", "s3:PutObject"]] * 5, seen
    # Payload expiry lists the run objects and deletes them: no read, no write.
    assert sorted(expiry) == [
        (["s3:DeleteObject"], f'{{"Fn::Join": ["", [{{"Fn::GetAtt": ["{bucket_id}", "Arn"]}}, '
                              '"/whimbrel/runs/*"]]}', None),
        (["s3:ListBucket"], f'{{"Fn::GetAtt": ["{bucket_id}", "Arn"]}}',
         {"StringLike": {"s3:prefix": ["whimbrel/runs/*"]}})], expiry
