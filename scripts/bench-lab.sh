#!/usr/bin/env bash
# `make bench-lab`: the lab's benchmark (`vtsnap-lab bench`), ending with the same
# snapshots timed on the real control plane (e2e/local-cluster). Brings the cluster up
# for that and down again, unless it was already up; then it is left as it was found.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
cluster=e2e/local-cluster/cluster.sh
cargo build -q -p vtsnap-csi-btrfs
if bash "$cluster" status | grep -q running; then
  echo "bench-lab: using the local cluster that is already up (it stays up)" >&2
else
  trap 'bash "$cluster" down' EXIT
fi
bash "$cluster" up >&2
bash scripts/lab.sh bench --kubeconfig "$root/target/local-cluster/kubeconfig" "$@"
