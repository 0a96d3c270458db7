"""The Lambda code bundle, imported by a clean interpreter, and the construct's props.

Nothing here synthesizes the app (see test_infra_stack.py), so under
``pytest -n 2 --dist loadfile`` this file runs beside the synthesis, not after it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _infra_support import ROOT
from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_lambda as lambda_
from whimbrel_infra import WhimbrelProps, props_from_context
from whimbrel_infra.application import _arn_list
from whimbrel_infra.bundling import (
    RUNTIME_PROVIDED,
    LambdaBundle,
    default_cache_dir,
    host_platforms,
    lambda_platforms,
    newest_python_runtime,
    runtime_python_version,
    runtime_requirements,
)
from whimbrel_infra.functions import deployed_consumers
from whimbrel_infra.stack import _import_launch_target

from whimbrel.store.consumers import (
    ENGINE_CONSUMERS,
    HEARTBEAT_HANDLER,
    PAYLOAD_CONSUMERS,
    STREAM_CONSUMERS,
)

pytestmark = pytest.mark.infra

HANDLER_MODULES = [h.rsplit(".", 1)[0] for h in [c.handler for c in STREAM_CONSUMERS]] + [
    HEARTBEAT_HANDLER.rsplit(".", 1)[0]
]

# Runs in `python -I -S`: no site-packages, no PYTHONPATH, no current directory. Its
# path is the asset folder (what Lambda puts first: /var/task) and a folder holding only
# the AWS SDK, standing in for the runtime's own copy (/var/runtime), which the bundle
# leaves out on purpose. It imports every handler, then every top-level module of every
# distribution in the asset, and reports where each came from.
_IMPORT_CHECK = """
import importlib, importlib.metadata, json, sys
asset, sdk, handlers = json.loads(sys.argv[1])
sys.path[:0] = [asset, sdk]

def origin(module):
    return module.__file__ or list(module.__path__)[0]

origins = {}
for name in handlers:
    module = importlib.import_module(name)
    assert callable(module.handler), name
    origins[name] = origin(module)
for top in sorted(importlib.metadata.packages_distributions()):
    if not top.startswith("_"):
        origins[top] = origin(importlib.import_module(top))
origins["whimbrel"] = origin(importlib.import_module("whimbrel"))
print(json.dumps(origins))
"""


@pytest.fixture(scope="module")
def host_asset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LambdaBundle]:
    """The same bundle as the deployed one, but for this machine's platform and Python.

    The deployed asset holds arm64 wheels for the Lambda runtime's Python, which this
    host may be unable to load (x86_64, an older Python). Rather than emulate, the
    bundler takes the platform and Python version as parameters; this builds the
    identical recipe (same sources, same pinned requirements, same pruning) for the
    host, so importing it proves the recipe is complete. test_infra_stack.py checks
    the real asset holds the same files built for arm64.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    # With workflow code, as a user's deployment may be given: the test's own module.
    code = tmp_path_factory.mktemp("workflow_code")
    shutil.copy(ROOT / "tests" / f"{USER_MODULE}.py", code)
    bundle = LambdaBundle(
        source_root=ROOT,
        python_version=version,
        platforms=host_platforms(),
        cache_dir=default_cache_dir(ROOT),
        workflow_code=code,
    )
    asset = tmp_path_factory.mktemp("asset")
    bundle.build(asset)
    return asset, bundle


#: The user's module bundled into the host asset (a code workflow module of the tests).
USER_MODULE = "wb_deployed_workflows"

#: Runs in `python -I -S` like _IMPORT_CHECK: what a cold start with WHIMBREL_MODULES
#: does first (lambdas/_shared.py), from the asset alone.
_USER_CODE_CHECK = """
import json, sys
asset, sdk, module = json.loads(sys.argv[1])
sys.path[:0] = [asset, sdk]
from whimbrel.launch.modules import code_workflows, import_modules, module_names
(found,) = import_modules(module_names(module), what="WHIMBREL_MODULES")
print(json.dumps({"file": found.__file__,
                  "workflows": [wf.name for wf in code_workflows([found])]}))
"""

#: What the runtime's copy of the SDK imports, which /var/runtime holds beside it (the
#: asset has none of them: nothing in it depends on botocore, which is pruned).
SDK_DEPENDENCIES = ("dateutil", "urllib3", "six")


def _sdk_only(tmp: Path) -> Path:
    """A folder with just the AWS SDK packages this environment has and what they import
    (symlinked), as the Lambda runtime provides them."""
    sdk = tmp / "runtime-sdk"
    sdk.mkdir()
    for name in (*sorted(RUNTIME_PROVIDED), *SDK_DEPENDENCIES):
        spec = importlib.util.find_spec(name)
        assert spec, name
        if spec.submodule_search_locations:  # a package
            (sdk / name).symlink_to(next(iter(spec.submodule_search_locations)))
        else:  # one module file (six.py)
            assert spec.origin, name
            (sdk / Path(spec.origin).name).symlink_to(spec.origin)
    return sdk


