#!/usr/bin/env bash
# Shared by kind/up.sh and kind/down.sh: pins, paths and small helpers.
# shellcheck disable=SC2034 # the variables are used by the scripts that source this file
set -euo pipefail
kind_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$kind_dir/.." && pwd)
# shellcheck source=kind/versions.env
source "$kind_dir/versions.env"
cluster=vtsnap-e2e
state=/tmp/vtsnap-kind # the host paths kind/cluster.yaml mounts into the nodes
out=$root/target/kind # downloaded tools, kubeconfig, logs
workers=(1 2 3)
export KUBECONFIG=$out/kubeconfig

log() { echo "kind: $*" >&2; }
die() { echo "kind: $*" >&2; exit 1; }

# Root for LVM, losetup and systemd-run: sudo unless already root.
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

need() { # command, how to get it
  command -v "$1" >/dev/null 2>&1 || die "$1 is missing: $2"
}

kind_bin() {
  if command -v kind >/dev/null 2>&1; then command -v kind; return; fi
  local bin=$out/bin/kind
  if [ ! -x "$bin" ]; then
    mkdir -p "$out/bin"
    log "downloading kind $KIND_VERSION"
    curl -fsSLo "$bin.tmp" "https://kind.sigs.k8s.io/dl/$KIND_VERSION/kind-linux-amd64" \
      || die "cannot download kind $KIND_VERSION (is the internet reachable?)"
    chmod +x "$bin.tmp" && mv "$bin.tmp" "$bin"
  fi
  echo "$bin"
}

helm_bin() {
  if [ -x "$root/target/tools/helm" ]; then echo "$root/target/tools/helm"; return; fi
  command -v helm >/dev/null 2>&1 || die "helm is missing: make tools builds it, or install helm 3"
  command -v helm
}

# Waits until `kubectl get "$@"` lists something, for at most $WAIT seconds.
WAIT=${WAIT:-600}
wait_exists() {
  local deadline=$((SECONDS + WAIT))
  until [ -n "$(kubectl get "$@" -o name 2>/dev/null)" ]; do
    [ $SECONDS -lt $deadline ] || die "timed out waiting for: kubectl get $*"
    sleep 3
  done
}
