"""Push launchers for AWS: ``lambda`` (async invoke), ``sqs`` (a message), ``ecs`` (RunTask).

Each hands the activity off and returns at once; the activity then reports RUNNING,
heartbeats and its end itself (Full Logic API, or events through the Simple Lambda
API), using the ids it receives:

* ``lambda``: the payload is ``{"whimbrel": {...ids...}, "input": <config input>}``;
* ``sqs``: the message body is the same JSON, with the ids also as message attributes;
* ``ecs``: the ids are environment overrides of the task's container.

Any AWS error becomes :class:`~whimbrel.contract.errors.LaunchError` (the engine then
fails the attempt, and its retry policy decides what happens next).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from whimbrel.contract.errors import LaunchError
from whimbrel.engine import Launcher, LaunchRequest

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_ecs.client import ECSClient
    from mypy_boto3_lambda.client import LambdaClient
    from mypy_boto3_sqs.client import SQSClient

__all__ = ["EcsLauncher", "LambdaLauncher", "SqsLauncher", "aws_launchers", "launch_payload"]


def launch_payload(request: LaunchRequest) -> dict[str, Any]:
    """The JSON document a pushed activity receives."""
    payload: dict[str, Any] = {
        "whimbrel": {
            "activity_exec_id": request.activity_exec_id,
            "activity_name": request.activity_name,
            "workflow_exec_id": request.workflow_exec_id,
            "workflow_name": request.workflow_name,
            "attempt": request.attempt,
            "table_prefix": request.table_prefix,
        }
    }
    if request.endpoint_url:
        payload["whimbrel"]["endpoint_url"] = request.endpoint_url
    if "input" in request.config:
        payload["input"] = request.config["input"]
    return payload


@contextmanager
def _aws(what: str, request: LaunchRequest) -> Iterator[None]:
    try:
        yield
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        raise LaunchError(f"{what} for {request.activity_exec_id} failed: {code}: {exc}",
                          activity_exec_id=request.activity_exec_id, aws_code=code) from exc
    except BotoCoreError as exc:
        raise LaunchError(f"{what} for {request.activity_exec_id} failed: {exc}",
                          activity_exec_id=request.activity_exec_id) from exc


def _required(request: LaunchRequest, key: str) -> str:
    value = request.config.get(key)
    if not value or not isinstance(value, str):
        raise LaunchError(f"launcher config of {request.activity_name} needs {key!r}",
                          activity_exec_id=request.activity_exec_id)
    return value


class LambdaLauncher:
    """Invokes ``config["function"]`` (name or ARN) asynchronously (``Event``)."""

    def __init__(self, client: LambdaClient) -> None:
        self.client = client

    def launch(self, request: LaunchRequest) -> None:
        function = _required(request, "function")
        with _aws("Lambda Invoke", request):
            response = self.client.invoke(
                FunctionName=function, InvocationType="Event",
                Payload=json.dumps(launch_payload(request)).encode())
        if response.get("FunctionError"):
            raise LaunchError(f"Lambda {function} refused {request.activity_exec_id}: "
                              f"{response['FunctionError']}",
                              activity_exec_id=request.activity_exec_id)


class SqsLauncher:
    """Sends one message to ``config["queue_url"]`` for a worker to pick up.

    FIFO queues (``.fifo``) get the activity execution id as deduplication id and the
    workflow execution id as group id.
    """

    def __init__(self, client: SQSClient) -> None:
        self.client = client

    def launch(self, request: LaunchRequest) -> None:
        queue_url = _required(request, "queue_url")
        attrs = {k: {"DataType": "String", "StringValue": v}
                 for k, v in request.environment().items()}
        kwargs: dict[str, Any] = {
            "QueueUrl": queue_url,
            "MessageBody": json.dumps(launch_payload(request)),
            "MessageAttributes": attrs,
        }
        if queue_url.endswith(".fifo"):
            kwargs["MessageDeduplicationId"] = request.activity_exec_id[-128:]
            kwargs["MessageGroupId"] = request.workflow_exec_id
        with _aws("SQS SendMessage", request):
            self.client.send_message(**kwargs)


class EcsLauncher:
    """Runs ``config["task_definition"]`` on ``config["cluster"]``.

    Optional config: ``container`` (the container to override; default: the task
    definition's first container), ``launch_type`` (default ``FARGATE``), ``subnets``,
    ``security_groups``, ``assign_public_ip`` (bool), ``capacity_provider``.
    """

    def __init__(self, client: ECSClient) -> None:
        self.client = client

    def launch(self, request: LaunchRequest) -> None:
        cluster = _required(request, "cluster")
        task_definition = _required(request, "task_definition")
        config = request.config
        container = config.get("container")
        with _aws("ECS RunTask", request):
            if not container:
                described = self.client.describe_task_definition(taskDefinition=task_definition)
                container = described["taskDefinition"]["containerDefinitions"][0]["name"]
            kwargs: dict[str, Any] = {
                "cluster": cluster,
                "taskDefinition": task_definition,
                "count": 1,
                "startedBy": "whimbrel",
                "overrides": {"containerOverrides": [{
                    "name": str(container),
                    "environment": [{"name": k, "value": v}
                                    for k, v in sorted(request.environment().items())],
                }]},
            }
            if config.get("capacity_provider"):
                kwargs["capacityProviderStrategy"] = [
                    {"capacityProvider": str(config["capacity_provider"]), "weight": 1}]
            else:
                kwargs["launchType"] = str(config.get("launch_type") or "FARGATE")
            subnets = config.get("subnets")
            if subnets:
                kwargs["networkConfiguration"] = {"awsvpcConfiguration": {
                    "subnets": list(subnets),  # type: ignore[call-overload]
                    "securityGroups": list(config.get("security_groups") or []),  # type: ignore[call-overload]
                    "assignPublicIp": "ENABLED" if config.get("assign_public_ip") else "DISABLED",
                }}
            response = self.client.run_task(**kwargs)
        failures = response.get("failures") or []
        if failures or not response.get("tasks"):
            reasons = "; ".join(f"{f.get('arn', '?')}: {f.get('reason', '?')}"
                                for f in failures) or "no task started"
            raise LaunchError(f"ECS RunTask for {request.activity_exec_id}: {reasons}",
                              activity_exec_id=request.activity_exec_id)


def aws_launchers(session: boto3.session.Session | None = None,
                  **client_kwargs: Any) -> dict[str, Launcher]:
    """``lambda``, ``sqs`` and ``ecs`` launchers on clients of ``session``.

    Pass the result as ``Whimbrel(launchers=...)`` in processes that may launch AWS
    activities (the Lambda handlers do). ``client_kwargs`` go to every client
    (e.g. ``endpoint_url`` for moto).
    """
    import boto3 as _boto3

    session = session or _boto3.session.Session()
    return {
        "lambda": LambdaLauncher(session.client("lambda", **client_kwargs)),
        "sqs": SqsLauncher(session.client("sqs", **client_kwargs)),
        "ecs": EcsLauncher(session.client("ecs", **client_kwargs)),
    }