def test_each_handler_imports_in_a_clean_interpreter(
    host_asset: tuple[Path, LambdaBundle], tmp_path: Path
) -> None:
    asset, bundle = host_asset
    argument = json.dumps([str(asset), str(_sdk_only(tmp_path)), HANDLER_MODULES])
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _IMPORT_CHECK, argument],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    origins: dict[str, str] = json.loads(result.stdout)
    # Everything came from the asset — nothing leaked in from the checkout or venv.
    for name, origin in origins.items():
        assert origin.startswith(str(asset)), f"{name} imported from {origin}"
    assert set(HANDLER_MODULES) <= set(origins)
    for requirement in bundle.requirements:  # every pinned dependency was imported
        name = requirement.split("[")[0].split("=")[0]
        top_level = {"aws-lambda-powertools": "aws_lambda_powertools", "pyyaml": "yaml",
                     "opentelemetry-api": "opentelemetry"}
        assert top_level.get(name, name.replace("-", "_")) in origins, requirement
    for top_level in ("pydantic", "pydantic_core"):  # the parser extra's native part
        assert top_level in origins, top_level


def test_the_users_modules_import_from_the_asset_root(
    host_asset: tuple[Path, LambdaBundle], tmp_path: Path
) -> None:
    asset, _ = host_asset
    argument = json.dumps([str(asset), str(_sdk_only(tmp_path)), USER_MODULE])
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _USER_CODE_CHECK, argument],
        capture_output=True, text=True, cwd=tmp_path, check=False, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["file"] == str(asset / f"{USER_MODULE}.py")
    assert found["workflows"] == ["deployed_order", "deployed_python"]


def test_bundle_pins_what_this_environment_runs() -> None:
    requirements = runtime_requirements(ROOT)
    assert requirements
    for requirement in requirements:
        assert "==" in requirement, requirement
        assert requirement.split("[")[0].split("=")[0].lower() not in RUNTIME_PROVIDED
    assert any(r.startswith("aws-lambda-powertools[parser]==") for r in requirements)


def test_asset_hash_follows_sources_and_target(tmp_path: Path) -> None:
    runtime = newest_python_runtime()
    arm = LambdaBundle.for_lambda(runtime, lambda_.Architecture.ARM_64, cache_dir=tmp_path)
    x86 = LambdaBundle.for_lambda(runtime, lambda_.Architecture.X86_64, cache_dir=tmp_path)
    assert arm.asset_hash() == arm.asset_hash()
    assert arm.asset_hash() != x86.asset_hash()
    assert arm.platforms == lambda_platforms(lambda_.Architecture.ARM_64)
    assert all(p.endswith("_aarch64") for p in arm.platforms)
    assert arm.python_version == runtime_python_version(runtime)


def test_newest_python_runtime_is_the_highest_offered() -> None:
    offered = [
        int(name.rsplit("_", 1)[1]) for name in dir(lambda_.Runtime) if name.startswith("PYTHON_3_")
    ]
    assert newest_python_runtime().name == f"python3.{max(offered)}"


# --- props ------------------------------------------------------------------------------


def test_props_from_context_parse_cli_strings() -> None:
    props = props_from_context(
        {
            "whimbrel:tablePrefix": "dev_",
            "whimbrel:removalPolicy": "destroy",
            "whimbrel:heartbeatRateMinutes": "5",
            "whimbrel:lambdaMemoryMb": "1024",
            "whimbrel:parallelizationFactor": "3",
            "whimbrel:alarms": "false",
            "whimbrel:managedPolicies": "true",
        }
    )
    assert props.table_prefix == "dev_"
    assert props.removal_policy == RemovalPolicy.DESTROY
    assert props.effective_deletion_protection is False
    assert props.effective_heartbeat_rate.to_minutes() == 5
    assert props.lambda_memory_mb == 1024 and props.parallelization_factor == 3
    assert props.alarms is False and props.managed_policies is True


def test_events_can_be_left_out() -> None:
    # Without events no notify consumer is deployed (so no notify function, no mapping).
    props = props_from_context({"whimbrel:events": "false"})
    assert props.events is False
    assert deployed_consumers(props) == ENGINE_CONSUMERS
    assert deployed_consumers(WhimbrelProps()) + PAYLOAD_CONSUMERS == STREAM_CONSUMERS


def test_props_defaults_keep_data() -> None:
    props = WhimbrelProps()
    assert props.removal_policy == RemovalPolicy.RETAIN
    assert props.effective_deletion_protection is True
    assert props.effective_heartbeat_rate.to_seconds() == Duration.minutes(1).to_seconds()


