#!/usr/bin/env bash
# Runs every test of the workspace, the way CI does. Installs what the tests
# need (redis-server, podman, curl, procps, bubblewrap, chromium, prometheus, pydantic) when it is missing. Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

apt_updated=0
# Installs Debian packages, running `apt-get update` once first.
apt_install() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "scripts/test.sh: missing $*; install them (apt-get install -y $*) or run as root" >&2
        exit 2
    fi
    if [ "$apt_updated" -eq 0 ]; then
        apt-get update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v python3 >/dev/null || missing+=(python3)
# scripts/container-test.sh calls the running images with curl.
command -v curl >/dev/null || missing+=(curl)
# Tests signal processes with the external kill (not the shell's builtin), from procps.
type -P kill >/dev/null || missing+=(procps)
# code_runner's sandbox; the console's browser test (chromium driven by chromedriver).
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
# The /metrics tests scrape with a real Prometheus.
command -v prometheus >/dev/null || missing+=(prometheus)
if ((${#missing[@]})); then
    apt_install "${missing[@]}"
fi

# The SDK's compatibility test validates our JSON under pydantic (v2) models.
if ! python3 -c 'import sys, pydantic; sys.exit(pydantic.VERSION < "2")' 2>/dev/null; then
    python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
    python3 -m pip install --quiet "pydantic>=2,<3" 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages "pydantic>=2,<3"
fi

# The orchestrator's OpenAPI tests check its document with an independent
# validator and fuzz the API from it with Schemathesis (`st`).
if ! python3 -c 'import openapi_spec_validator' 2>/dev/null || ! command -v st >/dev/null; then
    python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
    python3 -m pip install --quiet "openapi-spec-validator>=0.7" "schemathesis>=4,<5" 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages "openapi-spec-validator>=0.7" "schemathesis>=4,<5"
fi

# In CI a missing service fails the tests instead of skipping them.
export REQUIRE_SERVICES=1
# A CI run builds once from scratch: incremental caches would only cost disk.
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL=0
fi

# The lint gate: formatting (rustfmt.toml) and clippy with every warning an error.
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The API docs: every intra-doc link resolves and none points at a private item.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

# Every binary, example (the SDK's demo, which other packages' tests start) and
# bench. Not the test executables: `cargo test` links those, and building them
# here too linked each one twice (~5 GB more of `target/`).
cargo build --workspace --bins --examples --benches --locked
# The Kubernetes manifests, rendered and checked offline (schemas, policies).
scripts/check-kubernetes.sh
cargo test --workspace --locked

# Images of the modules and the orchestrator, run with podman, checked end to end.
scripts/container-test.sh
