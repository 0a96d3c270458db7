"""Bad input corpus (issue 5, part 5) for the command line: hostile invocations through
the Typer app, in-process.

Each must exit with the documented code (docs/cli.md), name the problem on stderr without
a Python traceback, do the same as one JSON object on stderr with ``--json`` (usage errors
included), print nothing on stdout, and leave every stored item as it was.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from cli_helpers import Run

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.client.query_input import Filters
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.limits import MAX_DEFINITION_DEPTH, MAX_INPUT_BYTES
from whimbrel.store import specs

UNKNOWN_WX = str(uuid.UUID(int=0))
USAGE, NOT_FOUND, INVALID, CONFLICT, STORE, EXEC_ERROR = 2, 3, 4, 5, 6, 125


@dataclass
class Bad:
    label: str
    args: tuple[str, ...]
    code: int
    words: str
    stdin: str | None = None


def _alias_bomb() -> str:
    lines = ["name: bomb", "activities:", "  - name: A", "    input:",
             "      x0: &x0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"      x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


def _forged_cursors() -> list[Bad]:
    """Cursors of the right shape and filters (so only the values are wrong): issue 20
    found ``"e": 1e300`` exiting 1 with an OverflowError traceback."""
    fingerprint = Filters(None, (), None, None).fingerprint()  # `list` with no filter

    def forged(**values: str) -> str:
        fields = {"v": "1", "e": "1795219200", "x": '"wx"', "f": "1795132800",
                  "t": "1795219200", "q": json.dumps(fingerprint), **values}
        body = "{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}"
        return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")

    wrong = {"e 1e300": {"e": "1e300"}, "e a 400-digit int": {"e": "9" * 400},
             "e NaN": {"e": "NaN"}, "e Infinity": {"e": "Infinity"},
             "e -1e300": {"e": "-1e300"}, "e as text": {"e": '"1795219200"'},
             "e true": {"e": "true"}, "e a list": {"e": "[1]"}, "f 1e300": {"f": "1e300"},
             "f a 400-digit int": {"f": "9" * 400}, "t 1e300": {"t": "1e300"},
             "t -Infinity": {"t": "-Infinity"}, "x a number": {"x": "7"}}
    out = [Bad(f"forged --cursor, {label}", ("list", "--cursor", forged(**values)),
               INVALID, "is not a cursor list_workflows returned")
           for label, values in wrong.items()]
    # With --days the anchor ("t") is read first, to find "today" of page one.
    out.append(Bad("forged --cursor, t 1e300 with --days",
                   ("list", "--days", "2", "--cursor", forged(t="1e300")), INVALID,
                   "cursor"))
    return out


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    texts: dict[str, str | bytes] = {
        "binary.yaml": b"\x00\xff\xfe\x89PNG\r\n\x1a\n",
        "broken.yaml": "name: x\nactivities: [b\n",
        "cycle.yaml": "name: cyc\nactivities:\n  - {name: A, depends_on: [B]}\n"
                      "  - {name: B, depends_on: [A]}\n",
        "huge.yaml": "name: huge\nactivities:\n"
                     + "".join(f"  - {{name: A{i}}}\n" for i in range(10_000)),
        "deep.json": "[" * 10_000 + "]" * 10_000,
        "bomb.yaml": _alias_bomb(),
        "empty.yaml": "",
        "latin1.json": '{"caf\xe9": 1}'.encode("latin-1"),
        "not-events.jsonl": '{"detail-type": "Workflow Ended"}\nnot JSON at all\n',
    }
    out = {"dir": str(tmp_path), "missing": str(tmp_path / "missing.yaml"),
           "nodir": str(tmp_path / "no" / "such" / "dir" / "g.mmd")}
    for name, text in texts.items():
        path = tmp_path / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        out[name] = str(path)
    return out


@pytest.fixture
def done(wb: Whimbrel) -> Iterator[str]:
    """A COMPLETED run of the registered workflow ``ok``; yields its id."""
    wb.register_workflow(WorkflowDefinition("ok", (
        ActivityDefinition("A", launcher=LauncherSpec.external()),)))
    wx = wb.start_workflow("ok", request_id="done")
    aeid = activity_exec_id(wx, "A", 1)
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, "COMPLETED")
    yield wx


def corpus(f: dict[str, str], done: str) -> list[Bad]:
    completed_a = activity_exec_id(done, "A", 1)
    return [
        # -- usage: exit 2 ---------------------------------------------------------------
        Bad("unknown command", ("bogus",), USAGE, "No such command 'bogus'"),
        Bad("unknown subcommand", ("definitions", "bogus"), USAGE, "No such command 'bogus'"),
        Bad("unknown option", ("status", "x", "--bogus"), USAGE, "No such option: --bogus"),
        Bad("missing argument", ("events",), USAGE, "Missing argument 'workflow_exec_id'"),
        Bad("status without a run", ("status",), USAGE,
            "give either a WORKFLOW_EXEC_ID or --request-id ID"),
        Bad("missing activity id", ("retry",), USAGE, "Missing argument"),
        Bad("definition file that does not exist", ("definitions", "register", f["missing"]),
            USAGE, "does not exist"),
        Bad("definition file is a directory", ("definitions", "register", f["dir"]), USAGE,
            "is a directory"),
        Bad("--limit 0", ("list", "--limit", "0"), USAGE, "--limit"),
        Bad("negative --limit", ("list", "--limit", "-3"), USAGE, "--limit"),
        Bad("non-numeric --limit", ("list", "--limit", "ten"), USAGE,
            "--limit': Input should be a valid integer"),
        Bad("unknown state name", ("list", "--state", "EXPLODED"), USAGE, "EXPLODED"),
        Bad("--days out of range", ("list", "--days", "100000"), USAGE, "--days"),
        Bad("--limit above 1000", ("list", "--limit", "1001"), USAGE, "--limit"),
        Bad("--since and --days", ("list", "--since", "1h", "--days", "2"), USAGE,
            "not both"),
        Bad("negative --timeout", ("submit", "ok", "--wait", "--timeout", "-5"), USAGE,
            "--timeout"),
        Bad("non-numeric --timeout", ("cancel", done, "--timeout", "soon"), USAGE,
            "--timeout': Input should be a valid number"),
        Bad("--version 0", ("submit", "ok", "--version", "0"), USAGE, "--version"),
        Bad("--version of 41 digits", ("definitions", "show", "ok", "--version", "9" * 41),
            USAGE, "--version"),
        Bad("negative --version", ("graph", "ok", "--definition", "--version", "-1"), USAGE,
            "--version"),
        Bad("unknown --view", ("status", done, "--view", "pie"), USAGE, "--view"),
        Bad("--interval 0", ("status", done, "--watch", "--interval", "0"), USAGE,
            "--interval"),
        Bad("negative --kill-grace", ("exec", "--activity-exec-id", completed_a,
                                      "--kill-grace", "-1", "--", "true"), USAGE,
            "--kill-grace"),
        Bad("exec without a command", ("exec", "--activity-exec-id", completed_a), USAGE,
            "Missing argument"),
        Bad("exec without an activity", ("exec", "--", "true"), USAGE, "no activity"),
        Bad("unknown graph format", ("graph", "ok", "--definition", "--format", "png"), USAGE,
            "--format"),
        Bad("graph output in a missing folder", ("graph", "ok", "--definition", "-o",
                                                 f["nodir"]), USAGE, "cannot write"),
        Bad("endpoint that is not a URL", ("status", done, "--endpoint-url", "notaurl"),
            USAGE, "--endpoint-url 'notaurl' is not an http(s):// URL"),
        Bad("table prefix with a slash", ("list", "--table-prefix", "a b/"), USAGE,
            "--table-prefix 'a b/'"),
        Bad("--days 0", ("rejections", "--days", "0"), USAGE, "--days"),
        Bad("redrive without a run", ("redrive",), USAGE, "Missing argument"),
        Bad("--expand an activity that is no map", ("status", done, "--expand", "A"), USAGE,
            "--expand 'A': not a map of this run"),
        Bad("notifications without a file", ("notifications",), USAGE,
            "give --events-file or set WHIMBREL_EVENTS_FILE"),
        Bad("notifications of a missing file", ("notifications", "--events-file",
                                                f["missing"]), USAGE, "does not exist"),
        Bad("notifications of an unknown type", ("notifications", "--events-file",
                                                 f["empty.yaml"], "--type", "[/x]"), USAGE,
            "--type '[/x]': not one of"),
        Bad("notifications --interval 0", ("notifications", "--events-file", f["missing"],
                                           "--follow", "--interval", "0"), USAGE,
            "--interval"),
        Bad("dev events file in a missing folder", ("dev", "--events-file", f["nodir"]),
            USAGE, "does not exist"),
        Bad("approve without --by", ("approve", completed_a), USAGE, "Missing option '--by'"),
        Bad("signal without a name", ("signal", done), USAGE, "Missing argument 'name'"),
        # -- not found: exit 3 -----------------------------------------------------------
        Bad("unknown run", ("status", "nope"), NOT_FOUND, "no workflow execution 'nope'"),
        Bad("odd Unicode run id", ("status", "\x00\u202e\U0001f426"), NOT_FOUND,
            "no workflow execution '\\x00\\u202e\U0001f426'"),
        Bad("run id that looks like markup", ("events", "[/x]"), NOT_FOUND,
            "no workflow execution '[/x]'"),
        Bad("graph of an unknown run", ("graph", "nope"), NOT_FOUND, "no workflow execution"),
        Bad("cancel an unknown run", ("cancel", "nope"), NOT_FOUND, "no workflow execution"),
        Bad("redrive an unknown run", ("redrive", "nope"), NOT_FOUND, "no workflow execution"),
        Bad("retry an unknown attempt", ("retry", f"{UNKNOWN_WX}:A:1"), NOT_FOUND,
            f"no activity execution '{UNKNOWN_WX}:A:1'"),
        Bad("activity id with an emoji code", ("retry", f"{UNKNOWN_WX}:smile:1"), NOT_FOUND,
            f"'{UNKNOWN_WX}:smile:1'"),
        Bad("submit an unknown workflow", ("submit", "nope"), NOT_FOUND,
            "no registered workflow definition 'nope'"),
        Bad("show an unknown definition", ("definitions", "show", "nope"), NOT_FOUND,
            "no registered workflow definition 'nope'"),
        Bad("unknown version", ("submit", "ok", "--version", "7"), NOT_FOUND, "version 7"),
        Bad("signal an unknown run", ("signal", "nope", "paid"), NOT_FOUND,
            "no workflow execution 'nope'"),
        Bad("approve an unknown attempt", ("approve", f"{UNKNOWN_WX}:A:1", "--by", "al"),
            NOT_FOUND, "no activity execution"),
        Bad("suspend an unknown run", ("suspend", "nope"), NOT_FOUND, "no workflow execution"),
        # -- invalid: exit 4 ---------------------------------------------------------------
        Bad("binary definition file", ("definitions", "register", f["binary.yaml"]), INVALID,
            "binary.yaml is not UTF-8 text"),
        Bad("definition not YAML", ("definitions", "register", f["broken.yaml"]), INVALID,
            "not valid YAML"),
        Bad("definition with a cycle", ("definitions", "register", f["cycle.yaml"]), INVALID,
            "cycle: A -> B -> A"),
        Bad("definition of 10,000 activities", ("definitions", "register", f["huge.yaml"]),
            INVALID, "10000 activities is more than the limit of 2000"),
        Bad("definition nested 10,000 deep", ("definitions", "register", f["deep.json"]),
            INVALID, f"nested deeper than {MAX_DEFINITION_DEPTH} levels"),
        Bad("YAML alias bomb", ("definitions", "register", f["bomb.yaml"]), INVALID,
            "(YAML aliases expanded), more than the limit"),
        Bad("empty definition", ("definitions", "register", f["empty.yaml"]), INVALID,
            "a definition must be a mapping"),
        Bad("--input not JSON", ("submit", "ok", "--input", "{bad"), INVALID,
            "--input is not valid JSON"),
        Bad("--input file missing", ("submit", "ok", "--input", "@" + f["missing"]), INVALID,
            "cannot read input file"),
        Bad("--input file not UTF-8", ("submit", "ok", "--input", "@" + f["latin1.json"]),
            INVALID, "is not UTF-8 text"),
        Bad("--input nested 10,000 deep", ("submit", "ok", "--input", "@" + f["deep.json"]),
            INVALID, "--input is nested too deeply"),
        Bad("--input nested 50 deep", ("submit", "ok", "--input", '{"a":' * 50 + "1" + "}" * 50),
            INVALID, "input is nested deeper than 32 levels"),
        Bad("oversized --input", ("submit", "ok", "--simple", "--input",
                                  json.dumps("x" * MAX_INPUT_BYTES)), INVALID,
            f"more than the limit of {MAX_INPUT_BYTES}"),
        Bad("--input NaN", ("submit", "ok", "--input", "NaN"), INVALID,
            "input is not JSON-serialisable"),
        Bad("--input from stdin, truncated", ("submit", "ok", "--input", "@-"), INVALID,
            "--input is not valid JSON", stdin="[1,"),
        Bad("empty --request-id", ("submit", "ok", "--request-id", ""), INVALID,
            "--request-id must not be empty"),
        Bad("request id with a lone surrogate", ("submit", "ok", "--request-id", "r\udc80"),
            INVALID, "workflow_request_id must be a non-empty string of valid Unicode"),
        Bad("--since not a time", ("list", "--since", "last tuesday"), INVALID,
            "--since 'last tuesday' is not a time"),
        Bad("--cursor not a cursor", ("list", "--cursor", "zzz"), INVALID,
            "cursor 'zzz' is not a cursor"),
        *_forged_cursors(),
        Bad("--workflow not a name", ("list", "--workflow", "a b"), INVALID, "name must match"),
        Bad("malformed activity id", ("retry", "not-an-id"), INVALID,
            "activity_exec_id 'not-an-id' is not of the form"),
        Bad("attempt 0", ("retry", "x:A:0"), INVALID, "activity_exec_id 'x:A:0' is not"),
        Bad("impossible --day", ("rejections", "--day", "2025-02-30"), INVALID,
            "--day '2025-02-30' is not YYYY-MM-DD"),
        Bad("emoji --day", ("rejections", "--day", "\U0001f426"), INVALID, "is not YYYY-MM-DD"),
        Bad("events file that holds no events", ("notifications", "--events-file",
                                                 f["not-events.jsonl"]), INVALID,
            "cannot read events file"),
        Bad("signal no activity waits for", ("signal", done, "paid"), INVALID,
            "waits for no signal"),
        Bad("signal name with a space", ("signal", done, "pa id"), INVALID,
            "signal name must match"),
        Bad("--payload not JSON", ("signal", done, "paid", "--payload", "{bad"), INVALID,
            "--payload is not valid JSON"),
        Bad("approve what is no approval", ("approve", completed_a, "--by", "al"), INVALID,
            "is not an approval"),
        Bad("approve by nobody", ("reject", completed_a, "--by", " "), INVALID,
            "by must name who decides"),
        Bad("approve a malformed id", ("approve", "not-an-id", "--by", "al"), INVALID,
            "is not of the form"),
        # -- conflict: exit 5 ------------------------------------------------------------
        Bad("cancel a COMPLETED run", ("cancel", done), CONFLICT, "already ended COMPLETED"),
        Bad("retry a COMPLETED attempt", ("retry", completed_a), CONFLICT,
            "only FAILED or TIMED_OUT attempts can be retried"),
        Bad("redrive a COMPLETED run", ("redrive", done, "--wait"), CONFLICT,
            "only a FAILED, CANCELLED or TIMED_OUT run can be redriven"),
        Bad("suspend a COMPLETED run", ("suspend", done), CONFLICT,
            "only a RUNNING workflow can be suspended"),
        Bad("resume a COMPLETED run", ("resume", done), CONFLICT,
            "only a SUSPENDED workflow can be resumed"),
        # -- DynamoDB: exit 6 ------------------------------------------------------------
        Bad("endpoint nobody listens on", ("status", done, "--endpoint-url",
                                           "http://127.0.0.1:9"), STORE, "Could not connect"),
        Bad("tables that do not exist", ("list", "--table-prefix", "no_such_tables_"), STORE,
            "whimbrel tables create"),
        # -- exec: 125, never one of CMD's own codes ----------------------------------------
        Bad("exec a malformed activity id", ("exec", "--activity-exec-id", "nope", "--",
                                             "true"), EXEC_ERROR, "is not of the form"),
        Bad("exec an unknown activity", ("exec", "--activity-exec-id", f"{UNKNOWN_WX}:A:1",
                                         "--", "true"), EXEC_ERROR, "no activity execution"),
    ]


def _stored(wb: Whimbrel) -> list[str]:
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    items: list[str] = []
    for spec in specs.TABLES:
        pages = ddb.get_paginator("scan").paginate(
            TableName=spec.table_name(wb.table_prefix), ConsistentRead=True)
        items += [json.dumps(i, sort_keys=True) for page in pages for i in page["Items"]]
    return sorted(items)


def _flat(text: str) -> str:
    """Rich's error box folded back into one line."""
    return " ".join(text.replace("│", " ").split())


