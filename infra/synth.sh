#!/usr/bin/env bash
# Synthesizes the Whimbrel stack into infra/cdk.out offline (no AWS account, no
# Docker), with cdk-nag, then lints the template with cfn-lint.
# Extra arguments go to `python -m whimbrel_infra`, e.g. `-c whimbrel:tablePrefix=dev_`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
PYTHON="${PYTHON:-../.venv/bin/python}"
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="${JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION:-20}"
exec "$PYTHON" -m whimbrel_infra --lint "$@"
