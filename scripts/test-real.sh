#!/usr/bin/env bash
# The real-API tier: starts the local control plane (etcd, kube-apiserver,
# kube-controller-manager, the CSI snapshot stack and vtsnap's btrfs CSI driver), runs
# the e2e/suite tests against it, and always takes it down again. Then the same control
# plane with a real node (NODE=1: containerd, CNI bridge, kubelet, kube-proxy; the CSI
# driver registered with kubelet) for the tests that run Pods. TEST_REAL_NODE=0 leaves that phase out. Output in target/test-real.log (make
# test sums it with the unit tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
mkdir -p target
# The plugin runs as a process in real_chart.rs (kubectl finds it on PATH).
cargo build -q -p vtsnap-csi-btrfs -p kubectl-vtsnap
cargo test -q -p vtsnap-e2e --no-run
# A checkout too deep for the node's sockets is named now, not after the first phase.
if [[ "${TEST_REAL_NODE:-1}" != 0 ]]; then
  bash e2e/local-cluster/cluster.sh check-paths --node
fi
trap 'bash e2e/local-cluster/cluster.sh down' EXIT
bash e2e/local-cluster/cluster.sh up
state="$(realpath -m "${LOCAL_CLUSTER_DIR:-$root/target/local-cluster}")"
export VTSNAP_TEST_KUBECONFIG="$state/kubeconfig"
set -o pipefail
# The tests that run Pods: only on the cluster with a node (the others set Pod status by
# hand, which a kubelet would overwrite).
node_tests=(real_kubelet real_pods)
node_less=(--lib)
for f in e2e/suite/tests/*.rs; do
  t=$(basename "$f" .rs)
  [[ " ${node_tests[*]} " == *" $t "* ]] || node_less+=(--test "$t")
done
cargo test -p vtsnap-e2e --no-fail-fast "${node_less[@]}" 2>&1 | tee target/test-real.log
if [[ "${TEST_REAL_NODE:-1}" == 0 ]]; then
  exit
fi
bash e2e/local-cluster/cluster.sh down
NODE=1 bash e2e/local-cluster/cluster.sh up
node_args=()
for t in "${node_tests[@]}"; do node_args+=(--test "$t"); done
cargo test -p vtsnap-e2e --no-fail-fast "${node_args[@]}" 2>&1 | tee -a target/test-real.log
# down fails when the node left anything on the host (processes, mounts, cgroups, links,
# iptables rules): part of the test
trap - EXIT
bash e2e/local-cluster/cluster.sh down
