#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1, from the binaries build-tools.sh puts in
# target/tools/: etcd, kube-apiserver, kube-controller-manager, snapshot-controller and,
# given a CSI driver's socket, csi-snapshotter and csi-provisioner. By default no kubelet:
# the Node object is created by hand and Pods are never run. With NODE=1 (--node) a real
# node instead: containerd + CNI bridge + kubelet, which registers the Node and runs Pods.
#
#   cluster.sh up [--no-csi] [--csi-socket PATH] [--scheduler] [--node]
#                                start (idempotent), then verify; unless --no-csi, also
#                                vtsnap's btrfs CSI driver (e2e/csi-btrfs) on a loop device
#                                and its sidecars; --node: the real node (implies --scheduler)
#   cluster.sh csi PATH          start the CSI sidecars against a driver socket (cluster up)
#   cluster.sh verify            the checks `up` ends with
#   cluster.sh status            what runs, by pid
#   cluster.sh down              stop everything and remove the state (idempotent); fails
#                                when a node left processes, mounts, cgroups, links or rules
#
# State, certificates, pids and kubeconfig under target/local-cluster/; each component
# logs to target/local-cluster/logs/ (kept by `down` for post-mortems; next `up` clears it).
# Environment: CSI_SOCKET (as --csi-socket), LOCAL_CLUSTER_SCHEDULER=1 (as --scheduler),
# NODE=1 or LOCAL_CLUSTER_NODE=1 (as --node; LOCAL_CLUSTER_NODE_IP, LOCAL_CLUSTER_POD_CIDR,
# LOCAL_CLUSTER_NODE_IMAGES, LOCAL_CLUSTER_KUBELET_{,HEALTHZ_}PORT),
# LOCAL_CLUSTER_CSI=0 (as --no-csi), LOCAL_CLUSTER_CSI_BYTES (its sparse image, 8G),
# CSI_DRIVER_BIN (the driver binary, target/debug/vtsnap-csi-btrfs),
# LOCAL_CLUSTER_KEEP_ON_FAILURE=1 (no teardown when `up` fails), the ports
# LOCAL_CLUSTER_{ETCD,ETCD_PEER,APISERVER,KCM,SCHEDULER}_PORT, TOOLS_DIR, LOCAL_CLUSTER_DIR.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="${TOOLS_DIR:-$root/target/tools}"
state="${LOCAL_CLUSTER_DIR:-$root/target/local-cluster}"
logs="$state/logs"
pki="$state/pki"
pids="$state/pids"
kubeconfig="$state/kubeconfig"

ETCD_PORT="${LOCAL_CLUSTER_ETCD_PORT:-22379}"
ETCD_PEER_PORT="${LOCAL_CLUSTER_ETCD_PEER_PORT:-22380}"
APISERVER_PORT="${LOCAL_CLUSTER_APISERVER_PORT:-26443}"
KCM_PORT="${LOCAL_CLUSTER_KCM_PORT:-20257}"
SCHEDULER_PORT="${LOCAL_CLUSTER_SCHEDULER_PORT:-20259}"
SERVICE_CIDR=10.96.0.0/12
SERVICE_IP=10.96.0.1
NODE_NAME=vtsnap-local-node
CSI_DRIVER=btrfs.csi.vtsnap.io
CLASS_NAME=vtsnap-btrfs
FIELD_MANAGER=vtsnap-local-cluster
api="https://127.0.0.1:$APISERVER_PORT"

log() { echo "cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }

need_cmd() { # command [debian package]
  command -v "$1" >/dev/null 2>&1 && return 0
  local pkg="${2:-$1}"
  log "installing $pkg (for $1)"
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null; }
  fi
  command -v "$1" >/dev/null 2>&1 || die "$1 is missing (Debian package $pkg)"
}

# ---- processes: "name pid starttime" per line; each runs as its own process group ------

