#!/usr/bin/env bash
# `make demo-node`: the whole story as Pods on the local cluster with a real node
# (e2e/local-cluster, NODE=1) and real Vitess 24 on MySQL 9.7: etcd, vtctld and VTOrc run
# as Pods behind Services, the tablet Pods are vitess-operator's (mysqlctld and vttablet
# from the Vitess image, its probes and flags). helm installs charts/vtsnap with vtsnap's
# own images; the snapshot CronJob fires and its Job's Pod takes a cold snapshot through
# the real vtctld (the node helper's DaemonSet Pod holds the tablet's mysqld in kubelet's
# cgroup); the GC and vtbackup-storage CronJobs fire; a new tablet Pod is restored from
# the snapshot through the webhook's Service and vtsnap-restore's init container, vttablet
# skips its own restore, VTOrc catches it up by GTID and checksums match; an ad-hoc Job
# killed mid-fence is recovered by the node helper (kubelet marks the held Pod NotReady
# and restarts nothing); after a helm upgrade to mode online, another ad-hoc Job takes an
# online snapshot; drills; kubectl vtsnap; after PURGE BINARY LOGS on the primary, a tablet
# restored then hits error 1236 and the GC Job re-provisions it. It is the real-node test
# e2e/suite/tests/real_pods.rs: the timeline goes to stderr, and its closing JSON line
# (checksum_match, per program its Pod, image, ServiceAccount and exit code) is printed
# last on stdout. Starts the cluster with a node and takes it down again (a cluster
# already up without a node is taken down first); everything the run made is removed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
cluster=e2e/local-cluster/cluster.sh
summary=$(mktemp /tmp/vtsnap-demo-node.XXXXXX)
cargo build -q -p vtsnap-csi-btrfs
cargo test -q -p vtsnap-e2e --test real_pods --no-run 2>/dev/null
trap 'rm -f "$summary"; bash "$cluster" down >&2' EXIT
if bash "$cluster" status | grep -q running; then
  echo "demo-node: taking down the local cluster that is up (the demo needs its node)" >&2
  bash "$cluster" down >&2
fi
NODE=1 bash "$cluster" up >&2
VTSNAP_TEST_KUBECONFIG="$(realpath -m "${LOCAL_CLUSTER_DIR:-$root/target/local-cluster}")/kubeconfig" VTSNAP_DEMO_SUMMARY="$summary" \
  cargo test -q -p vtsnap-e2e --test real_pods -- --nocapture >/dev/null
cat "$summary"
