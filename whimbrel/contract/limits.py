"""Size and naming limits, chosen to keep every item well under DynamoDB's 400 KB."""

from __future__ import annotations

NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
WORKFLOW_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$"

MAX_ACTIVITIES = 2000
MAX_DEFINITION_BYTES = 350_000
MAX_DESCRIPTION_CHARS = 2000
#: Depth of nesting accepted in a definition (activity inputs and launcher settings
#: included): code that walks deeper data could exhaust the interpreter's stack.
MAX_DEFINITION_DEPTH = 64
#: Workflow input, stored on the request and execution items.
MAX_INPUT_BYTES = 128_000
#: An activity's output, stored on its execution item.
MAX_OUTPUT_BYTES = 64_000
#: With a payload bucket: a value larger than this (bytes of JSON) is kept in S3 and its
#: item holds a reference. An S3 PUT costs about 8 write units and a GET about 3 read
#: units, and each adds a round trip (~10-30 ms in a region); a 16 KB attribute costs 16
#: units on every write of its item and 4 on every consistent read (docs/architecture.md,
#: "Large payloads").
DEFAULT_PAYLOAD_THRESHOLD_BYTES = 16_384
#: With a payload bucket: the largest value accepted (inputs, outputs, signals, lists).
DEFAULT_PAYLOAD_MAX_BYTES = 100_000_000
#: Heartbeat details (an attempt's progress), rewritten with its item by every heartbeat
#: that carries new ones: progress, not data.
MAX_HEARTBEAT_DETAILS_BYTES = 16_000
#: Errors longer than this are truncated (kept, never rejected: a failure must not be lost).
MAX_ERROR_CHARS = 8_000
#: Depth of nested JSON accepted in inputs and outputs.
MAX_JSON_DEPTH = 32
#: Runs nested through ``workflow`` launchers: a top run is at depth 1, its child at 2.
#: A child that would start deeper fails its parent's attempt (cycles are refused at
#: registration; this bounds what two registrations racing could still close).
MAX_NESTING_DEPTH = 10
#: DynamoDB's limit on one item (names and values), 400 KB.
MAX_ITEM_BYTES = 409_600
