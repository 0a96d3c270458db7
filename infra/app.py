#!/usr/bin/env python3
"""The CDK app: ``npx aws-cdk synth`` / ``deploy`` from this folder run this file.

See docs/deploy.md for the context keys that shape the deployment.
"""

import os
import sys
from pathlib import Path

# jsii prints an end-of-life banner for Node 20 on every run; nothing to act on here.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# Run from infra/ or not: whimbrel_infra sits next to this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from whimbrel_infra import build_app

if __name__ == "__main__":
    app, _stack = build_app()
    app.synth()
