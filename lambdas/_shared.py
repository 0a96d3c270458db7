"""What the handlers share: the Engine (one per container), Logger and Metrics, and
the batch processing of stream events (records of a batch handled at the same time,
those of one activity or run in order; partial batch failures as Powertools reports
them).

Configuration comes from the environment through ``Whimbrel.from_env`` (``whimbrel.settings``:
``WHIMBREL_TABLE_PREFIX``, ``WHIMBREL_ENDPOINT_URL`` — unset: real DynamoDB —,
``WHIMBREL_RETENTION_DAYS``, ``WHIMBREL_METRICS``). The local runtime passes its own client
on the invocation context (attribute ``whimbrel_client``) so several runtimes can share one
process.

``WHIMBREL_MODULES`` (the CDK construct's ``workflow_modules``: the user's code, bundled
with the Lambdas) makes a container a worker for the code workflows of those modules
(docs/contract.md, "Who runs code"): imported at cold start, the code workflows in them
registered, their decisions made in the stream handlers, and the decisions other
processes left for a worker taken by the heartbeat's scheduled pass. Their ``python``
steps are not run here (:class:`InProcessRefused`): they wait, claimable, for a worker.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from whimbrel.client.whimbrel import Whimbrel
from whimbrel.contract.errors import LaunchError
from whimbrel.engine import (
    Intake,
    IntakeResult,
    Launcher,
    LaunchRequest,
    Outcome,
    record_keys,
    tracing,
)
from whimbrel.launch.aws import aws_launchers
from whimbrel.launch.modules import code_workflows, import_modules, module_names
from whimbrel.launch.python import WorkerScope
from whimbrel.settings import ENV_MODULES

SERVICE = "whimbrel"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace="Whimbrel", service=SERVICE)

_lock = threading.Lock()
_client: Whimbrel | None = None

#: A deployed Lambda exports spans as the standard OpenTelemetry variables say
#: (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER; docs/operations.md, "Tracing"),
#: once per container; nothing when they are unset, or when the ADOT layer set its own
#: provider. Under `whimbrel dev` (no AWS_LAMBDA_FUNCTION_NAME) dev sets it up.
IN_LAMBDA = bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))
if IN_LAMBDA:
    tracing.export_from_env(os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or SERVICE)


def spans_flushed(handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The handler, then the spans it made exported before it returns: Lambda freezes
    the container afterwards, and a batch left for later may never leave."""
    @functools.wraps(handler)
    def wrapped(event: Any, context: Any) -> Any:
        try:
            return handler(event, context)
        finally:
            if IN_LAMBDA:
                tracing.flush()
    return wrapped


#: The facade's launchers that run an activity in this process: a Lambda refuses them.
IN_PROCESS_KINDS = ("python", "command")


class InProcessRefused:
    """Stands in for an in-process launcher in a Lambda: an activity started there would
    run on a thread of a Lambda container that is frozen, or gone, once the handler
    returns. The launch fails, so the engine fails the attempt with this message on the
    activity (its ``error``, the run's error, the console), and the record is done.

    For ``python`` it also answers which code workflows' decisions this container makes
    (``scope``: the modules of ``WHIMBREL_MODULES``); a decision runs on the handler's
    own thread, within the invocation, so it is safe where a step is not."""

    in_process = False  # nothing runs here: the engine queues the attempt as for a push

    def __init__(self, kind: str, scope: WorkerScope | None = None) -> None:
        self.kind = kind
        self.scope = scope or WorkerScope()

    def runs(self, config: Any) -> bool:
        """A Lambda runs no python step, not even of the code it was given: a python
        attempt is left READY and claimable for a worker (docs/contract.md, "Who runs
        code")."""
        return False

    def decides(self, code: str) -> bool:
        """Whether this container makes the decisions of the code workflow ``code``
        (``module:qualname``): only for the modules it was given, never for what it
        merely could import; the others are left for a worker (engine/code_handoff.py)."""
        return self.scope.covers(code)

    def launch(self, request: LaunchRequest) -> None:
        raise LaunchError(
            f"activity {request.activity_name!r} of workflow {request.workflow_name!r} has "
            f"the in-process {self.kind!r} launcher, which the deployed Lambdas refuse (it "
            "would run on a Lambda thread after the handler returns): give it an "
            "'external', 'lambda', 'sqs' or 'ecs' launcher, or start the run with the Full "
            "Logic API from a process that runs it")


