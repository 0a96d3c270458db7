"""Values of the options several commands share: JSON input and ``--attr`` pairs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from whimbrel.cli.app import CliError, ExitCode


def parse_input(raw: str | None, option: str = "--input") -> Any:
    """``--input`` (or ``option``) value: JSON text, ``@file.json`` or ``@-`` for stdin."""
    if raw is None:
        return None
    text = raw
    if raw.startswith("@"):
        where = raw[1:]
        try:
            text = sys.stdin.read() if where == "-" else Path(where).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot read input file {where!r}: {exc.strerror}",
                           ExitCode.INVALID) from exc
        except UnicodeDecodeError as exc:
            raise CliError(f"input file {where!r} is not UTF-8 text ({exc.reason} at byte "
                           f"{exc.start})", ExitCode.INVALID) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{option} is not valid JSON: {exc}", ExitCode.INVALID) from exc
    except RecursionError:
        raise CliError(f"{option} is nested too deeply", ExitCode.INVALID) from None


def attributes_of(pairs: list[str] | None) -> dict[str, Any] | None:
    """``--attr KEY=VALUE`` options as attributes (a number where the value is one)."""
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise CliError(f"--attr {pair!r} is not KEY=VALUE", ExitCode.USAGE)
        out[key] = _number(value)
    return out


def _number(text: str) -> Any:
    try:
        return int(text) if text.lstrip("-").isdigit() else text
    except ValueError:
        return text
