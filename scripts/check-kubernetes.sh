#!/usr/bin/env bash
# Checks the Kubernetes manifests offline, the way CI does: renders the base
# and every overlay under deploy/kubernetes with `kubectl kustomize`,
# validates each rendered object against the Kubernetes schemas bundled with
# kubernetes-validate (strict: an unknown field is an error), and runs
# checkov's Kubernetes policies, which must report no failed check (each
# exception is a `checkov.io/skip` annotation with its reason, next to a
# comment). Installs kubectl, kubernetes-validate and checkov when missing,
# and fails when it cannot. Usage: scripts/check-kubernetes.sh
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
    echo "scripts/check-kubernetes.sh: $*" >&2
    exit 1
}

# kubectl (with its built-in kustomize): Debian's `kubectl` package where the
# Kubernetes apt repository is configured, else Debian's own `kubernetes-client`.
if ! command -v kubectl >/dev/null; then
    [ "$(id -u)" -eq 0 ] || fail "kubectl is missing; install it (apt-get install -y kubectl) or run as root"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubectl >/dev/null 2>&1 \
        || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null 2>&1 \
        || fail "cannot install kubectl (apt packages kubectl or kubernetes-client)"
fi
kubectl kustomize --help >/dev/null 2>&1 || fail "this kubectl has no kustomize; install kubectl 1.27 or later"

# The schema validator and the policy checker, from PyPI, in a virtual
# environment of their own: checkov pins old versions of common packages
# (packaging, botocore) that would clash with the test suite's Python tools.
venv="${XDG_CACHE_HOME:-$HOME/.cache}/tool-modules/kubernetes-checks"
if [ ! -x "$venv/bin/pip" ]; then
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
        [ "$(id -u)" -eq 0 ] || fail "python3 -m venv does not work; install python3-venv"
        rm -rf "$venv"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null 2>&1 \
            || fail "cannot install python3-venv"
        python3 -m venv "$venv" || fail "cannot create $venv"
    fi
fi
PATH="$venv/bin:$PATH"
python_tool() {
    local command=$1 package=$2
    if [ ! -x "$venv/bin/$command" ]; then
        "$venv/bin/pip" install --quiet "$package" || fail "cannot install $package into $venv"
        [ -x "$venv/bin/$command" ] || fail "$package is installed but $venv/bin/$command is not there"
    fi
}
python_tool kubernetes-validate "kubernetes-validate>=1.33"
python_tool checkov "checkov>=3.2"

rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT
# Everything applied as a whole: the base and each overlay.
targets=(deploy/kubernetes/base deploy/kubernetes/overlays/*/)
for target in "${targets[@]}"; do
    target=${target%/}
    out="$rendered/$(echo "$target" | tr / _).yaml"
    kubectl kustomize "$target" >"$out" || fail "$target does not render"
    objects=$(grep -c '^kind:' "$out")
    echo "$target: $objects objects"
    kubernetes-validate --strict --quiet "$out" || fail "$target: objects do not match the Kubernetes schemas (above)"
done

# --skip-download: no network; the checks ship with the package.
checkov --directory "$rendered" --framework kubernetes --quiet --compact --skip-download \
    || fail "checkov found failed checks (above); fix them, or skip one with a checkov.io/skip annotation and say why"
echo "scripts/check-kubernetes.sh: every manifest renders, validates and passes the policy checks"
