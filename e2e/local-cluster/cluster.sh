#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1, from the binaries build-tools.sh puts in
# target/tools/: etcd, kube-apiserver, kube-controller-manager, snapshot-controller and,
# given a CSI driver's socket, csi-snapshotter and csi-provisioner. By default no kubelet:
# the Node object is created by hand and Pods are never run. With NODE=1 (--node) a real
# node instead: containerd + CNI bridge + kubelet + kube-proxy, which registers the Node and
# runs Pods; the CSI driver is registered with that kubelet, which mounts its volumes.
#
#   cluster.sh up [--no-csi] [--csi-socket PATH] [--scheduler] [--node]
#                                start (idempotent), then verify; unless --no-csi, also
#                                vtsnap's btrfs CSI driver (e2e/csi-btrfs) on a loop device
#                                and its sidecars; --node: the real node (implies --scheduler)
#   cluster.sh csi PATH          start the CSI sidecars against a driver socket (cluster up)
#   cluster.sh verify            the checks `up` ends with
#   cluster.sh status            what runs, by pid
#   cluster.sh check-paths --node  refuse at once a state directory too deep for the
#                                node's unix sockets (what `up --node` checks first)
#   cluster.sh images            copy the images again into the running node (after
#                                `make images`; Pods started later use them)
#   cluster.sh down              stop everything and remove the state (idempotent); fails
#                                when a node left processes, mounts, cgroups, links or rules
#
# State, certificates, pids and kubeconfig under target/local-cluster/; each component
# logs to target/local-cluster/logs/ (kept by `down` for post-mortems; next `up` clears it).
# Environment: CSI_SOCKET (as --csi-socket), LOCAL_CLUSTER_SCHEDULER=1 (as --scheduler),
# NODE=1 or LOCAL_CLUSTER_NODE=1 (as --node; LOCAL_CLUSTER_NODE_IP, LOCAL_CLUSTER_POD_CIDR,
# LOCAL_CLUSTER_NODE_IMAGES, LOCAL_CLUSTER_KUBELET_{,HEALTHZ_}PORT,
# LOCAL_CLUSTER_PROXY_{HEALTHZ,METRICS}_PORT),
# LOCAL_CLUSTER_CSI=0 (as --no-csi), LOCAL_CLUSTER_CSI_BYTES (its sparse image, 8G),
# CSI_DRIVER_BIN (the driver binary, target/debug/vtsnap-csi-btrfs),
# LOCAL_CLUSTER_KEEP_ON_FAILURE=1 (no teardown when `up` fails), the ports
# LOCAL_CLUSTER_{ETCD,ETCD_PEER,APISERVER,KCM,SCHEDULER}_PORT, TOOLS_DIR, LOCAL_CLUSTER_DIR.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="${TOOLS_DIR:-$root/target/tools}"
# Absolute: the tests read the kubeconfig from another working directory.
state="$(realpath -m "${LOCAL_CLUSTER_DIR:-$root/target/local-cluster}")"
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

