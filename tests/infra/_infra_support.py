"""Shared helpers of the CDK tests (a plain module: test files must not import conftest)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# infra/ is an app folder, not an installed package (as in `cdk synth` run from it).
if str(INFRA) not in sys.path:
    sys.path.insert(0, str(INFRA))

from aws_cdk import App  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402
from whimbrel_infra import WhimbrelStack  # noqa: E402


@dataclass(frozen=True)
class Synthesized:
    app: App
    stack: WhimbrelStack
    outdir: Path
    template_path: Path
    template: Template
    resources: dict[str, dict[str, Any]]

    def of_type(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == cfn_type}


def cdk_json_context() -> dict[str, Any]:
    """The context ``cdk synth`` would use, so the tests build what the CLI deploys."""
    context: dict[str, Any] = json.loads((INFRA / "cdk.json").read_text())["context"]
    return context