def _with_json(args: tuple[str, ...]) -> list[str]:
    out = list(args)
    out.insert(out.index("--") if "--" in out else len(out), "--json")
    return out


def _check(case: Bad, result: Any, as_json: bool) -> list[str]:
    where = f"{case.label}{' --json' if as_json else ''}"
    wrong = []
    if result.exit_code != case.code:
        wrong.append(f"{where}: exit {result.exit_code}, not {case.code}: {result.stderr!r}"[:400])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        wrong.append(f"{where}: raised {type(result.exception).__name__}: {result.exception}")
    if "Traceback" in result.stderr + result.stdout:
        wrong.append(f"{where}: printed a traceback")
    if result.stdout.strip():
        wrong.append(f"{where}: printed on stdout: {result.stdout[:200]!r}")
    if not as_json:
        if _flat(case.words) not in _flat(result.stderr):
            wrong.append(f"{where}: stderr {result.stderr[:300]!r} lacks {case.words!r}")
        return wrong
    try:
        body = json.loads(result.stderr)
    except ValueError:
        return [*wrong, f"{where}: stderr is not one JSON object: {result.stderr[:300]!r}"]
    if not (isinstance(body, dict) and body.get("exit_code") == case.code
            and isinstance(body.get("error"), str)
            and _flat(case.words) in _flat(str(body.get("message")))):
        wrong.append(f"{where}: JSON error {body!r} lacks {case.words!r} or exit code"[:400])
    return wrong


def test_bad_cli_arguments(run: Run, wb: Whimbrel, done: str, files: dict[str, str]) -> None:
    cases = corpus(files, done)
    assert len(cases) >= 30
    before = _stored(wb)
    wrong: list[str] = []
    for case in cases:
        for as_json in (False, True):
            args = _with_json(case.args) if as_json else list(case.args)
            result = run(*args, code=None, input=case.stdin)
            wrong += _check(case, result, as_json)
        after = _stored(wb)
        if after != before:
            wrong.append(f"{case.label}: changed what was stored")
            before = after
    assert wrong == [], "\n".join(wrong)
    assert _stored(wb) == before
    print(f"\nbad CLI invocations tried: {len(cases)} (each also with --json)")


def test_usage_error_json_keeps_the_commands_own_json_flag(run: Run, wb: Whimbrel) -> None:
    """``--json`` after ``exec --`` belongs to CMD: a usage error stays human."""
    result = run("exec", "--kill-grace", "-1", "--", "echo", "--json", code=USAGE)
    assert result.stderr.startswith("error:") and "--kill-grace" in _flat(result.stderr)
    assert "Usage: whimbrel exec" in result.stderr  # the usage, after what was wrong
