#!/usr/bin/env bash
# Proves the container path end to end with podman: builds the research,
# file_manager and orchestrator images (deploy/Containerfile: FROM scratch,
# one static binary each), starts them with --network host on free loopback
# ports, runs the contract tests against both module containers, and calls
# one tool through the orchestrator container (GET /tools, POST /execute).
# Then the code_runner image (deploy/Containerfile.code_runner: python3 and
# bubblewrap from the host): its sandbox must work in the container with the
# podman flags the README gives, pass the contract tests and run code.
# Containers and test images are always removed at the end.
#
# Usage: scripts/container-test.sh
# Needs podman, runc and curl (scripts/test.sh installs them).
# Without them it skips, unless REQUIRE_SERVICES=1, when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "container-test: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

missing=()
for tool in podman runc curl; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
    if [ "${REQUIRE_SERVICES:-}" = 1 ]; then
        fail "missing ${missing[*]} (apt-get install -y ${missing[*]}); REQUIRE_SERVICES=1 makes that a failure"
    fi
    say "SKIPPED: missing ${missing[*]} (apt-get install -y ${missing[*]})"
    exit 0
fi

# Podman's default runtime and ulimits are refused on these machines.
conf=/etc/containers/containers.conf
if [ ! -e "$conf" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        fail "$conf is missing; as root, write it with runtime = \"runc\" and default_ulimits (see README.md, \"Deploy\")"
    fi
    mkdir -p "$(dirname "$conf")"
    cat >"$conf" <<'EOF'
[engine]
runtime = "runc"

[containers]
default_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]
EOF
    say "wrote $conf"
fi

# One static build of the three binaries (reused when nothing changed), and
# the contract-tests command for the host.
triple=x86_64-unknown-linux-gnu
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
release_dir=$target_dir/$triple/release
RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked --target "$triple" -p research -p file_manager -p orchestrator -p code_runner
cargo build --locked -p contract-tests
contract_tests=$target_dir/debug/contract-tests

