#!/usr/bin/env bash
# The real-API tier: starts the local control plane (etcd, kube-apiserver,
# kube-controller-manager, the CSI snapshot stack and vtsnap's btrfs CSI driver), runs
# the e2e/suite tests against it, and always takes it down again. Output in
# target/test-real.log (make test sums it with the unit tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
mkdir -p target
cargo build -q -p vtsnap-csi-btrfs
cargo test -q -p vtsnap-e2e --no-run
trap 'bash e2e/local-cluster/cluster.sh down' EXIT
bash e2e/local-cluster/cluster.sh up
export VTSNAP_TEST_KUBECONFIG="$root/target/local-cluster/kubeconfig"
set -o pipefail
cargo test -p vtsnap-e2e --no-fail-fast 2>&1 | tee target/test-real.log