# Without the node, --endpoint-reconciler-type=none: the "kubernetes" Service gets no
# Endpoints, which would have to be a loopback address the API refuses (no pod runs).
start_apiserver() {
  # With the node: the API server reaches kubelet (logs, exec, port-forward) with a client
  # certificate (system:masters, as kubeadm's apiserver-kubelet-client) and checks kubelet's
  # serving certificate against the cluster CA.
  # Pods reach it as in-cluster clients do: the "kubernetes" Service's ClusterIP, which
  # kube-proxy sends to the endpoint the API server publishes (its advertised address), so
  # with the node it listens on every address and advertises the node's.
  local apiserver_node_flags=(--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none)
  if [[ $with_node == 1 ]]; then
    local ip
    ip="$(node_ip)"
    [[ -n "$ip" ]] || die "no address for the node (no default route): set LOCAL_CLUSTER_NODE_IP"
    [[ -f "$pki/apiserver-kubelet-client.crt" ]] ||
      make_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
    apiserver_node_flags=(--bind-address=0.0.0.0 --advertise-address="$ip" --endpoint-reconciler-type=lease
      --kubelet-certificate-authority="$pki/ca.crt"
      --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt"
      --kubelet-client-key="$pki/apiserver-kubelet-client.key"
      --kubelet-preferred-address-types=InternalIP)
  fi
  start_proc kube-apiserver "$tools/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --secure-port="$APISERVER_PORT" \
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
  # No attach step (a local bind mount): without this object kubelet would wait for a
  # VolumeAttachment that no external-attacher ever makes. fsGroup is applied by kubelet.
  cat >"$state/csidriver.yaml" <<EOF
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: $CSI_DRIVER
spec:
  attachRequired: false
  podInfoOnMount: false
  fsGroupPolicy: File
  volumeLifecycleModes: [Persistent]
EOF
  apply_yaml /apis/storage.k8s.io/v1/csidrivers "$CSI_DRIVER" "$state/csidriver.yaml"
  log "VolumeSnapshotClass and StorageClass $CLASS_NAME, CSIDriver $CSI_DRIVER"
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

csi_registered() {
  grep -q "\"name\":\"$CSI_DRIVER\"" <<<"$(kapi GET "/apis/storage.k8s.io/v1/csinodes/$NODE_NAME" 2>/dev/null)"
}

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
  # With the node, the registrar announces the driver to kubelet (plugins_registry), which
  # then calls its Node service to mount its volumes into Pods.
  if [[ $with_node == 1 ]]; then
    running csi-registrar || start_proc csi-registrar "$tools/registrar" --driver-name "$CSI_DRIVER" \
      --csi-endpoint "$csi_sock" --registration-dir "$kubelet_dir/plugins_registry"
    wait_for 60 "kubelet to register $CSI_DRIVER (CSINode $NODE_NAME)" csi_registered
  fi
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

# The node (NODE=1): containerd + CNI + kubelet, in its own file.
# shellcheck source-path=SCRIPTDIR source=node.sh
source "$here/node.sh"

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

# A unix socket's path holds at most 107 bytes (sun_path, 108 with its NUL), and Go's
# listeners refuse a longer one. The longest the cluster binds is the CSI driver's
# registration socket in kubelet's plugins_registry: a checkout deep enough to pass the
# limit is named here, not found as a registration that never comes.
check_socket_paths() {
  [[ $with_node == 1 ]] || return 0
  local longest="$state/node/kubelet/plugins_registry/$CSI_DRIVER-reg.sock"
  ((${#longest} <= 107)) || die "$longest is ${#longest} bytes, more than a unix socket's \
107: set LOCAL_CLUSTER_DIR to a directory at most $((107 - ${#longest} + ${#state})) bytes long"
}

cmd_up() {
  need_cmd openssl
  need_cmd curl
  need_cmd setsid util-linux
  check_tools
  check_socket_paths
  mkdir -p "$state"
  # A cluster that runs more than asked for (a node, a scheduler) would schedule and run
  # the node-less tests' Pods: it is taken down and started again as asked.
  if { [[ $with_node == 1 ]] || ! running kubelet; } && { [[ $with_scheduler == 1 ]] || ! running kube-scheduler; } &&
    all_running && kapi GET /readyz >/dev/null 2>&1; then
    log "already up at $api"
    apply_classes
  else
    if running kubelet || running kube-scheduler; then
      log "running with a node or a scheduler that was not asked for: starting again"
      cmd_down
    fi
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
  check-paths) check_socket_paths ;;
  images)
    running containerd || die "no node is running (cluster.sh up --node)"
    import_node_images ;;
  csi)
    [[ -n "$csi_socket" ]] || die "usage: cluster.sh csi SOCKET"
    kapi GET /readyz >/dev/null 2>&1 || die "the cluster is not up (make cluster-up)"
    start_csi_sidecars "$csi_socket" ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
esac
