"""Synthesize the Whimbrel stack offline: ``python -m whimbrel_infra [--outdir DIR] [--lint]``.

No AWS account, no Docker: CDK synthesizes through Node, the Lambda asset is bundled
locally, cdk-nag runs as a validation plugin. ``--lint`` also runs cfn-lint on the
template. ``-c key=value`` sets CDK context like the CDK CLI does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from .application import CDK_JSON, build_app

#: cfn-lint settings (one acknowledged warning, with its reason).
CFN_LINT_CONFIG = CDK_JSON.parent / ".cfnlintrc"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m whimbrel_infra", description=__doc__)
    parser.add_argument("--outdir", default=str(CDK_JSON.parent / "cdk.out"))
    parser.add_argument("--lint", action="store_true", help="run cfn-lint on the template")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)

    context = json.loads(CDK_JSON.read_text()).get("context", {})
    for item in args.context:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"context must be KEY=VALUE, not {item!r}")
        context[key] = value

    app, stack = build_app(outdir=args.outdir, context=context)
    app.synth()  # raises on an unacknowledged cdk-nag finding
    template = Path(args.outdir) / stack.template_file
    print(template)
    if args.lint:
        cfn_lint = shutil.which("cfn-lint", path=str(Path(sys.executable).parent)) or "cfn-lint"
        command = [cfn_lint, "--config-file", str(CFN_LINT_CONFIG), "-t", str(template)]
        return subprocess.run(command, check=False).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