def lambda_launchers(scope: WorkerScope | None = None) -> dict[str, Launcher]:
    """The launchers of a deployed Lambda: AWS's push launchers; in-process ones refused
    (``python``'s deciding for the code workflows of ``scope``)."""
    return {**aws_launchers(), **{k: InProcessRefused(k, scope if k == "python" else None)
                                  for k in IN_PROCESS_KINDS}}


def deployed_client() -> Whimbrel:
    """This container's client, from the environment: a worker for the code workflows of
    ``WHIMBREL_MODULES`` (imported now; each ``@workflow`` found registered, so a request
    row can start it with no other process having registered it).

    Raises:
        InvalidInput: a malformed setting, or a module that cannot be imported (the
            invocation fails; Lambda retries its records).
    """
    names = module_names(os.environ.get(ENV_MODULES, ""), field=ENV_MODULES)
    scope = WorkerScope()
    client = Whimbrel.from_env(launchers=lambda_launchers(scope), actor="lambda")
    try:
        for wf in code_workflows(import_modules(names, what=ENV_MODULES, field=ENV_MODULES)):
            client.register_workflow(wf)
    except BaseException:
        client.close()
        raise
    scope.add_modules(names)
    if names:
        logger.info("worker for the code workflows of %s", ", ".join(names))
    return client


def client_for(context: Any) -> Whimbrel:
    """The client to use: the one the caller put on ``context``, else this container's."""
    given = getattr(context, "whimbrel_client", None)
    if isinstance(given, Whimbrel):
        return given
    global _client
    with _lock:
        if _client is None:
            _client = deployed_client()
        return _client


def take_left_decisions(client: Whimbrel, context: Any) -> int:
    """Make the decisions other processes left for a worker (a one-shot command, a client
    that only sent a signal) of the code workflows this container serves, while the
    invocation has time; the number taken. The heartbeat's scheduled pass calls it:
    nothing else deployed reads the worker shards, and without it such a decision would
    wait for a worker that never comes."""
    launcher = client.engine.launchers.get("python")
    scope = launcher.scope if isinstance(launcher, InProcessRefused) else None
    prefixes = scope.claim_prefixes() if scope is not None else []
    if scope is None or not prefixes:
        return 0
    handover = client.engine.handover
    before = handover.decisions_taken
    for _ in range(LEFT_DECISION_ROUNDS):
        taken = handover.decisions_taken
        handover.claim_for_worker(prefixes, scope.covers, actor=client.engine.actor,
                                  decisions_only=True)
        if handover.decisions_taken == taken or _remaining_seconds(context) < TIME_MARGIN:
            break  # none left (or another worker takes them), or out of time
    return handover.decisions_taken - before


#: Rounds of reads of the worker shards one heartbeat pass makes at most for left decisions.
LEFT_DECISION_ROUNDS = 20
#: Seconds left in the invocation under which no further round starts.
TIME_MARGIN = 10.0


def _remaining_seconds(context: Any) -> float:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return remaining() / 1000 if callable(remaining) else float("inf")


def count(result: IntakeResult) -> None:
    """Emit the metrics one record's outcome is worth."""
    if result.outcome is Outcome.REJECTED:
        metrics.add_metric(name="RejectedRecords", unit=MetricUnit.Count, value=1)
    if result.conflict:
        metrics.add_metric(name="TransitionConflicts", unit=MetricUnit.Count, value=1)
    if result.outcome is Outcome.STARTED:
        metrics.add_metric(name="WorkflowsStarted", unit=MetricUnit.Count, value=1)
    if result.outcome is Outcome.APPLIED:
        name = {"COMPLETED": "ActivitiesCompleted", "FAILED": "ActivitiesFailed",
                "TIMED_OUT": "ActivitiesTimedOut"}.get(result.new_state or "")
        if name:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)


