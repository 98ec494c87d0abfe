#!/usr/bin/env bash
# Runs every test of the workspace, the way CI does. Installs what the tests
# need (redis-server, podman) when it is missing. Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v podman >/dev/null || missing+=(podman runc)
if ((${#missing[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
        echo "scripts/test.sh: missing ${missing[*]}; install them (apt-get install -y ${missing[*]}) or run as root" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The SDK's compatibility test validates our JSON under pydantic models.
python3 -c "import pydantic" 2>/dev/null || python3 -m pip install --quiet "pydantic>=2,<3"

# In CI a missing service fails the tests instead of skipping them.
export REQUIRE_SERVICES=1

cargo build --workspace --all-targets --locked
cargo test --workspace --locked