@pytest.mark.parametrize(
    "kwargs",
    [{"table_prefix": "bad prefix/"}, {"table_prefix": "x" * 250}, {"lambda_memory_mb": 64},
     {"parallelization_factor": 0}, {"parallelization_factor": 11}],
)
def test_props_reject_values_aws_would_reject(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        WhimbrelProps(**kwargs)  # type: ignore[arg-type]


def test_launch_targets_from_context() -> None:
    function = "arn:aws:lambda:eu-west-1:111122223333:function:resize"
    queue = "arn:aws:sqs:eu-west-1:111122223333:jobs"
    assert _arn_list(f"{function}, {queue}") == [function, queue]
    assert _arn_list([function]) == [function]
    assert _arn_list(None) == []
    stack = Stack()
    assert _import_launch_target(stack, "F", function).function_arn == function
    assert _import_launch_target(stack, "Q", queue).queue_arn == queue
    with pytest.raises(ValueError, match="neither a Lambda function nor an SQS queue"):
        _import_launch_target(stack, "T", "arn:aws:sns:eu-west-1:111122223333:topic")


# --- the user's workflow code (issue 26, "Deployed") -------------------------------------


def _user_code(root: Path) -> Path:
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "workflows.py").write_text("ORDER = 1\n")
    (root / "steps.py").write_text("")
    return root


def test_workflow_code_and_modules_are_checked_at_synth(tmp_path: Path) -> None:
    code = _user_code(tmp_path / "code")
    props = WhimbrelProps(workflow_code=str(code), workflow_modules=["shop.workflows", "steps"])
    assert props.workflow_code == code.resolve()
    assert props.workflow_modules == ("shop.workflows", "steps")
    assert WhimbrelProps(workflow_code=code, workflow_modules=["shop"]).workflow_modules == (
        "shop",)  # a package
    assert WhimbrelProps().workflow_modules == () and WhimbrelProps().workflow_code is None


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"workflow_code": "missing", "workflow_modules": ["shop.workflows"]},
     "/missing' is not a directory"),
    ({"workflow_code": "code", "workflow_modules": ["shop/workflows"]},
     "'shop/workflows' is not a module name"),
    ({"workflow_code": "code", "workflow_modules": ["shop.orders"]},
     "'shop.orders' is not in workflow_code"),
    ({"workflow_modules": ["shop.workflows"]}, "need workflow_code"),
    ({"workflow_code": "code"}, "needs workflow_modules"),
    ({"workflow_code": "whimbrel_inside", "workflow_modules": ["steps"]},
     "holds 'whimbrel', which would replace Whimbrel's own code"),
])
def test_bad_workflow_code_is_refused_with_the_reason(
        tmp_path: Path, kwargs: dict[str, object], says: str) -> None:
    _user_code(tmp_path / "code")
    (_user_code(tmp_path / "whimbrel_inside") / "whimbrel").mkdir()
    if "workflow_code" in kwargs:
        kwargs = {**kwargs, "workflow_code": tmp_path / str(kwargs["workflow_code"])}
    with pytest.raises(ValueError, match=re.escape(says)):
        WhimbrelProps(**kwargs)  # type: ignore[arg-type]


def test_workflow_code_from_context(tmp_path: Path) -> None:
    code = _user_code(tmp_path / "code")
    props = props_from_context({"whimbrel:workflowCode": str(code),
                                "whimbrel:workflowModules": "shop.workflows, steps"})
    assert props.workflow_modules == ("shop.workflows", "steps")
    assert props_from_context({"whimbrel:workflowCode": str(code),
                               "whimbrel:workflowModules": ["steps"]}).workflow_modules == (
        "steps",)
    with pytest.raises(ValueError, match="whimbrel:workflowModules: 'a b/c' "):
        props_from_context({"whimbrel:workflowModules": ["a b/c"]})


def test_asset_hash_follows_the_users_code(tmp_path: Path) -> None:
    code = _user_code(tmp_path / "code")
    runtime = newest_python_runtime()

    def bundle(workflow_code: Path | None) -> LambdaBundle:
        return LambdaBundle.for_lambda(runtime, lambda_.Architecture.ARM_64,
                                       cache_dir=tmp_path, workflow_code=workflow_code)

    without, before = bundle(None).asset_hash(), bundle(code).asset_hash()
    assert before != without
    (code / "shop" / "__pycache__").mkdir()
    (code / "shop" / "__pycache__" / "x.pyc").write_text("cache")
    assert bundle(code).asset_hash() == before  # what is not bundled does not count
    (code / "steps.py").write_text("def charge(run):\n    return 1\n")
    assert bundle(code).asset_hash() != before
