"""The lambda / sqs / ecs push launchers against moto."""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from whimbrel.contract.errors import LaunchError
from whimbrel.engine.ports import LaunchRequest
from whimbrel.launch.aws import EcsLauncher, LambdaLauncher, SqsLauncher, aws_launchers

os.environ["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"


def request(**config: object) -> LaunchRequest:
    return LaunchRequest(activity_exec_id="wx-1:load:2", activity_name="load",
                         workflow_exec_id="wx-1", workflow_name="etl", attempt=2,
                         config=config, endpoint_url="http://localhost:8000",
                         table_prefix="p_")


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def test_aws_launchers_has_the_three_kinds(aws: None) -> None:
    assert set(aws_launchers(boto3.session.Session(region_name="us-east-1"))) == {
        "lambda", "sqs", "ecs"}


def test_sqs_message_carries_the_ids(aws: None) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="work")["QueueUrl"]
    SqsLauncher(sqs).launch(request(queue_url=url, input={"day": "mon"}))
    msgs = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    body = json.loads(msgs[0]["Body"])
    assert body["whimbrel"]["activity_exec_id"] == "wx-1:load:2"
    assert body["whimbrel"]["endpoint_url"] == "http://localhost:8000"
    assert body["input"] == {"day": "mon"}
    attrs = msgs[0]["MessageAttributes"]
    assert attrs["WHIMBREL_ACTIVITY_EXEC_ID"]["StringValue"] == "wx-1:load:2"
    assert attrs["WHIMBREL_TABLE_PREFIX"]["StringValue"] == "p_"


def test_sqs_fifo_queue_deduplicates_by_activity(aws: None) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="work.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    launcher = SqsLauncher(sqs)
    launcher.launch(request(queue_url=url))
    launcher.launch(request(queue_url=url))
    msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(msgs) == 1


def test_sqs_missing_queue_is_a_launch_error(aws: None) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    with pytest.raises(LaunchError, match="SQS SendMessage"):
        SqsLauncher(sqs).launch(request(
            queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/nope"))
    with pytest.raises(LaunchError, match="queue_url"):
        SqsLauncher(sqs).launch(request())


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("index.py", "def handler(event, context):\n    return event\n")
    return buf.getvalue()


def test_lambda_invoke_is_asynchronous_with_the_ids(aws: None) -> None:
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lam = boto3.client("lambda", region_name="us-east-1")
    lam.create_function(FunctionName="act", Runtime="python3.12", Role=role,
                        Handler="index.handler", Code={"ZipFile": _zip()})
    calls: list[dict[str, object]] = []

    def spy(**kwargs: object) -> dict[str, object]:
        calls.append(kwargs)
        return {"StatusCode": 202}

    launcher = LambdaLauncher(lam)
    launcher.client.invoke = spy  # type: ignore[method-assign,assignment]
    launcher.launch(request(function="act"))
    assert calls[0]["InvocationType"] == "Event" and calls[0]["FunctionName"] == "act"
    payload = json.loads(calls[0]["Payload"])  # type: ignore[arg-type]
    assert payload["whimbrel"]["workflow_exec_id"] == "wx-1"
    assert payload["whimbrel"]["attempt"] == 2


def test_lambda_unknown_function_is_a_launch_error(aws: None) -> None:
    with pytest.raises(LaunchError, match="Lambda Invoke"):
        LambdaLauncher(boto3.client("lambda", region_name="us-east-1")).launch(
            request(function="missing"))


def test_ecs_run_task_overrides_the_environment(aws: None) -> None:
    ecs = boto3.client("ecs", region_name="us-east-1")
    ec2 = boto3.client("ec2", region_name="us-east-1")
    ecs.create_cluster(clusterName="jobs")
    ecs.register_task_definition(
        family="loader", requiresCompatibilities=["FARGATE"], networkMode="awsvpc",
        cpu="256", memory="512",
        containerDefinitions=[{"name": "main", "image": "busybox", "memory": 128}])
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
    calls: list[dict[str, object]] = []

    def spy(**kwargs: object) -> object:
        # moto's RunTask breaks on awsvpc networking; the container name lookup above
        # (DescribeTaskDefinition) is real moto, the RunTask call is recorded.
        calls.append(kwargs)
        return {"tasks": [{"taskArn": "arn:aws:ecs:us-east-1:123456789012:task/jobs/1"}],
                "failures": []}

    launcher = EcsLauncher(ecs)
    launcher.client.run_task = spy  # type: ignore[method-assign,assignment]
    launcher.launch(request(cluster="jobs", task_definition="loader", subnets=[subnet]))
    overrides = calls[0]["overrides"]["containerOverrides"][0]  # type: ignore[index]
    assert overrides["name"] == "main"
    env = {e["name"]: e["value"] for e in overrides["environment"]}
    assert env["WHIMBREL_ACTIVITY_EXEC_ID"] == "wx-1:load:2"
    assert env["WHIMBREL_WORKFLOW_NAME"] == "etl"
    assert calls[0]["launchType"] == "FARGATE"
    net = calls[0]["networkConfiguration"]["awsvpcConfiguration"]  # type: ignore[index]
    assert net["subnets"] == [subnet] and net["assignPublicIp"] == "DISABLED"


def test_ecs_unknown_cluster_is_a_launch_error(aws: None) -> None:
    ecs = boto3.client("ecs", region_name="us-east-1")
    with pytest.raises(LaunchError):
        EcsLauncher(ecs).launch(request(cluster="nope", task_definition="nope",
                                        container="main"))
