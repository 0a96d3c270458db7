"""The Lambda code asset, bundled on this machine without Docker.

The asset is ``whimbrel/`` + ``lambdas/`` + the project's runtime dependencies,
installed by pip as binary wheels for the Lambda platform (arm64, the runtime's
Python), + the user's workflow code when the construct is given some (its directory's
content at the asset's root, where the functions import ``WHIMBREL_MODULES`` from).
pip can do that from any host: ``--platform/--python-version --only-binary=:all:``
selects wheels instead of building anything.

Installing dependencies is the slow part, so the installed ``site-packages`` folder
is cached by a key of (pinned requirements, platform, Python version). The sources
are copied fresh on every bundle, so editing ``whimbrel/`` never re-runs pip. The
asset hash is computed from that key plus the sources (the user's code included), so
CDK re-bundles exactly when either changes.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

#: Bump to invalidate every cached bundle after a change to how bundles are built.
_BUNDLE_FORMAT = "1"

#: Packages every Lambda Python runtime already has on its path. pip still installs
#: them (boto3 is a dependency of the project) but they are pruned: botocore alone is
#: ~90 MB.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})

#: The folders copied from the source root into the asset, next to the dependencies.
SOURCE_PACKAGES = ("whimbrel", "lambdas")

#: What of the user's workflow code is not bundled: caches, and hidden entries (a
#: ``.git``, a ``.venv``), and a cloud assembly (``cdk.out``, which holds this asset).
_NOT_BUNDLED = ("__pycache__", "*.pyc", ".*", "cdk.out")

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?")


def default_source_root() -> Path:
    """The checkout this package lives in (``infra/whimbrel_infra`` → two levels up)."""
    return Path(__file__).resolve().parents[2]


def newest_python_runtime() -> lambda_.Runtime:
    """The newest ``PYTHON_3_x`` runtime the installed aws-cdk-lib knows about."""
    found: list[tuple[int, lambda_.Runtime]] = []
    for attr in dir(lambda_.Runtime):
        match = re.fullmatch(r"PYTHON_3_(\d+)", attr)
        if match:
            found.append((int(match.group(1)), getattr(lambda_.Runtime, attr)))
    return max(found, key=lambda pair: pair[0])[1]


def runtime_python_version(runtime: lambda_.Runtime) -> str:
    """``python3.14`` → ``3.14`` (what pip's ``--python-version`` wants)."""
    match = re.fullmatch(r"python(\d+\.\d+)", runtime.name)
    if not match:
        raise ValueError(f"{runtime.name!r} is not a Python Lambda runtime")
    return match.group(1)


def lambda_platforms(architecture: lambda_.Architecture) -> tuple[str, ...]:
    """pip ``--platform`` tags whose wheels run on the Lambda runtime.

    Lambda's python3.12+ runtimes run Amazon Linux 2023 (glibc 2.34), so newer
    ``manylinux_2_28`` wheels are fine too; ``manylinux2014`` is what most projects ship.
    """
    # Compare names: jsii hands out a new proxy object for each enum-like static.
    arch = {"arm64": "aarch64", "x86_64": "x86_64"}[architecture.name]
    return (f"manylinux2014_{arch}", f"manylinux_2_28_{arch}", f"manylinux_2_34_{arch}")


def host_platforms() -> tuple[str, ...]:
    """pip ``--platform`` tags for this machine (used by the tests' import check)."""
    machine = os.uname().machine
    arch = {"arm64": "aarch64"}.get(machine, machine)
    return (f"manylinux2014_{arch}", f"manylinux_2_28_{arch}")


def runtime_requirements(source_root: Path) -> tuple[str, ...]:
    """The project's runtime dependencies, pinned to what this environment tested.

    Read from ``[project].dependencies`` in ``pyproject.toml`` (the one list of them).
    Each is pinned to the version installed here, so the Lambda runs the versions the
    test suite ran; a dependency that is not installed keeps its declared range.
    Packages the Lambda runtime provides are left out.
    """
    with (source_root / "pyproject.toml").open("rb") as fh:
        declared: list[str] = tomllib.load(fh)["project"]["dependencies"]
    pinned: list[str] = []
    for requirement in declared:
        match = _NAME.match(requirement)
        if not match:
            raise ValueError(f"cannot read the requirement {requirement!r} in pyproject.toml")
        name, extras = match.group(1), match.group(2) or ""
        if _canonical(name) in RUNTIME_PROVIDED:
            continue
        try:
            pinned.append(f"{name}{extras}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pinned.append(requirement.strip())
    return tuple(sorted(pinned))


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class LambdaBundle:
    """How to build the code asset; call :meth:`build` to write one into a folder.

    Attributes:
        source_root: Folder holding ``whimbrel/``, ``lambdas/`` and ``pyproject.toml``.
        python_version: Target interpreter, e.g. ``"3.14"``.
        platforms: pip ``--platform`` tags, e.g. ``("manylinux2014_aarch64",)``.
        cache_dir: Where installed dependency folders are kept between builds.
        requirements: Pinned requirements; empty means :func:`runtime_requirements`.
        workflow_code: The user's code directory, copied to the asset's root (None:
            none).
    """

    source_root: Path
    python_version: str
    platforms: Sequence[str]
    cache_dir: Path
    requirements: Sequence[str] = field(default_factory=tuple)
    workflow_code: Path | None = None

    @classmethod
    def for_lambda(
        cls,
        runtime: lambda_.Runtime,
        architecture: lambda_.Architecture,
        *,
        source_root: Path | None = None,
        cache_dir: Path | None = None,
        workflow_code: Path | None = None,
    ) -> LambdaBundle:
        root = (source_root or default_source_root()).resolve()
        return cls(
            source_root=root,
            python_version=runtime_python_version(runtime),
            platforms=lambda_platforms(architecture),
            cache_dir=cache_dir or default_cache_dir(root),
            workflow_code=workflow_code,
        )

    def __post_init__(self) -> None:
        for name in (*SOURCE_PACKAGES, "pyproject.toml"):
            if not (self.source_root / name).exists():
                raise FileNotFoundError(
                    f"{self.source_root / name} not found: source_root must be the Whimbrel "
                    "checkout holding whimbrel/, lambdas/ and pyproject.toml"
                )
        if not self.requirements:
            object.__setattr__(self, "requirements", runtime_requirements(self.source_root))

    @property
    def dependencies_key(self) -> str:
        """Identifies one installed dependency folder in the cache."""
        digest = hashlib.sha256()
        for part in (_BUNDLE_FORMAT, self.python_version, *self.platforms, *self.requirements):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()[:24]

    def asset_hash(self) -> str:
        """Changes exactly when the bundle's content would: dependencies or sources."""
        digest = hashlib.sha256(self.dependencies_key.encode())
        for root, path in self._source_files():
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
        return digest.hexdigest()

    def build(self, output_dir: Path) -> None:
        """Write the asset into ``output_dir`` (which may exist and be empty)."""
        output_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(
            self.dependencies_dir(), output_dir, dirs_exist_ok=True, copy_function=_link_or_copy
        )
        for package in SOURCE_PACKAGES:
            shutil.copytree(
                self.source_root / package,
                output_dir / package,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                dirs_exist_ok=True,
            )
        if self.workflow_code is not None:
            shutil.copytree(self.workflow_code, output_dir,
                            ignore=shutil.ignore_patterns(*_NOT_BUNDLED), dirs_exist_ok=True)

    def dependencies_dir(self) -> Path:
        """The cached folder of installed dependencies, installing it on first use."""
        final = self.cache_dir / f"deps-{self.dependencies_key}"
        if final.is_dir():
            return final
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with _exclusive(self.cache_dir / f"deps-{self.dependencies_key}.lock"):
            if final.is_dir():  # another process built it while we waited
                return final
            staging = self.cache_dir / f"tmp-{uuid.uuid4().hex}"
            try:
                self._pip_install(staging)
                _prune_runtime_provided(staging)
                staging.rename(final)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return final

    def _pip_install(self, target: Path) -> None:
        command = [
            sys.executable, "-m", "pip", "install",
            "--quiet", "--disable-pip-version-check", "--no-compile",
            "--target", str(target),
            "--python-version", self.python_version,
            "--implementation", "cp",
            "--only-binary=:all:",
            *(arg for platform in self.platforms for arg in ("--platform", platform)),
            *self.requirements,
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                "installing the Lambda dependencies failed "
                f"(python {self.python_version}, {', '.join(self.platforms)}):\n"
                f"$ {' '.join(command)}\n{result.stdout}{result.stderr}"
            )

    def _source_files(self) -> Iterator[tuple[Path, Path]]:
        """(root, file) of every source file bundled: Whimbrel's, then the user's (the
        paths relative to their root are where they land in the asset)."""
        for package in SOURCE_PACKAGES:
            for path in sorted((self.source_root / package).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    yield self.source_root, path
        if self.workflow_code is not None:
            for path in sorted(self.workflow_code.rglob("*")):
                parts = path.relative_to(self.workflow_code).parts
                if path.is_file() and not any(
                        fnmatch.fnmatch(part, pattern) for part in parts
                        for pattern in _NOT_BUNDLED):
                    yield self.workflow_code, path


def default_cache_dir(source_root: Path) -> Path:
    configured = os.environ.get("WHIMBREL_BUNDLE_CACHE")
    if configured:
        return Path(configured)
    return source_root / ".cache" / "lambda-bundles"


def _prune_runtime_provided(site: Path) -> None:
    for entry in site.iterdir():
        # A package folder (``botocore``) or its metadata (``botocore-1.35.0.dist-info``).
        name = entry.name.split("-")[0] if entry.name.endswith(".dist-info") else entry.name
        if _canonical(name) in RUNTIME_PROVIDED:
            shutil.rmtree(entry)
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts are useless here


def _link_or_copy(src: str, dst: str) -> object:
    # Hard links make a cached bundle cost nothing to stage; fall back across devices.
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Serialise builders of one cache entry (pytest-xdist workers, parallel synths)."""
    try:
        import fcntl
    except ImportError:  # Windows: the atomic rename in dependencies_dir still protects
        yield
        return
    with lock_path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@jsii.implements(ILocalBundling)
class _LocalBundling:
    """CDK's hook for bundling without Docker: ``try_bundle`` returning True means done."""

    def __init__(self, bundle: LambdaBundle) -> None:
        self._bundle = bundle

    def try_bundle(self, output_dir: str, *args: Any, **kwargs: Any) -> bool:
        # Raise rather than return False on failure: False makes CDK fall back to Docker.
        self._bundle.build(Path(output_dir))
        return True


def lambda_code(bundle: LambdaBundle, runtime: lambda_.Runtime) -> lambda_.Code:
    """A code asset built by ``bundle``; reuse one for all functions so it uploads once."""
    return lambda_.Code.from_asset(
        str(bundle.source_root / "lambdas"),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=bundle.asset_hash(),
        bundling=BundlingOptions(
            # Required by the API but never pulled: local bundling always succeeds or raises.
            image=runtime.bundling_image,
            local=_LocalBundling(bundle),
        ),
    )