def log_result(result: IntakeResult) -> None:
    if result.outcome is Outcome.REJECTED:
        logger.warning("record rejected", extra={"reason": result.reason,
                                                 "conflict": result.conflict})
    else:
        logger.info("record processed", extra={"outcome": result.outcome.value,
                                               "new_state": result.new_state})


def process_stream(event: dict[str, Any], context: Any,
                   apply: Callable[[Intake, dict[str, Any]], IntakeResult]) -> dict[str, Any]:
    """Run ``apply`` on each record of a DynamoDB-stream batch (:func:`process_batch`:
    concurrently, one activity's or one run's records in order); failed records (only
    retryable errors reach here) become ``batchItemFailures``."""
    intake = client_for(context).intake

    def handle(record: dict[str, Any]) -> None:
        result = apply(intake, record)
        with emit_lock:
            count(result)
            log_result(result)

    return process_batch(event, context, handle)


#: Threads handling one batch's records (per container). A record's work is a few
#: DynamoDB round trips, waiting on the network, not on the CPU.
RECORD_THREADS = 10
#: Held while metrics are added from a record's thread (Powertools' metric set is shared).
emit_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def order_key(record: dict[str, Any]) -> str:
    """Records with the same key are handled in stream order: those of one activity
    (``activity_exec_id``), else of one run or request (``workflow_exec_id``, which a
    request's id gives), else of one item. The rest may be handled at the same time."""
    keys = record_keys(record)
    for name in ("activity_exec_id", "workflow_exec_id"):
        if name in keys:
            return f"{name} {keys[name]}"
    # A malformed record (no ``dynamodb`` mapping, odd keys) is a group of its own: the
    # handler rejects it, and it must never stop the grouping of the records around it.
    ddb = record.get("dynamodb") if isinstance(record, dict) else None
    item_keys = ddb.get("Keys") if isinstance(ddb, dict) else None
    if not isinstance(item_keys, dict):
        return f"record {id(record)}"
    return json.dumps(item_keys, sort_keys=True, default=repr)


def process_batch(event: dict[str, Any], context: Any,
                  handle: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Handle a DynamoDB-stream batch: records grouped by :func:`order_key`, the groups
    at the same time (``RECORD_THREADS``), each group's records one after another, with
    their ids in the log context.

    A record whose ``handle`` raises is a ``batchItemFailures`` entry, and so is every
    record after it in its group, which is not handled (it must not overtake the failed
    one): nothing after a failure in the same group is reported done. Lambda retries
    from the lowest sequence number reported (records of other groups after it arrive
    again; every handler is idempotent), as Powertools' ``BatchProcessor`` answers."""
    records = list(event.get("Records") or [])
    metrics.add_metric(name="RecordsReceived", unit=MetricUnit.Count, value=len(records))
    groups: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        groups.setdefault(order_key(record), []).append(i)
    failed: set[int] = set()

    def run(group: list[int]) -> None:
        for n, i in enumerate(group):
            keys = record_keys(records[i])
            logger.thread_safe_append_keys(**keys)
            try:
                handle(records[i])
            except Exception:
                logger.exception("record failed; it and the %d after it in its group are "
                                 "retried", len(group) - n - 1)
                failed.update(group[n:])
                return
            finally:
                logger.thread_safe_remove_keys(list(keys))

    if len(groups) <= 1:
        for group in groups.values():
            run(group)
    else:
        for done in [_executor().submit(run, g) for g in groups.values()]:
            done.result()
    return {"batchItemFailures": [{"itemIdentifier": records[i]["dynamodb"]["SequenceNumber"]}
                                  for i in sorted(failed)]}


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(RECORD_THREADS, thread_name_prefix="whimbrel-record")
        return _pool
