#!/usr/bin/env bash
# `make demo-real`: the lab's whole demo on the real control plane (e2e/local-cluster:
# etcd, kube-apiserver, kube-controller-manager, the CSI snapshot stack and vtsnap's
# btrfs CSI driver). Starts the cluster, runs `vtsnap-lab demo --kubeconfig …`, and takes
# the cluster down again — unless it was already up, then it is left as it was found.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
cluster=e2e/local-cluster/cluster.sh
cargo build -q -p vtsnap-csi-btrfs
if bash "$cluster" status | grep -q running; then
  echo "demo-real: using the local cluster that is already up (it stays up)" >&2
else
  trap 'bash "$cluster" down' EXIT
fi
bash "$cluster" up >&2
bash scripts/lab.sh demo --kubeconfig "$(realpath -m "${LOCAL_CLUSTER_DIR:-$root/target/local-cluster}")/kubeconfig" "$@"
