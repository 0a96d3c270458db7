"""examples/lambda_activities runs as its docstring says: thumbnails.yaml's activities are
Lambda functions running handlers.py, each recording its own end, whose follow-ups
launch the next ones — so the handlers' client must carry the ``lambda`` launcher (it
had none: the renders failed "no 'lambda' launcher is configured in this process").

The AWS Lambda service is the only stand-in: an async invoke runs the named handler in
a thread with the launcher's own payload (``launch_payload``), in a process whose client
is the handlers' module's, built as written from the environment.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from whimbrel import Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.engine.ports import LaunchRequest
from whimbrel.launch.aws import launch_payload
from whimbrel.testing import wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lambda_activities"
#: The deployed function names of cdk_snippet.py, by handler.
FUNCTIONS = {"whimbrel-example-validate": "validate", "whimbrel-example-render": "render",
             "whimbrel-example-index": "index"}


class LambdaService:
    """Stands in for AWS Lambda's async invoke: the named function's handler, in a
    thread, with the payload the real launcher sends."""

    in_process = False

    def __init__(self) -> None:
        self.handlers: ModuleType | None = None
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def launch(self, request: LaunchRequest) -> None:
        assert self.handlers is not None
        handler = getattr(self.handlers, FUNCTIONS[str(request.config["function"])])

        def invoke() -> None:
            try:
                handler(launch_payload(request), None)
            except Exception as exc:  # Lambda logs a function's error; so do we
                self.errors.append(f"{type(exc).__name__}: {exc}")

        thread = threading.Thread(target=invoke)
        self.threads.append(thread)
        thread.start()


@pytest.fixture
def handlers(ddb_endpoint: str, table_prefix: str,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ModuleType, LambdaService]]:
    # The functions' environment (cdk_snippet.py sets the prefix; the region is the
    # function's), here pointed at DynamoDB Local.
    monkeypatch.setenv("WHIMBREL_ENDPOINT_URL", ddb_endpoint)
    monkeypatch.setenv("WHIMBREL_TABLE_PREFIX", table_prefix)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    spec = importlib.util.spec_from_file_location("lambda_example_handlers",
                                                  EXAMPLE / "handlers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    service = LambdaService()
    service.handlers = module
    # As written it has the AWS launchers; their Lambda client is the one part swapped.
    assert set(module.wb.engine.launchers) >= {"lambda", "sqs", "ecs"}
    module.wb.engine.launchers["lambda"] = service
    yield module, service
    for thread in service.threads:
        thread.join(timeout=30)
    module.wb.close()


def test_thumbnails_run_through_the_handlers(handlers: tuple[ModuleType, LambdaService],
                                             ddb_endpoint: str, table_prefix: str) -> None:
    _, service = handlers
    with Whimbrel(ddb_endpoint, table_prefix, launchers={"lambda": service}) as wb:
        wb.create_tables()
        wb.register_workflow(WorkflowDefinition.from_file(EXAMPLE / "thumbnails.yaml"))
        ok = wb.start_workflow("thumbnails", {"s3_key": "cat.jpg"})
        bad = wb.start_workflow("thumbnails", {"s3_key": "cat.txt"})
        for wx in (ok, bad):
            wait_until(lambda wx=wx: wb.get_workflow(wx).state.value in (
                "COMPLETED", "FAILED"), timeout=90)
        done = wb.get_workflow(ok)
        assert done.state is WorkflowState.COMPLETED, done.error
        assert done.activity("index").output == {"thumbnails": [
            "thumbs/128/cat.jpg", "thumbs/2048/cat.jpg", "thumbs/512/cat.jpg"]}
        failed = wb.get_workflow(bad)
        assert failed.state is WorkflowState.FAILED
        assert "cat.txt is not an image" in (failed.activity("validate").error or "")
        # The one function error: validate re-raising after recording FAILED.
        assert service.errors == ["ValueError: cat.txt is not an image"]
        wb.store.delete_tables()
