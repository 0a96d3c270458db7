"""``whimbrel --version``, Typer's shell completion, and help without ``<bool>`` on
flags: the installed console script, as a user's shell runs it."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from whimbrel.cli import app

WHIMBREL = str(Path(sys.executable).with_name("whimbrel"))


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([WHIMBREL, *args], env={**os.environ, "COLUMNS": "120", **env},
                          capture_output=True, text=True, timeout=120, check=False)


def test_version_prints_the_installed_version() -> None:
    done = _run("--version")
    assert (done.returncode, done.stdout) == (
        0, f"whimbrel {importlib.metadata.version('whimbrel')}\n")


def test_bash_completion_completes_commands_and_options() -> None:
    done = _run(_WHIMBREL_COMPLETE="complete_bash", COMP_WORDS="whimbrel sta",
                COMP_CWORD="1")
    assert done.returncode == 0 and done.stdout.split() == ["status"], done
    done = _run(_WHIMBREL_COMPLETE="complete_bash", COMP_WORDS="whimbrel status --wa",
                COMP_CWORD="2")
    assert "--watch" in done.stdout.split(), done
    # For the shell it runs in (Typer asks the process tree), as a user types it.
    script = subprocess.run(["bash", "-c", f"{WHIMBREL} --show-completion"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert script.returncode == 0 and "_whimbrel_completion" in script.stdout, script


def test_help_shows_no_bool_metavar_on_flags() -> None:
    for args in (["--help"], ["status", "--help"], ["pools", "set", "--help"]):
        done = _run(*args)
        assert done.returncode == 0, done
        assert "<bool>" not in done.stdout, (args, done.stdout)


def test_no_help_text_names_an_issue_number() -> None:
    def walk(group: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        out = [path]
        for name, sub in getattr(group, "commands", {}).items():
            out += walk(sub, (*path, name))
        return out

    runner = CliRunner()
    named = [" ".join(path) for path in walk(typer.main.get_command(app))
             if re.search(r"\bissues? \d+", runner.invoke(app, [*path, "--help"]).stdout, re.I)]
    assert named == []


def test_usage_errors_look_like_every_other_error() -> None:
    """What was wrong on the first line (``error: ...``, as a failed command says it),
    then the usage and what to run for help: no boxed panel of a second style."""
    runner = CliRunner()
    for args, wrong in ((["list", "--limit", "x"], "Invalid value for '--limit'"),
                        (["nosuch"], "No such command 'nosuch'"),
                        (["events"], "Missing argument")):
        done = runner.invoke(app, args)
        assert done.exit_code == 2, done.output
        first, *rest = done.stderr.splitlines()
        assert first.startswith(f"error: {wrong}"), done.stderr
        assert "╭" not in done.stderr
        assert rest[-1].startswith("Run 'whimbrel") and rest[-1].endswith(
            "-h' for its options and an example."), done.stderr
