#!/usr/bin/env bash
# The main job: builds the orchestrator and the sample modules (research,
# file_manager, notes, skills, scheduler, code_runner), starts each module on a free loopback port with its
# embedded defaults (files and SQLite databases under ./data, no Redis), then the
# orchestrator pointing at them through MODULE_SERVICES. Runs in the
# foreground; Ctrl-C stops everything.
#
# Usage: scripts/run.sh
# Environment: PORT (orchestrator, default 8080 or the next free port),
# FILES_ROOT, NOTES_DB, SKILLS_DIR, SCHEDULER_DB, DELIVERY_URL, DELIVERY_SECRET, SEARXNG_URL, SERVICE_AUTH_TOKEN, ORCHESTRATOR_API_TOKEN,
# REDIS_URL are passed on when set.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --locked -p research -p file_manager -p notes -p scheduler -p skills -p code_runner -p orchestrator
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin="$target_dir/debug"

# Whether something listens on 127.0.0.1:$1.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# The first port from $1 up that nothing listens on.
free_port() {
    local port=$1
    while listening "$port"; do port=$((port + 1)); done
    echo "$port"
}

pids=()
stop() {
    trap - INT TERM EXIT
    ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap stop INT TERM EXIT

# Starts binary $1 with the port in $2 and waits until it listens.
start() {
    local name=$1 port=$2
    shift 2
    env HOST=127.0.0.1 PORT="$port" "$@" &
    pids+=($!)
    for _ in $(seq 100); do
        listening "$port" && return 0
        kill -0 "${pids[-1]}" 2>/dev/null || { echo "scripts/run.sh: $name exited during start-up" >&2; exit 1; }
        sleep 0.1
    done
    echo "scripts/run.sh: $name did not listen on port $port within 10 s" >&2
    exit 1
}

export FILES_ROOT="${FILES_ROOT:-$PWD/data/files}"
export NOTES_DB="${NOTES_DB:-$PWD/data/notes.db}"
export SKILLS_DIR="${SKILLS_DIR:-$PWD/modules/skills/examples}"
export SCHEDULER_DB="${SCHEDULER_DB:-$PWD/data/scheduler.db}"
research_port=$(free_port 8001)
start research "$research_port" "$bin/research"
file_manager_port=$(free_port $((research_port + 1)))
start file_manager "$file_manager_port" "$bin/file_manager"
notes_port=$(free_port $((file_manager_port + 1)))
start notes "$notes_port" "$bin/notes"
skills_port=$(free_port $((notes_port + 1)))
start skills "$skills_port" "$bin/skills"
scheduler_port=$(free_port $((skills_port + 1)))
start scheduler "$scheduler_port" "$bin/scheduler"
# code_runner needs bubblewrap (apt-get install -y bubblewrap); without a working sandbox it still
# starts, its /health says why, and it refuses to run code.
code_runner_port=$(free_port $((scheduler_port + 1)))
start code_runner "$code_runner_port" "$bin/code_runner"

orchestrator_port=${PORT:-$(free_port 8080)}
if listening "$orchestrator_port"; then
    echo "scripts/run.sh: port $orchestrator_port is taken; set PORT to a free one" >&2
    exit 1
fi
export MODULE_SERVICES="{\"research\": \"http://127.0.0.1:$research_port\", \"file_manager\": \"http://127.0.0.1:$file_manager_port\", \"notes\": \"http://127.0.0.1:$notes_port\", \"skills\": \"http://127.0.0.1:$skills_port\", \"scheduler\": \"http://127.0.0.1:$scheduler_port\", \"code_runner\": \"http://127.0.0.1:$code_runner_port\"}"
start orchestrator "$orchestrator_port" "$bin/orchestrator" serve

cat <<MSG

  orchestrator   http://127.0.0.1:$orchestrator_port   (modules: GET /modules, tools: GET /tools?permission=user)
  research       http://127.0.0.1:$research_port
  file_manager   http://127.0.0.1:$file_manager_port   (files in $FILES_ROOT)
  notes          http://127.0.0.1:$notes_port   (notes in $NOTES_DB)
  skills         http://127.0.0.1:$skills_port   (skills in $SKILLS_DIR)
  scheduler      http://127.0.0.1:$scheduler_port   (tasks in $SCHEDULER_DB; set DELIVERY_URL and DELIVERY_SECRET to deliver them)
  code_runner    http://127.0.0.1:$code_runner_port   (Python in a bubblewrap sandbox; each call needs approval)

  Press Ctrl-C to stop everything.

MSG
# Until Ctrl-C, or until one of them exits.
wait -n
