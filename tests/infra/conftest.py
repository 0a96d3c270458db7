"""Fixtures for the CDK tests: the app is synthesized once per session (per worker).

No AWS account and no Docker are needed: aws-cdk-lib synthesizes through Node and
the Lambda asset is bundled locally (dependencies cached in ``.cache/``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from _infra_support import Synthesized, cdk_json_context
from aws_cdk.assertions import Template
from whimbrel_infra import build_app


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    """``infra/app.py``'s app, synthesized with cdk-nag, its template parsed once."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    # CDK's built-in CloudFormation validation costs ~10 s per synth; cfn-lint runs on
    # the template in test_infra_stack.py instead. cdk-nag stays on, as in app.py.
    app, stack = build_app(outdir=str(outdir), context=cdk_json_context(), builtin_validation=False)
    app.synth()  # raises if cdk-nag reports an unacknowledged finding
    template_path = outdir / stack.template_file
    raw = json.loads(template_path.read_text())
    yield Synthesized(
        app=app,
        stack=stack,
        outdir=outdir,
        template_path=template_path,
        # from_json, not from_stack: from_stack would synthesize a second time.
        template=Template.from_json(raw),
        resources=raw["Resources"],
    )
