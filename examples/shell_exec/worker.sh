#!/usr/bin/env bash
# A worker: claim whatever step of nightly-backup is READY and run it through
# `whimbrel exec`. Run as many of these as you like, anywhere: DynamoDB's conditional
# writes make sure each step runs once. Stops after IDLE_LIMIT idle polls.
set -uo pipefail
cd "$(dirname "$0")"
idle=0
while [ "$idle" -lt "${IDLE_LIMIT:-30}" ]; do
  ran=0
  for step in dump compress upload verify; do
    out=$(whimbrel exec --json --claim "nightly-backup/$step" -- ./steps.sh "$step")
    code=$?
    if [[ "$out" != *'"claimed": false'* ]]; then
      ran=1
      echo "$step: exit $code"
    fi
  done
  if [ "$ran" = 0 ]; then idle=$((idle + 1)); sleep 1; else idle=0; fi
done
