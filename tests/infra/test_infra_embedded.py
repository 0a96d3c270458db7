"""The construct embedded in someone else's stack, with every optional prop changed.

One more synthesis (a few seconds): a user's app with its own customer-managed key,
a custom prefix, data that is destroyed with the stack, no optional parts, and its own
workflow code bundled with the functions (issue 26, "Deployed").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Acknowledgment, App, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks
from whimbrel_infra import Whimbrel, WhimbrelProps
from whimbrel_infra.functions import TABLE_PREFIX_ENV

from whimbrel.settings import ENV_EVENT_BUS, ENV_MODULES
from whimbrel.store.consumers import NOTIFY_HANDLER, PAYLOAD_EXPIRY_CONSUMER
from whimbrel.store.specs import TABLES

pytestmark = pytest.mark.infra

PREFIX = "acme_orders_"
ACTIVITY_FUNCTION = "arn:aws:lambda:eu-west-1:111122223333:function:resize-images"
ACTIVITY_QUEUE = "arn:aws:sqs:eu-west-1:111122223333:render-jobs"


WORKFLOW_MODULES = ("shop.workflows", "shop_steps")

#: The user's code directory: two modules, and what must not be bundled with them.
USER_CODE = {
    "shop/__init__.py": "",
    "shop/workflows.py": (
        "from whimbrel import WorkflowContext, workflow\n\n\n"
        "@workflow('order')\n"
        "def order(ctx: WorkflowContext, input: dict) -> dict:\n"
        "    return ctx.step('charge', input)\n"),
    "shop_steps.py": "def charge(run):\n    return run.input\n",
    "shop/__pycache__/workflows.cpython-314.pyc": "",
    ".git/HEAD": "ref: refs/heads/main\n",
    "cdk.out/manifest.json": "{}",
}


def write_user_code(root: Path) -> Path:
    for name, text in USER_CODE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    outdir = tmp_path_factory.mktemp("embedded.out")
    code = write_user_code(tmp_path_factory.mktemp("user_code"))
    app = App(outdir=str(outdir), builtin_cloud_formation_validation=False)
    stack = Stack(app, "UserStack")
    key = kms.Key(stack, "UserKey", enable_key_rotation=True)
    bus = events.EventBus(stack, "UserBus", event_bus_name="orders-events")
    engine = Whimbrel(
        stack,
        "Engine",
        props=WhimbrelProps(
            table_prefix=PREFIX,
            removal_policy=RemovalPolicy.DESTROY,
            heartbeat_rate=Duration.minutes(5),
            heartbeat_enabled=False,
            encryption_key=key,
            lambda_memory_mb=1024,
            parallelization_factor=4,
            alarms=False,
            managed_policies=False,
            event_bus=bus,
            workflow_code=code,
            workflow_modules=WORKFLOW_MODULES,
        ),
    )
    # Activities the engine launches: the user's function and queue.
    engine.allow_launching(
        lambda_.Function.from_function_arn(stack, "ActivityFunction", ACTIVITY_FUNCTION),
        sqs.Queue.from_queue_arn(stack, "ActivityQueue", ACTIVITY_QUEUE),
    )
    # The user's own worker role, granted through the construct's helper.
    worker = iam.Role(stack, "Worker", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    engine.grant_activity_worker(worker)
    # The user's stack acknowledges what its own grant implies, as the construct does.
    assert engine.payload_bucket is not None
    bucket_id = stack.get_logical_id(engine.payload_bucket.node.default_child)  # type: ignore[arg-type]
    Validations.of(worker).acknowledge(
        *[_index_ack(stack, engine, name)
          for name in ("activity_exec", "map_item", "workflow_exec")],
        *[
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Action::{action}]",
                reason="Writing a table encrypted with our key; wildcard is on that key only.",
            )
            for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*")
        ],
        Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/whimbrel/*]",
            reason="Payload objects of this deployment: object actions on its prefix only.",
        ),
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # raises on any unacknowledged cdk-nag finding
    loaded: dict[str, Any] = json.loads((Path(outdir) / "UserStack.template.json").read_text())
    return Path(outdir), loaded


@pytest.fixture(scope="module")
def template(synthesized: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    return synthesized[1]


def _index_ack(stack: Stack, engine: Whimbrel, name: str) -> Acknowledgment:
    logical_id = stack.get_logical_id(engine.table(name).node.default_child)  # type: ignore[arg-type]
    return Acknowledgment(
        id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/index/*]",
        reason="Workers query this table's sparse indexes; the wildcard is its indexes only.",
    )


def _logical_id(template: dict[str, Any], prefix: str, cfn_type: str) -> str:
    resources = template["Resources"].items()
    [found] = [k for k, r in resources if k.startswith(prefix) and r["Type"] == cfn_type]
    return found


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return actions if isinstance(actions, list) else [actions]


def _of_type(template: dict[str, Any], cfn_type: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == cfn_type]


def test_prefix_reaches_table_names_and_functions(template: dict[str, Any]) -> None:
    names = {r["Properties"]["TableName"] for r in _of_type(template, "AWS::DynamoDB::Table")}
    assert names == {spec.table_name(PREFIX) for spec in TABLES}
    for fn in _of_type(template, "AWS::Lambda::Function"):
        assert fn["Properties"]["Environment"]["Variables"][TABLE_PREFIX_ENV] == PREFIX
        assert fn["Properties"]["MemorySize"] == 1024


def test_the_parallelization_factor_reaches_every_stream_mapping(
        template: dict[str, Any]) -> None:
    mappings = _of_type(template, "AWS::Lambda::EventSourceMapping")
    assert mappings and {m["Properties"]["ParallelizationFactor"] for m in mappings} == {4}


def test_customer_managed_key_encrypts_tables_and_queue(template: dict[str, Any]) -> None:
    [key_id] = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::KMS::Key"]
    for table in _of_type(template, "AWS::DynamoDB::Table"):
        sse = table["Properties"]["SSESpecification"]
        assert sse["SSEType"] == "KMS"
        assert sse["KMSMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    [queue] = _of_type(template, "AWS::SQS::Queue")
    assert queue["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}


def test_wildcard_actions_are_kms_variants_on_the_key_only(template: dict[str, Any]) -> None:
    [key_id] = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::KMS::Key"]
    policies = _of_type(template, "AWS::IAM::Policy")
    assert policies
    for policy in policies:
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            wildcards = [a for a in _actions(statement) if "*" in a]
            assert all(a.startswith("kms:") for a in wildcards), wildcards
            if wildcards:
                assert statement["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}


def test_user_worker_role_can_use_the_key(template: dict[str, Any]) -> None:
    worker_role = {"Ref": _logical_id(template, "Worker", "AWS::IAM::Role")}
    policies = _of_type(template, "AWS::IAM::Policy")
    [worker_policy] = [r for r in policies if r["Properties"]["Roles"] == [worker_role]]
    statements = worker_policy["Properties"]["PolicyDocument"]["Statement"]
    actions = {action for statement in statements for action in _actions(statement)}
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem", "kms:Decrypt", "kms:Encrypt"} <= actions


def test_engine_functions_may_launch_the_users_activities(template: dict[str, Any]) -> None:
    function_roles = {
        r["Properties"]["Role"]["Fn::GetAtt"][0]
        for r in _of_type(template, "AWS::Lambda::Function")
        if r["Properties"]["Handler"] not in (NOTIFY_HANDLER, PAYLOAD_EXPIRY_CONSUMER.handler)
    }
    assert len(function_roles) == 3
    for role_id in function_roles:
        policies = _of_type(template, "AWS::IAM::Policy")
        [policy] = [p for p in policies if p["Properties"]["Roles"] == [{"Ref": role_id}]]
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        granted = {
            (action, json.dumps(s["Resource"])) for s in statements for action in _actions(s)
        }
        assert ("lambda:InvokeFunction", json.dumps(ACTIVITY_FUNCTION)) in granted
        assert ("sqs:SendMessage", json.dumps(ACTIVITY_QUEUE)) in granted


def test_destroy_policy_removes_data_and_protection(template: dict[str, Any]) -> None:
    for table in _of_type(template, "AWS::DynamoDB::Table"):
        assert table["DeletionPolicy"] == "Delete"
        assert table["Properties"].get("DeletionProtectionEnabled", False) is False


def test_optional_parts_are_left_out(template: dict[str, Any]) -> None:
    assert _of_type(template, "AWS::CloudWatch::Alarm") == []
    assert _of_type(template, "AWS::IAM::ManagedPolicy") == []
    [rule] = _of_type(template, "AWS::Events::Rule")
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"
    assert rule["Properties"]["State"] == "DISABLED"


def test_events_go_to_the_users_bus(template: dict[str, Any]) -> None:
    bus_id = _logical_id(template, "UserBus", "AWS::Events::EventBus")
    [notify] = [r for r in _of_type(template, "AWS::Lambda::Function")
                if r["Properties"]["Handler"] == NOTIFY_HANDLER]
    bus_arn = {"Fn::GetAtt": [bus_id, "Arn"]}
    assert notify["Properties"]["Environment"]["Variables"][ENV_EVENT_BUS] == bus_arn
    role_id = notify["Properties"]["Role"]["Fn::GetAtt"][0]
    [policy] = [p for p in _of_type(template, "AWS::IAM::Policy")
                if p["Properties"]["Roles"] == [{"Ref": role_id}]]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    puts = [s for s in statements if "events:PutEvents" in _actions(s)]
    assert [s["Resource"] for s in puts] == [bus_arn]
    # notify launches nothing: the user's activities are the engine functions' business.
    resources = json.dumps([s["Resource"] for s in statements])
    assert ACTIVITY_FUNCTION not in resources and ACTIVITY_QUEUE not in resources
    assert "lambda:InvokeFunction" not in {a for s in statements for a in _actions(s)}


# --- the user's workflow code (issue 26, "Deployed") -------------------------------------


def _engine_functions(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in _of_type(template, "AWS::Lambda::Function")
            if r["Properties"]["Handler"] not in (NOTIFY_HANDLER, PAYLOAD_EXPIRY_CONSUMER.handler)]


def test_the_users_code_is_bundled_with_the_functions(
        synthesized: tuple[Path, dict[str, Any]]) -> None:
    outdir, template = synthesized
    [code] = {json.dumps(r["Properties"]["Code"])
              for r in _of_type(template, "AWS::Lambda::Function")}
    asset = outdir / f"asset.{json.loads(code)['S3Key'].removesuffix('.zip')}"
    # At the asset's root, beside Whimbrel's own code: importable as named.
    assert (asset / "shop" / "workflows.py").read_text() == USER_CODE["shop/workflows.py"]
    assert (asset / "shop_steps.py").is_file() and (asset / "shop" / "__init__.py").is_file()
    assert (asset / "lambdas" / "workflow_request.py").is_file()
    assert (asset / "whimbrel" / "__init__.py").is_file()
    # Caches, hidden folders and a cloud assembly stay behind.
    for left_out in ("shop/__pycache__", ".git", "cdk.out"):
        assert not (asset / left_out).exists(), left_out


def test_the_engine_functions_import_the_modules_and_may_register_them(
        template: dict[str, Any]) -> None:
    engine = _engine_functions(template)
    assert len(engine) == 3  # workflow_request, activity_event, heartbeat
    definitions = _logical_id(template, "EngineWorkflowDefinition", "AWS::DynamoDB::Table")
    for fn in engine:
        variables = fn["Properties"]["Environment"]["Variables"]
        assert variables[ENV_MODULES] == "shop.workflows,shop_steps"
        # They register the code workflows found there at cold start.
        role_id = fn["Properties"]["Role"]["Fn::GetAtt"][0]
        [policy] = [p for p in _of_type(template, "AWS::IAM::Policy")
                    if p["Properties"]["Roles"] == [{"Ref": role_id}]]
        writes = {a for s in policy["Properties"]["PolicyDocument"]["Statement"]
                  if definitions in json.dumps(s["Resource"])
                  for a in _actions(s)}
        assert {"dynamodb:PutItem", "dynamodb:UpdateItem"} <= writes
        assert "dynamodb:DeleteItem" not in writes
    # notify decides nothing: no modules for it.
    [notify] = [r for r in _of_type(template, "AWS::Lambda::Function")
                if r["Properties"]["Handler"] == NOTIFY_HANDLER]
    assert ENV_MODULES not in notify["Properties"]["Environment"]["Variables"]