run_id=ct-$$
images=()
containers=()
work=$(mktemp -d)
cleanup() {
    local status=$?
    if ((status != 0)) && ((${#containers[@]})); then
        for name in "${containers[@]}"; do
            say "--- logs of $name"
            podman logs "$name" 2>&1 | tail -n 20 >&2 || true
        done
    fi
    if ((${#containers[@]})); then
        podman rm -f -t 2 "${containers[@]}" >/dev/null 2>&1 || say "could not remove containers ${containers[*]}"
    fi
    if ((${#images[@]})); then
        podman rmi -f "${images[@]}" >/dev/null 2>&1 || say "could not remove images ${images[*]}"
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT

for binary in research file_manager orchestrator; do
    image=localhost/tool-modules-$binary:$run_id
    images+=("$image")
    podman build --quiet --layers=false -f deploy/Containerfile --build-arg "BINARY=$binary" -t "$image" "$release_dir" >/dev/null
    size=$(podman image inspect --format '{{.Size}}' "$image")
    say "image $binary: $((size / 1024)) KiB ($(du -k "$release_dir/$binary" | cut -f1) KiB binary)"
done

token=container-test-token-$RANDOM$RANDOM

# `start BINARY [PODMAN-OPTION...] [-- ARG...]` starts a container on the
# host network; PORT=0 lets the binary pick a free port, read back from its
# first log line.
start() {
    local binary=$1 name=$run_id-$1 options=()
    shift
    while (($#)) && [ "$1" != -- ]; do
        options+=("$1")
        shift
    done
    (($#)) && shift
    containers+=("$name")
    podman run -d --name "$name" --network host \
        -e HOST=127.0.0.1 -e PORT=0 -e LOG_FORMAT=json -e SERVICE_AUTH_TOKEN="$token" \
        "${options[@]}" "localhost/tool-modules-$binary:$run_id" "$@" >/dev/null
}

# Prints the port that container $1 logged as its listening address.
port_of() {
    local name=$run_id-$1 port
    for _ in $(seq 100); do
        port=$(podman logs "$name" 2>&1 | grep -o '"address":"[^"]*"' | head -n 1 | grep -o '[0-9]*"$' | tr -d '"') || true
        if [ -n "$port" ]; then
            echo "$port"
            return
        fi
        [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] || fail "$1 exited before listening"
        sleep 0.1
    done
    fail "$1 did not log a listening address within 10 s"
}

# `healthcheck BINARY FLAG` runs the image's own health probe inside its
# container, as compose's healthcheck does (PORT=0 here, so name the port).
healthcheck() {
    podman exec -e PORT="$(port_of "$1")" "$run_id-$1" /app "$2" || fail "$1: /app $2 inside the container"
}

start research
start file_manager --tmpfs /data:rw,size=64m,mode=1777 -e FILES_ROOT=/data/files
research_url=http://127.0.0.1:$(port_of research)
file_manager_url=http://127.0.0.1:$(port_of file_manager)

healthcheck research --healthcheck
healthcheck file_manager --healthcheck

say "contract tests against the research and file_manager containers"
"$contract_tests" --url "$research_url" --url "$file_manager_url" --token "$token" ||
    fail "contract tests against $research_url and $file_manager_url"

# At least 32 characters, as the orchestrator requires of its service token.
api_token=container-test-api-token-$(printf '%05d%05d' "$RANDOM" "$RANDOM")
start orchestrator -e ORCHESTRATOR_API_TOKEN="$api_token" \
    -e MODULE_SERVICES="{\"research\": \"$research_url\", \"file_manager\": \"$file_manager_url\"}" -- serve
orchestrator_url=http://127.0.0.1:$(port_of orchestrator)
healthcheck orchestrator healthcheck
auth=(-H "Authorization: Bearer $api_token")

# The orchestrator discovers the modules in the background: wait for the tool.
tool=research.summarize_text
for _ in $(seq 100); do
    tools=$(curl -fsS "${auth[@]}" "$orchestrator_url/tools?permission=owner") || fail "GET /tools"
    grep -q "\"$tool\"" <<<"$tools" && break
    sleep 0.1
done
grep -q "\"$tool\"" <<<"$tools" || fail "GET /tools never listed $tool: ${tools:0:400}"
grep -q '"file_manager\.' <<<"$tools" || fail "GET /tools lists no file_manager tool: ${tools:0:400}"

text="Containers hold one static binary. The binary serves a module. A module answers tool calls from the orchestrator."
result=$(curl -fsS "${auth[@]}" "$orchestrator_url/execute" -H 'content-type: application/json' \
    -d "{\"tool_name\": \"$tool\", \"arguments\": {\"text\": \"$text\", \"max_sentences\": 1}}") ||
    fail "POST /execute"
grep -q '"success":true' <<<"$result" || fail "POST /execute of $tool did not succeed: $result"
grep -q '"total_sentences":3' <<<"$result" || fail "POST /execute of $tool answered unexpectedly: $result"
say "called $tool through the orchestrator container: $result"

# `code_runner_rootfs DIR` writes DIR/code-runner-rootfs.tar: the host's
# bwrap, sh and python3 with the shared libraries they (and Python's
# extension modules) load, the standard library without its tests, the
# usrmerge links and an empty /tmp.
code_runner_rootfs() {
    local dir=$1 python stdlib list=$1/files extra=$1/extra
    python=$(readlink -f /usr/bin/python3)
    stdlib=/usr/lib/$(basename "$python")
    [ -x /usr/bin/bwrap ] && [ -d "$stdlib" ] || fail "code_runner's image needs the host's python3 and bubblewrap (apt-get install -y python3 bubblewrap)"
    : >"$list"
    local file named
    for file in /usr/bin/bwrap /usr/bin/sh /usr/bin/dash /usr/bin/python3 $(
        ldd /usr/bin/bwrap /usr/bin/dash "$python" "$stdlib"/lib-dynload/*.so 2>/dev/null |
            awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}' | sort -u
    ); do
        named="$(readlink -f "$(dirname "$file")")/$(basename "$file")"
        echo "${named#/}" >>"$list"
        named=$(readlink -f "$file")
        echo "${named#/}" >>"$list"
    done
    echo "${stdlib#/}" >>"$list"
    sort -u -o "$list" "$list"
    mkdir -p "$extra/tmp"
    chmod 1777 "$extra/tmp"
    tar -C / --exclude="${stdlib#/}/test" --exclude=__pycache__ -cf "$dir/code-runner-rootfs.tar" \
        bin lib lib64 sbin -T "$list" -C "$extra" tmp
}

context=$work/code_runner
mkdir -p "$context"
code_runner_rootfs "$context"
cp "$release_dir/code_runner" "$context/code_runner"
image=localhost/tool-modules-code_runner:$run_id
images+=("$image")
podman build --quiet --layers=false -f deploy/Containerfile.code_runner -t "$image" "$context" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$image")
say "image code_runner: $((size / 1024)) KiB (python3, bubblewrap and the binary)"
# User namespaces inside the container: the default seccomp profile refuses
# them, and a /proc with masked paths cannot be mounted again in a sandbox.
# The container's user gets no writable cgroup (podman mounts /sys/fs/cgroup
# read-only), so the module is told to accept limits per process; it logs
# "NO CGROUP PER RUN" at start, and without the setting refuses code.
start code_runner --security-opt seccomp=unconfined --security-opt unmask=ALL -e CODE_PER_PROCESS_LIMITS_ONLY=true
code_runner_url=http://127.0.0.1:$(port_of code_runner)
# `--healthcheck` fails unless /health is 200, which needs a working sandbox.
healthcheck code_runner --healthcheck
say "contract tests against the code_runner container"
"$contract_tests" --url "$code_runner_url" --token "$token" || fail "contract tests against $code_runner_url"
result=$(curl -fsS -H "Authorization: Bearer $token" "$code_runner_url/execute" -H 'content-type: application/json' \
    -d '{"tool_name": "code_runner.execute_code", "arguments": {"code": "import socket\ntry:\n    socket.create_connection((\"127.0.0.1\", '"${code_runner_url##*:}"'), timeout=2)\nexcept OSError as error:\n    print(\"no network:\", type(error).__name__)"}, "user_id": "container-test"}') ||
    fail "POST /execute to code_runner"
grep -q '"stdout":"no network: ConnectionRefusedError\\n"' <<<"$result" || fail "code_runner in its container answered unexpectedly: $result"
say "ran code in the code_runner container's sandbox: $result"
say "passed"
