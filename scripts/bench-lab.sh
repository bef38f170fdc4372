#!/usr/bin/env bash
# `make bench-lab`: the lab's benchmark (`vtsnap-lab bench`), ending with the same
# snapshots timed on the real control plane (e2e/local-cluster), which the lab brings up
# only for that and takes down again unless it was already up.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
cargo build -q -p vtsnap-csi-btrfs
bash scripts/lab.sh bench --cluster-script "$root/e2e/local-cluster/cluster.sh" \
  --kubeconfig "$(realpath -m "${LOCAL_CLUSTER_DIR:-$root/target/local-cluster}")/kubeconfig" "$@"