proc_stat() { # pid -> "state starttime" (fields after the command name, which may hold spaces)
  local st
  st="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  st="${st##*) }"
  awk '{print $1, $20}' <<<"$st"
}
proc_start_time() { local s; s="$(proc_stat "$1")"; echo "${s#* }"; }

alive() { # pid starttime: running (not a zombie waiting to be reaped) and the same process
  [[ -n "$1" ]] || return 1
  local s
  s="$(proc_stat "$1")"
  [[ -n "$s" && "${s%% *}" != Z && "${s#* }" == "$2" ]]
}

start_proc() { # name command...
  local name="$1"; shift
  : >"$logs/$name.log"
  # setsid: no fork needed (we are not a group leader), so $! is the daemon and its pgid;
  # fd 9 (the lock) is not inherited.
  setsid "$@" </dev/null >>"$logs/$name.log" 2>&1 9>&- &
  local pid=$!
  echo "$name $pid $(proc_start_time "$pid")" >>"$pids"
  log "started $name (pid $pid, log ${logs#"$root"/}/$name.log)"
}

running() { # name -> 0 if recorded and alive
  [[ -f "$pids" ]] || return 1
  local n p t
  while read -r n p t; do
    [[ "$n" == "$1" ]] && alive "$p" "$t" && return 0
  done <"$pids"
  return 1
}

stop_all() {
  [[ -f "$pids" ]] || return 0
  local lines=() n p t i
  mapfile -t lines <"$pids"
  # reverse start order: sidecars first, etcd last
  for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
    read -r n p t <<<"${lines[$i]}"
    if alive "$p" "$t"; then
      local s0=$SECONDS
      kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
      local w=0
      while alive "$p" "$t" && ((w < 100)); do sleep 0.1; w=$((w + 1)); done
      if alive "$p" "$t"; then kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; fi
      log "stopped $n (pid $p, $((SECONDS - s0))s)"
    fi
  done
  rm -f "$pids"
}

wait_for() { # seconds description command...
  local secs="$1" what="$2"; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "timed out after ${secs}s waiting for $what"
    sleep 0.5
  done
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---- API access with the admin client certificate (no kubectl) ------------------------

kapi() { # method path [curl args...]  -> body on stdout; fails on HTTP >= 400
  local method="$1" path="$2"; shift 2
  # (a non-curl user agent: the API server pretty-prints JSON for curl, we grep it compact)
  curl -sS --fail-with-body --max-time 30 -A "$FIELD_MANAGER" --cacert "$pki/ca.crt" --cert "$pki/admin.crt" \
    --key "$pki/admin.key" -X "$method" "$api$path" "$@"
}

http_status() { # path -> HTTP status code of a GET
  curl -s -o /dev/null -w '%{http_code}' --max-time 30 -A "$FIELD_MANAGER" --cacert "$pki/ca.crt" --cert "$pki/admin.crt" \
    --key "$pki/admin.key" "$api$1"
}
gone() { [[ "$(http_status "$1")" == 404 ]]; }

apply_yaml() { # collection-path name yaml-file-or-  : server-side apply, idempotent
  kapi PATCH "$1/$2?fieldManager=$FIELD_MANAGER&force=true" \
    -H 'Content-Type: application/apply-patch+yaml' --data-binary "@$3" >/dev/null
}

# ---- pki -----------------------------------------------------------------------------

make_cert() { # name subject [extensions-file-content]
  local name="$1" subj="$2" ext="${3:-}"
  openssl genrsa -out "$pki/$name.key" 2048 2>/dev/null
  openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "$ext" >"$pki/$name.ext"
  local ca="${CA:-ca}"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" -CAcreateserial \
    -days 30 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr"
}

make_ca() { # name common-name
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/$1.key" -out "$pki/$1.crt" -days 30 \
    -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}

make_pki() {
  mkdir -p "$pki"
  chmod 700 "$pki"
  make_ca ca vtsnap-local-ca
  make_cert apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  make_cert admin "/O=system:masters/CN=vtsnap-admin" "extendedKeyUsage=clientAuth"
  # the aggregation layer's front proxy (as kubeadm sets it up): its own CA and client
  make_ca front-proxy-ca vtsnap-local-front-proxy-ca
  CA=front-proxy-ca make_cert front-proxy-client "/CN=front-proxy-client" "extendedKeyUsage=clientAuth"
  make_cert controller-manager "/CN=system:kube-controller-manager" "extendedKeyUsage=clientAuth"
  make_cert scheduler "/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
}

write_kubeconfig() { # file user cert-name
  local b64='base64 -w0'
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: vtsnap-local
  cluster:
    server: $api
    certificate-authority-data: $($b64 <"$pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 <"$pki/$3.crt")
    client-key-data: $($b64 <"$pki/$3.key")
contexts:
- name: vtsnap-local
  context:
    cluster: vtsnap-local
    user: $2
current-context: vtsnap-local
EOF
  chmod 600 "$1"
}

# ---- components ----------------------------------------------------------------------

# (grep reads a captured body: `curl | grep -q` fails under pipefail when grep exits early)
etcd_healthy() { grep -q '"health":"true"' <<<"$(curl -sf "http://127.0.0.1:$ETCD_PORT/health")"; }

start_etcd() {
  start_proc etcd "$tools/etcd" --name=vtsnap-local --data-dir="$state/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="vtsnap-local=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state=new \
    --listen-metrics-urls="" --log-level=warn
  wait_for 60 "etcd /health" etcd_healthy
}

# --endpoint-reconciler-type=none: the "kubernetes" Service gets no Endpoints, which would
# have to be a loopback address the API refuses (and nothing here runs in a pod).
start_apiserver() {
  # With the node: the API server reaches kubelet (logs, exec, port-forward) with a client
  # certificate (system:masters, as kubeadm's apiserver-kubelet-client) and checks kubelet's
  # serving certificate against the cluster CA.
  local apiserver_node_flags=()
  if [[ $with_node == 1 ]]; then
    [[ -f "$pki/apiserver-kubelet-client.crt" ]] ||
      make_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
    apiserver_node_flags=(--kubelet-certificate-authority="$pki/ca.crt"
      --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt"
      --kubelet-client-key="$pki/apiserver-kubelet-client.key"
      --kubelet-preferred-address-types=InternalIP)
  fi
  start_proc kube-apiserver "$tools/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --cert-dir="$state/apiserver-certs" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --requestheader-client-ca-file="$pki/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$pki/front-proxy-client.crt" --proxy-client-key-file="$pki/front-proxy-client.key" \
    --authorization-mode=Node,RBAC --anonymous-auth=false \
    --enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass,DefaultTolerationSeconds,PersistentVolumeClaimResize,StorageObjectInUseProtection,ResourceQuota,ValidatingAdmissionPolicy,MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true --profiling=false \
    --endpoint-reconciler-type=none \
    "${apiserver_node_flags[@]}" \
    --v=1
  wait_for 180 "kube-apiserver /readyz" kapi GET /readyz
}

start_controller_manager() {
  write_kubeconfig "$state/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
  # Everything but node lifecycle and node IPAM (no kubelet, no pod network); the garbage
  # collector, namespace, service-account, PV binder and root-CA publisher all run, each
  # with its own service account (as kubeadm runs it; its bare identity may not delete).
  # With the real node, node lifecycle runs too: it removes the not-ready taint kubelet
  # registers the Node with (and would mark the hand-made Node of the default unreachable,
  # hence not by default). Node IPAM stays off: the CNI config holds the Pod range.
  local controllers='*,-node-ipam-controller,-node-lifecycle-controller'
  [[ $with_node == 0 ]] || controllers='*,-node-ipam-controller'
  start_proc kube-controller-manager "$tools/kube-controller-manager" \
    --kubeconfig="$state/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$state/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$state/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --cert-dir="$state/controller-manager-certs" \
    --controllers="$controllers" \
    --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --profiling=false --v=1
  wait_for 120 "kube-controller-manager /healthz" curl -skf "https://127.0.0.1:$KCM_PORT/healthz"
}

start_scheduler() {
  write_kubeconfig "$state/scheduler.kubeconfig" system:kube-scheduler scheduler
  start_proc kube-scheduler "$tools/kube-scheduler" --kubeconfig="$state/scheduler.kubeconfig" \
    --authentication-kubeconfig="$state/scheduler.kubeconfig" \
    --authorization-kubeconfig="$state/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --leader-elect=false --profiling=false --v=1
  wait_for 60 "kube-scheduler /healthz" curl -skf "https://127.0.0.1:$SCHEDULER_PORT/healthz"
}

create_node() {
  local f="$state/node.yaml"
  cat >"$f" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE_NAME
  labels:
    kubernetes.io/hostname: $NODE_NAME
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
EOF
  apply_yaml /api/v1/nodes "$NODE_NAME" "$f"
  # No kubelet: the status a kubelet would report, once (node lifecycle is off, so it stays).
  cat >"$state/node-status.yaml" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE_NAME
status:
  capacity: {cpu: "2", memory: 8Gi, pods: "110", ephemeral-storage: 100Gi}
  allocatable: {cpu: "2", memory: 8Gi, pods: "110", ephemeral-storage: 100Gi}
  addresses: [{type: InternalIP, address: 127.0.0.1}, {type: Hostname, address: $NODE_NAME}]
  conditions:
  - {type: Ready, status: "True", reason: KubeletReady, message: "no kubelet: status set by cluster.sh"}
EOF
  kapi PATCH "/api/v1/nodes/$NODE_NAME/status?fieldManager=$FIELD_MANAGER&force=true" \
    -H 'Content-Type: application/apply-patch+yaml' --data-binary "@$state/node-status.yaml" >/dev/null
}

crd_established() {
  grep -q '"type":"Established","status":"True"' \
    <<<"$(kapi GET "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$1")"
}

apply_crds() {
  local f name n=0
  # the snapshot CRDs from the build, then our own (manifests/*-crd.yaml, committed)
  for f in "$tools"/crds/*.yaml "$here"/manifests/*-crd.yaml; do
    [[ -f "$f" ]] || continue
    n=$((n + 1))
    name="$(awk '/^metadata:/ {m=1; next} m && /^  name:/ {print $2; exit}' "$f")"
    [[ -n "$name" ]] || die "no metadata.name in $f"
    apply_yaml /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$name" "$f"
    wait_for 60 "CRD $name Established" crd_established "$name"
  done
  log "applied $n CRDs (VolumeSnapshot*, VolumeGroupSnapshot*, manifests/*-crd.yaml)"
}

apply_classes() {
  cat >"$state/volumesnapshotclass.yaml" <<EOF
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: $CLASS_NAME
  annotations:
    snapshot.storage.kubernetes.io/is-default-class: "true"
driver: $CSI_DRIVER
deletionPolicy: Delete
EOF
  apply_yaml /apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses "$CLASS_NAME" "$state/volumesnapshotclass.yaml"
  cat >"$state/storageclass.yaml" <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $CLASS_NAME
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: $CSI_DRIVER
volumeBindingMode: Immediate
reclaimPolicy: Delete
allowVolumeExpansion: false
EOF
  apply_yaml /apis/storage.k8s.io/v1/storageclasses "$CLASS_NAME" "$state/storageclass.yaml"
  log "VolumeSnapshotClass and StorageClass $CLASS_NAME (driver $CSI_DRIVER)"
}

start_snapshot_controller() {
  start_proc snapshot-controller "$tools/snapshot-controller" --kubeconfig="$kubeconfig" \
    --leader-election=false --retry-interval-max=30s --v=3 \
    --kube-api-qps=200 --kube-api-burst=400
}

# The CSI sidecars against a driver's socket ($1): csi-snapshotter (VolumeSnapshotContent ->
# CreateSnapshot/DeleteSnapshot) and csi-provisioner (PVC -> CreateVolume/DeleteVolume).
start_csi_sidecars() {
  local sock="$1"
  [[ -S "$sock" ]] || die "CSI socket $sock does not exist (is the driver running?)"
  if running csi-snapshotter && running csi-provisioner; then log "CSI sidecars already running"; return 0; fi
  running csi-snapshotter || start_proc csi-snapshotter "$tools/csi-snapshotter" \
    --csi-address="$sock" --kubeconfig="$kubeconfig" --leader-election=false \
    --extra-create-metadata --timeout=60s --retry-interval-max=30s --v=3 \
    --kube-api-qps=200 --kube-api-burst=400
  running csi-provisioner || start_proc csi-provisioner "$tools/csi-provisioner" \
    --csi-address="$sock" --kubeconfig="$kubeconfig" --leader-election=false \
    --extra-create-metadata --timeout=60s --retry-interval-max=30s --v=3 \
    --kube-api-qps=200 --kube-api-burst=400
}

# vtsnap's own btrfs CSI driver (e2e/csi-btrfs) on a btrfs file system of its own, on a
# loop device under the state dir: volumes are subvolumes, snapshots read-only snapshots.
csi_img="$state/csi-btrfs.img"
csi_root="$state/csi-root"
csi_loop="$state/csi-btrfs.loop"
csi_sock="$state/csi/csi.sock"
csi_bin="${CSI_DRIVER_BIN:-$root/target/debug/vtsnap-csi-btrfs}"

start_csi_driver() {
  [[ -x "$csi_bin" ]] || die "$csi_bin missing: cargo build -p vtsnap-csi-btrfs (make cluster-up does it)"
  need_cmd mkfs.btrfs btrfs-progs
  need_cmd losetup util-linux
  modprobe btrfs 2>/dev/null || true
  modprobe loop 2>/dev/null || true
  if ! mountpoint -q "$csi_root"; then
    rm -f "$csi_img"
    truncate -s "${LOCAL_CLUSTER_CSI_BYTES:-8G}" "$csi_img"
    mkfs.btrfs -q "$csi_img" >/dev/null
    local dev
    dev="$(losetup --find --show "$csi_img")"
    echo "$dev" >"$csi_loop"
    mkdir -p "$csi_root"
    mount "$dev" "$csi_root"
    log "btrfs for the CSI driver: $dev at ${csi_root#"$root"/}"
  fi
  mkdir -p "$(dirname "$csi_sock")"
  running csi-btrfs || start_proc csi-btrfs "$csi_bin" --endpoint "unix://$csi_sock" \
    --root "$csi_root" --node-id "$NODE_NAME" --log-format text
  wait_for 30 "the CSI driver's socket" test -S "$csi_sock"
}

stop_csi_storage() {
  if mountpoint -q "$csi_root" 2>/dev/null; then
    umount "$csi_root" 2>/dev/null || umount -l "$csi_root"
  fi
  if [[ -f "$csi_loop" ]]; then
    losetup -d "$(cat "$csi_loop")" 2>/dev/null || true
  fi
  # A loop device left by a killed run still names our image.
  losetup -j "$csi_img" 2>/dev/null | cut -d: -f1 | while read -r d; do losetup -d "$d" 2>/dev/null || true; done
}

# ---- the node (NODE=1): containerd + CNI + kubelet -----------------------------------
#
# A real kubelet registers $NODE_NAME itself (no hand-made status) and runs Pods through
# containerd (built by build-tools.sh), Debian's runc and the CNI bridge plugin. Images:
# no registry is reachable, so the sandbox ("pause") image is our own program
# (e2e/local-cluster/pause) packed here, and LOCAL_CLUSTER_NODE_IMAGES (Podman images,
# default localhost/vtsnap-debian:bookworm when Podman has it) are copied in with
# `podman save | ctr images import`. Pods must use imagePullPolicy: Never (or IfNotPresent).
node_dir="$state/node"
ctd_dir="$node_dir/containerd"
ctd_sock="$ctd_dir/containerd.sock"
kubelet_dir="$node_dir/kubelet"
cni_conf_dir="$node_dir/cni/net.d"
pod_logs="$node_dir/pod-logs"
POD_CIDR="${LOCAL_CLUSTER_POD_CIDR:-10.244.0.0/24}"
CNI_NETWORK=vtsnap-pods
CNI_BRIDGE=vtsnap-cni0
KUBELET_PORT="${LOCAL_CLUSTER_KUBELET_PORT:-10250}"
KUBELET_HEALTHZ_PORT="${LOCAL_CLUSTER_KUBELET_HEALTHZ_PORT:-10248}"
PAUSE_IMAGE=localhost/vtsnap-pause:1
# The shims' sockets (named by a 64-digit hash) need a short directory (a socket path has at
# most 107 bytes): one of our own under /run, named after the state directory.
shim_dir="/run/vtsnap-shims-$(printf '%s' "$state" | sha256sum | cut -c1-12)"
# Host paths kubelet/libcni use whatever their configuration says (kubelet.go
# DefaultContainerLogsDir; libcni's result cache): `down` removes only our entries, and a
# directory only if the node created it.
HOST_DIRS=(/var/log/containers /var/lib/cni)

node_ip() { # the address the API server reaches kubelet at: kubelet refuses a loopback one
  if [[ -n "${LOCAL_CLUSTER_NODE_IP:-}" ]]; then echo "$LOCAL_CLUSTER_NODE_IP"; return; fi
  ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}'
}

ctr_() { "$tools/ctr" --address "$ctd_sock" -n k8s.io "$@"; }

write_containerd_config() {
  mkdir -p "$ctd_dir" "$cni_conf_dir" "$node_dir/cni/ipam"
  # containerd config version 4 (v2.4.2's current, version/version.go ConfigVersion: the
  # servers' addresses are plugins' settings); field names from `containerd config migrate`,
  # docs/cri/config.md and internal/cri/config/config.go. No imports: the host's
  # /etc/containerd/conf.d (the default) stays out.
  cat >"$ctd_dir/config.toml" <<EOF
version = 4
root = "$ctd_dir/root"
state = "$ctd_dir/state"
imports = []
disabled_plugins = ["io.containerd.nri.v1.nri"]

[debug]
  level = "info"

[plugins]
  [plugins.'io.containerd.server.v1.grpc']
    address = "$ctd_sock"
  [plugins.'io.containerd.server.v1.ttrpc']
    address = "$ctd_sock.ttrpc"
  [plugins.'io.containerd.server.v1.debug']
    address = ""
  [plugins.'io.containerd.server.v1.metrics']
    address = ""
  [plugins.'io.containerd.internal.v1.opt']
    path = "$ctd_dir/opt"
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = "$shim_dir"
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "$PAUSE_IMAGE"
  [plugins.'io.containerd.cri.v1.runtime']
    # a host without CAP_SYS_RESOURCE (an unprivileged container): runc cannot lower a
    # container's oom_score_adj below its own ("failed to update
    # /proc/self/oom_score_adj: Permission denied")
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          Root = "$ctd_dir/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["$tools/cni"]
      conf_dir = "$cni_conf_dir"
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
EOF
  # bridge + host-local + portmap + loopback (containerd adds loopback itself from bin_dirs);
  # no ipMasq: Pods need not reach out, and the host reaches them over the bridge.
  cat >"$cni_conf_dir/10-$CNI_NETWORK.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$node_dir/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

# Our own pause program as a one-layer image (docker-archive layout: manifest.json, the
# config, the layer), imported into containerd's k8s.io namespace.
pause_image_tar() { # output-file
  local d="$node_dir/pause-image" layer_sha cfg_sha
  rm -rf "$d"
  mkdir -p "$d/rootfs"
  install -m 0755 "$tools/pause" "$d/rootfs/pause"
  tar -C "$d/rootfs" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$d/layer.tar" pause
  layer_sha="$(sha256sum "$d/layer.tar" | cut -d' ' -f1)"
  printf '%s' "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Entrypoint\":[\"/pause\"]},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$layer_sha\"]}}" >"$d/config.json"
  cfg_sha="$(sha256sum "$d/config.json" | cut -d' ' -f1)"
  mkdir -p "$d/archive/$layer_sha"
  mv "$d/layer.tar" "$d/archive/$layer_sha/layer.tar"
  mv "$d/config.json" "$d/archive/$cfg_sha.json"
  printf '%s' "[{\"Config\":\"$cfg_sha.json\",\"RepoTags\":[\"$PAUSE_IMAGE\"],\"Layers\":[\"$layer_sha/layer.tar\"]}]" \
    >"$d/archive/manifest.json"
  tar -C "$d/archive" -cf "$1" .
  rm -rf "$d"
}

import_node_images() {
  local t="$node_dir/pause.tar" img
  pause_image_tar "$t"
  # (ctr repeats containerd's cgroup v1 deprecation warning: to the log, not the terminal)
  ctr_ images import "$t" >/dev/null 2>>"$logs/containerd.log" || die "could not import $PAUSE_IMAGE"
  rm -f "$t"
  local images="${LOCAL_CLUSTER_NODE_IMAGES-}"
  if [[ -z "${LOCAL_CLUSTER_NODE_IMAGES+x}" ]] && command -v podman >/dev/null 2>&1 &&
    podman image exists localhost/vtsnap-debian:bookworm 2>/dev/null; then
    images=localhost/vtsnap-debian:bookworm
  fi
  for img in $images; do
    local s0=$SECONDS
    podman save --format docker-archive "$img" | ctr_ images import - >/dev/null 2>>"$logs/containerd.log" ||
      die "could not copy image $img from Podman into containerd"
    log "image $img copied into the node ($((SECONDS - s0))s)"
  done
}

write_kubelet_config() {
  local ip="$1"
  mkdir -p "$kubelet_dir" "$pod_logs"
  # kubelet's client certificate (the Node authorizer's identity) and its serving
  # certificate, both from the cluster CA (no TLS bootstrap, no rotation)
  make_cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=clientAuth"
  make_cert kubelet-serving "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=serverAuth
subjectAltName=IP:$ip,DNS:$NODE_NAME"
  write_kubeconfig "$node_dir/kubelet.kubeconfig" "system:node:$NODE_NAME" kubelet-client
  # KubeletConfiguration (k8s.io/kubelet config/v1beta1 types.go). Differences from a
  # production node, each needed here: cgroup v1 without systemd (failCgroupV1: false,
  # cgroupDriver: cgroupfs), no swap check, eviction and image GC thresholds so low they
  # never fire on a shared disk (imported images cannot be pulled again), no cluster DNS.
  cat >"$node_dir/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization:
  mode: Webhook
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
rotateCertificates: false
serverTLSBootstrap: false
containerRuntimeEndpoint: unix://$ctd_sock
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
podLogsDir: $pod_logs
staticPodPath: ""
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
maxPods: 20
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 10s
EOF
}

node_ready() {
  grep -q '"type":"Ready","status":"True"' <<<"$(kapi GET "/api/v1/nodes/$NODE_NAME")"
}
node_untainted() { # the node lifecycle controller removed kubelet's not-ready taint
  ! grep -q 'node.kubernetes.io/not-ready' <<<"$(kapi GET "/api/v1/nodes/$NODE_NAME")"
}

# Which of the host directories exist before the node starts (`down` removes the others).
record_host_state() {
  local d
  : >"$node_dir/host-dirs-created"
  for d in "${HOST_DIRS[@]}"; do [[ -e "$d" ]] || echo "$d" >>"$node_dir/host-dirs-created"; done
  # kubelet's own iptables chains (KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT...) outlive it:
  # the KUBE-* chains present before, so `down` deletes only the ones it added
  kube_chains >"$node_dir/kube-chains-before"
  sysctl -n net.ipv4.ip_forward >"$node_dir/ip_forward-before" 2>/dev/null || true
}

kube_chains() { # "family table chain" for every KUBE-* chain
  local fam cmd table
  for fam in 4 6; do
    cmd=iptables; [[ $fam == 6 ]] && cmd=ip6tables
    command -v "$cmd" >/dev/null 2>&1 || continue
    for table in filter nat mangle; do
      "$cmd" -t "$table" -S 2>/dev/null | awk -v f="$fam" -v t="$table" '$1 == "-N" && $2 ~ /^KUBE-/ {print f, t, $2}'
    done
  done
}

start_node() {
  need_cmd runc
  need_cmd iptables
  need_cmd ip iproute2
  local t ip
  for t in kubelet containerd containerd-shim-runc-v2 ctr pause cni/bridge cni/host-local cni/loopback cni/portmap; do
    [[ -x "$tools/$t" ]] || die "$tools/$t missing: run e2e/local-cluster/build-tools.sh (make tools)"
  done
  ip="$(node_ip)"
  [[ -n "$ip" ]] || die "no address for the node (no default route): set LOCAL_CLUSTER_NODE_IP"
  port_free "$KUBELET_HEALTHZ_PORT" || die "127.0.0.1:$KUBELET_HEALTHZ_PORT is in use (LOCAL_CLUSTER_KUBELET_HEALTHZ_PORT)"
  ! (exec 3<>"/dev/tcp/$ip/$KUBELET_PORT") 2>/dev/null || die "$ip:$KUBELET_PORT is in use (LOCAL_CLUSTER_KUBELET_PORT)"
  mkdir -p "$node_dir"
  record_host_state
  write_containerd_config
  # the shim (containerd-shim-runc-v2) is looked up in PATH
  start_proc containerd env PATH="$tools:$PATH" "$tools/containerd" --config "$ctd_dir/config.toml"
  wait_for 60 "containerd" "$tools/ctr" --address "$ctd_sock" version
  import_node_images
  write_kubelet_config "$ip"
  start_proc kubelet "$tools/kubelet" --config="$node_dir/kubelet-config.yaml" \
    --kubeconfig="$node_dir/kubelet.kubeconfig" --root-dir="$kubelet_dir" --cert-dir="$node_dir/kubelet-pki" \
    --hostname-override="$NODE_NAME" --node-ip="$ip" --v=1
  wait_for 120 "Node $NODE_NAME Ready (reported by kubelet)" node_ready
  wait_for 60 "the not-ready taint on $NODE_NAME removed (node lifecycle controller)" node_untainted
  log "node $NODE_NAME Ready: kubelet at https://$ip:$KUBELET_PORT, containerd at ${ctd_sock#"$root"/}, pods in $POD_CIDR"
}

# Pods bound to the node, as "namespace/name" lines.
node_pods() {
  kapi GET "/api/v1/pods?fieldSelector=spec.nodeName%3D$NODE_NAME" 2>/dev/null |
    grep -o '"metadata":{"name":"[^"]*","namespace":"[^"]*"' | sed 's/.*"name":"\([^"]*\)","namespace":"\([^"]*\)"/\2\/\1/'
}

# Stop the node without leaving anything on the host. With kubelet and the API server up,
# the Pods are deleted first so kubelet stops them the normal way (CNI DEL included); what
# remains (a killed run) is removed with ctr, then the host is swept.
stop_node() {
  [[ -d "$node_dir" ]] || return 0
  local p
  if running kubelet && kapi GET /readyz >/dev/null 2>&1; then
    for p in $(node_pods); do
      kapi DELETE "/api/v1/namespaces/${p%%/*}/pods/${p#*/}?gracePeriodSeconds=0" >/dev/null 2>&1 || true
    done
    local deadline=$((SECONDS + 60))
    while ((SECONDS < deadline)) && [[ -n "$(ctr_ tasks ls -q 2>/dev/null)" ]]; do sleep 0.5; done
  fi
  stop_one kubelet
  if running containerd; then
    local c
    for c in $(ctr_ tasks ls -q 2>/dev/null); do
      ctr_ tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$c" >/dev/null 2>&1 || true; done
    for c in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$c" >/dev/null 2>&1 || true; done
  fi
  stop_one containerd
  kill_shims
  sweep_node_host
}

stop_one() { # name: stop it now (stop_all later skips it)
  [[ -f "$pids" ]] || return 0
  local n p t
  while read -r n p t; do
    if [[ "$n" != "$1" ]] || ! alive "$p" "$t"; then continue; fi
    kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
    local w=0
    while alive "$p" "$t" && ((w < 100)); do sleep 0.1; w=$((w + 1)); done
    alive "$p" "$t" && { kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; }
    log "stopped $n (pid $p)"
  done <"$pids"
}

# containerd-shim-runc-v2 processes of our containerd (they outlive it by design), found by
# the containerd address on their command line; and the container processes they ran.
shim_pids() {
  local d cmd
  for d in /proc/[0-9]*; do
    cmd="$(tr '\0' ' ' 2>/dev/null <"$d/cmdline")" || continue
    [[ "$cmd" == *containerd-shim-runc-v2*" -address $ctd_sock"* ]] && echo "${d#/proc/}"
  done
  return 0
}

kill_shims() {
  local p
  for p in $(shim_pids); do kill -KILL "$p" 2>/dev/null || true; done
  # processes still in the node's cgroups (containers of a killed run)
  local c
  for c in $(node_cgroups); do
    [[ -f "$c/cgroup.procs" ]] || continue
    while read -r p; do kill -KILL "$p" 2>/dev/null || true; done <"$c/cgroup.procs"
  done
}

# kubepods cgroups in every v1 hierarchy (and cgroup v2), deepest first
node_cgroups() {
  local c
  for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d "$c" ]] && find "$c" -depth -type d
  done
  return 0
}

node_mounts() { # mount points under the state directory, deepest first
  awk -v s="$state/" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r
}

sweep_node_host() {
  local m c i f
  for m in $(node_mounts); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  for i in 1 2 3 4 5; do
    [[ -z "$(node_cgroups)" ]] && break
    for c in $(node_cgroups); do rmdir "$c" 2>/dev/null || true; done
    sleep 0.2
  done
  # veth host ends go with their network namespaces; the bridge is ours
  if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then ip link delete "$CNI_BRIDGE" 2>/dev/null || true; fi
  # rules the bridge/portmap plugins leave name the network in their comment
  local fam cmd table rule
  for fam in iptables ip6tables; do
    command -v "$fam" >/dev/null 2>&1 || continue
    for table in filter nat mangle; do
      while read -r rule; do
        [[ -n "$rule" ]] || continue
        eval "$fam -t $table ${rule/-A /-D }" 2>/dev/null || true
      done < <("$fam" -t "$table" -S 2>/dev/null | grep -e "$CNI_NETWORK" -e "$CNI_BRIDGE" || true)
    done
  done
  if [[ -f "$node_dir/kube-chains-before" ]]; then
    while read -r fam table c; do
      grep -qx "$fam $table $c" "$node_dir/kube-chains-before" && continue
      cmd=iptables; [[ $fam == 6 ]] && cmd=ip6tables
      "$cmd" -t "$table" -S 2>/dev/null | awk -v c="$c" '$1 == "-A" && $0 ~ ("-j " c "( |$)") {print}' |
        while read -r rule; do eval "$cmd -t $table ${rule/-A /-D }" 2>/dev/null || true; done
      "$cmd" -t "$table" -F "$c" 2>/dev/null || true
      "$cmd" -t "$table" -X "$c" 2>/dev/null || true
    done < <(kube_chains)
  fi
  if [[ -s "$node_dir/ip_forward-before" ]]; then
    sysctl -q -w "net.ipv4.ip_forward=$(cat "$node_dir/ip_forward-before")" >/dev/null 2>&1 || true
  fi
  # host paths: kubelet's log symlinks into our pod-logs, libcni's cache of our networks
  # (a killed run skips CNI DEL): "<network>-<sandbox id>-<interface>"
  for f in $(host_leftovers); do rm -rf "$f"; done
  rm -rf "$shim_dir"
  if [[ -f "$node_dir/host-dirs-created" ]]; then
    while read -r f; do
      find "$f" -depth -type d -empty -delete 2>/dev/null || true
    done <"$node_dir/host-dirs-created"
  fi
}

sandbox_ids() { # the node's pod sandboxes, from containerd's CRI directories
  local d
  for d in "$ctd_dir"/{root,state}/io.containerd.grpc.v1.cri/sandboxes/*; do
    [[ -d "$d" ]] && echo "${d##*/}"
  done
  return 0
}

host_leftovers() { # our entries in the host directories kubelet and libcni write to
  local f id
  for f in /var/log/containers/*; do
    [[ -L "$f" && "$(readlink "$f")" == "$pod_logs/"* ]] && echo "$f"
  done
  for f in /var/lib/cni/results/"$CNI_NETWORK"-* /var/lib/cni/networks/"$CNI_NETWORK"; do
    [[ -e "$f" ]] && echo "$f"
  done
  for id in $(sandbox_ids); do
    for f in /var/lib/cni/results/*-"$id"-*; do [[ -e "$f" ]] && echo "$f"; done
  done
  return 0
}

# What a node could leave behind; `down` fails when it finds any of it. (One node per host:
# the kubepods cgroups, the bridge and kubelet's port are the host's.)
node_leftovers() {
  [[ -d "$node_dir" ]] || return 0
  local out=() m
  m="$(host_leftovers)"; [[ -n "$m" ]] && out+=("host files: $(tr '\n' ' ' <<<"$m")")
  [[ -e "$shim_dir" ]] && out+=("shim socket directory $shim_dir")
  [[ -n "$(shim_pids)" ]] && out+=("shim processes: $(shim_pids | tr '\n' ' ')")
  m="$(node_mounts)"; [[ -n "$m" ]] && out+=("mounts: $(tr '\n' ' ' <<<"$m")")
  m="$(node_cgroups)"; [[ -n "$m" ]] && out+=("cgroups: $(head -3 <<<"$m" | tr '\n' ' ')")
  ip link show "$CNI_BRIDGE" >/dev/null 2>&1 && out+=("bridge $CNI_BRIDGE")
  m="$(ip -o link show type veth 2>/dev/null | grep -c "master $CNI_BRIDGE" || true)"
  [[ "$m" != 0 ]] && out+=("$m veth on $CNI_BRIDGE")
  m="$(iptables-save 2>/dev/null | grep -c -e "$CNI_NETWORK" -e "$CNI_BRIDGE" || true)"
  [[ "$m" != 0 ]] && out+=("$m iptables lines naming $CNI_NETWORK/$CNI_BRIDGE")
  if [[ -f "$node_dir/kube-chains-before" ]]; then
    m="$(kube_chains | grep -vxFf "$node_dir/kube-chains-before" || true)"
    [[ -n "$m" ]] && out+=("iptables chains: $(tr '\n' ' ' <<<"$m")")
  fi
  ((${#out[@]} == 0)) || printf '%s\n' "${out[@]}"
}

# ---- commands ------------------------------------------------------------------------

check_tools() {
  local t
  for t in etcd kube-apiserver kube-controller-manager snapshot-controller csi-snapshotter csi-provisioner; do
    [[ -x "$tools/$t" ]] || die "$tools/$t missing: run e2e/local-cluster/build-tools.sh (make tools)"
  done
  ls "$tools"/crds/*.yaml >/dev/null 2>&1 || die "no CRDs in $tools/crds (make tools)"
}

all_running() {
  local c
  for c in etcd kube-apiserver kube-controller-manager snapshot-controller; do running "$c" || return 1; done
  [[ $with_node == 0 ]] || { running containerd && running kubelet || return 1; }
  [[ $with_scheduler == 0 ]] || running kube-scheduler
}

# Processes still running one of our tools (any component, the node's shims included).
tool_procs() {
  local d exe
  for d in /proc/[0-9]*; do
    exe="$(readlink "$d/exe" 2>/dev/null)" || continue
    [[ "$exe" == "$tools/"* ]] && echo "${d#/proc/} ${exe#"$tools"/}"
  done
  return 0
}

cmd_down() {
  stop_node
  stop_all
  stop_csi_storage
  local left
  left="$(node_leftovers; tool_procs | sed 's/^/process /')"
  if [[ -n "$(node_mounts)" ]]; then
    # never rm -rf across a mount point
    log "error: mounts remain under ${state#"$root"/}; state kept:"
    printf '  %s\n' "$left" >&2
    return 1
  fi
  if [[ -d "$state" ]]; then
    find "$state" -mindepth 1 -maxdepth 1 ! -name logs ! -name .lock -exec rm -rf {} +
  fi
  if [[ -n "$left" ]]; then
    log "error: left behind after down:"
    while read -r l; do echo "  $l" >&2; done <<<"$left"
    return 1
  fi
  log "down (logs kept in ${logs#"$root"/})"
}

on_up_failure() {
  if [[ "${LOCAL_CLUSTER_KEEP_ON_FAILURE:-0}" == 1 ]]; then
    log "up failed: LOCAL_CLUSTER_KEEP_ON_FAILURE=1, leaving it running for inspection (cluster.sh down)"
  else
    log "up failed or interrupted: tearing down"
    cmd_down
  fi
}

cmd_up() {
  need_cmd openssl
  need_cmd curl
  need_cmd setsid util-linux
  check_tools
  mkdir -p "$state"
  if all_running && kapi GET /readyz >/dev/null 2>&1; then
    log "already up at $api"
    apply_classes
  else
    [[ -f "$pids" || -d "$state/etcd" ]] && { log "stale state: cleaning up first"; cmd_down; }
    local p ports=("$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$KCM_PORT")
    [[ $with_scheduler == 0 ]] || ports+=("$SCHEDULER_PORT")
    [[ $with_node == 0 ]] || ports+=("$KUBELET_HEALTHZ_PORT")
    for p in "${ports[@]}"; do
      port_free "$p" || die "127.0.0.1:$p is in use (set LOCAL_CLUSTER_*_PORT)"
    done
    rm -rf "$logs"
    mkdir -p "$logs"
    # Until the end of `up`, any failure or Ctrl-C tears down what was started.
    trap 'rc=$?; trap - EXIT INT TERM; on_up_failure; exit $(( rc ? rc : 130 ))' EXIT INT TERM
    local t0=$SECONDS
    make_pki
    write_kubeconfig "$kubeconfig" vtsnap-admin admin
    start_etcd
    start_apiserver
    start_controller_manager
    [[ $with_scheduler == 0 ]] || start_scheduler
    if [[ $with_node == 1 ]]; then start_node; else create_node; fi
    apply_crds
    apply_classes
    start_snapshot_controller
    # the default ServiceAccount shows the controller manager at work
    wait_for 60 "ServiceAccount default/default" kapi GET /api/v1/namespaces/default/serviceaccounts/default
    log "control plane up in $((SECONDS - t0))s"
  fi
  if [[ $with_csi == 1 ]]; then
    start_csi_driver
    csi_socket="$csi_sock"
  fi
  if [[ -n "$csi_socket" ]]; then
    if [[ -S "$csi_socket" ]]; then start_csi_sidecars "$csi_socket"
    else log "warning: CSI socket $csi_socket does not exist: CSI sidecars not started"; fi
  fi
  cmd_verify
  trap - EXIT INT TERM
  log "KUBECONFIG=${kubeconfig#"$root"/}  (server $api)"
}

cmd_verify() {
  local v
  v="$(kapi GET /version)"
  grep -q '"gitVersion": *"v1.36.3"' <<<"$v" || die "unexpected /version: $v"
  grep -q "\"name\":\"$NODE_NAME\"" <<<"$(kapi GET /api/v1/nodes)" || die "node $NODE_NAME not listed"
  grep -q "\"name\":\"$CLASS_NAME\"" <<<"$(kapi GET /apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses)" ||
    die "VolumeSnapshotClass $CLASS_NAME not listed"
  # A VolumeSnapshot is accepted (schema-validated by the real CRD), then removed again.
  local snap="verify-$$-$RANDOM"
  kapi POST /apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots \
    -H 'Content-Type: application/json' --data-binary "{\"apiVersion\":\"snapshot.storage.k8s.io/v1\",\"kind\":\"VolumeSnapshot\",\"metadata\":{\"name\":\"$snap\"},\"spec\":{\"volumeSnapshotClassName\":\"$CLASS_NAME\",\"source\":{\"persistentVolumeClaimName\":\"$snap-pvc\"}}}" >/dev/null ||
    die "VolumeSnapshot create rejected"
  # ... and one without a source is rejected by the CRD's validation.
  if kapi POST /apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots \
    -H 'Content-Type: application/json' --data-binary "{\"apiVersion\":\"snapshot.storage.k8s.io/v1\",\"kind\":\"VolumeSnapshot\",\"metadata\":{\"name\":\"$snap-bad\"},\"spec\":{}}" >/dev/null 2>&1; then
    die "a VolumeSnapshot without spec.source was accepted"
  fi
  kapi DELETE "/apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots/$snap" >/dev/null
  # The garbage collector runs: a ConfigMap owned by another goes when its owner goes.
  local owner uid
  owner="$(kapi POST /api/v1/namespaces/default/configmaps -H 'Content-Type: application/json' \
    --data-binary "{\"metadata\":{\"name\":\"$snap-owner\"}}")"
  uid="$(grep -o '"uid":"[^"]*"' <<<"$owner" | head -1 | cut -d'"' -f4)"
  kapi POST /api/v1/namespaces/default/configmaps -H 'Content-Type: application/json' \
    --data-binary "{\"metadata\":{\"name\":\"$snap-owned\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"$snap-owner\",\"uid\":\"$uid\"}]}}" >/dev/null
  kapi DELETE "/api/v1/namespaces/default/configmaps/$snap-owner" >/dev/null
  wait_for 60 "garbage collection of ConfigMap $snap-owned" gone "/api/v1/namespaces/default/configmaps/$snap-owned"
  log "verified: /version v1.36.3, node $NODE_NAME, VolumeSnapshotClass $CLASS_NAME, VolumeSnapshot create/validate/delete, garbage collector"
}

cmd_status() {
  [[ -f "$pids" ]] || { log "down"; return 0; }
  local n p t
  while read -r n p t; do
    if alive "$p" "$t"; then echo "$n pid $p running"; else echo "$n pid $p dead"; fi
  done <"$pids"
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
csi_socket="${CSI_SOCKET:-}"
with_scheduler="${LOCAL_CLUSTER_SCHEDULER:-0}"
with_csi="${LOCAL_CLUSTER_CSI:-1}"
with_node="${LOCAL_CLUSTER_NODE:-${NODE:-0}}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --csi-socket) csi_socket="$2"; shift 2 ;;
    --csi-socket=*) csi_socket="${1#*=}"; shift ;;
    --scheduler) with_scheduler=1; shift ;;
    --no-csi) with_csi=0; shift ;;
    --node) with_node=1; shift ;;
    *) [[ "$cmd" == csi && -z "$csi_socket" ]] && { csi_socket="$1"; shift; continue; }
       die "unknown argument: $1" ;;
  esac
done

[[ $with_node == 0 ]] || with_scheduler=1 # Pods must be bound to the node

mkdir -p "$state"
exec 9>"$state/.lock"
flock -w 120 9 || die "another cluster.sh holds $state/.lock"

case "$cmd" in
  up) cmd_up ;;
  down) cmd_down ;;
  verify) cmd_verify ;;
  status) cmd_status ;;
  csi)
    [[ -n "$csi_socket" ]] || die "usage: cluster.sh csi SOCKET"
    kapi GET /readyz >/dev/null 2>&1 || die "the cluster is not up (make cluster-up)"
    start_csi_sidecars "$csi_socket" ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
esac
