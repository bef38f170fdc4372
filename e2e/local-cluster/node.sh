#!/usr/bin/env bash
# The local cluster's real node (NODE=1): containerd + CNI + kubelet. Sourced by
# cluster.sh, whose helpers (log, die, need_cmd, start_proc, kapi, make_cert, ...) and
# settings it uses; not run on its own.
# shellcheck disable=SC2154 # the variables are cluster.sh's

# ---- the node (NODE=1): containerd + CNI + kubelet -----------------------------------
#
# A real kubelet registers $NODE_NAME itself (no hand-made status) and runs Pods through
# containerd (built by build-tools.sh), Debian's runc and the CNI bridge plugin. Images:
# no registry is reachable, so the sandbox ("pause") image is our own program
# (e2e/local-cluster/pause) packed here, and LOCAL_CLUSTER_NODE_IMAGES (Podman images;
# default: the ones `make images` builds that Podman has) are copied in with
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
PROXY_HEALTHZ_PORT="${LOCAL_CLUSTER_PROXY_HEALTHZ_PORT:-10256}"
PROXY_METRICS_PORT="${LOCAL_CLUSTER_PROXY_METRICS_PORT:-10249}"
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
  local t="$node_dir/pause.tar"
  pause_image_tar "$t"
  # (ctr repeats containerd's cgroup v1 deprecation warning: to the log, not the terminal)
  ctr_ images import "$t" >/dev/null 2>>"$logs/containerd.log" || die "could not import $PAUSE_IMAGE"
  rm -f "$t"
  local images="${LOCAL_CLUSTER_NODE_IMAGES-}"
  if [[ -z "${LOCAL_CLUSTER_NODE_IMAGES+x}" ]] && command -v podman >/dev/null 2>&1; then
    # what `make images` builds: the base, the Vitess and MariaDB images, one per program
    images="$(podman images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null |
      grep -E '^localhost/vtsnap(/vtsnap-[a-z-]+|-debian|-mariadb|-vitess):' | sort -u | tr '\n' ' ')"
  fi
  [[ -n "${images// /}" ]] || return 0
  local s0=$SECONDS
  # one archive for all of them: shared layers are written once
  # shellcheck disable=SC2086 # a list of image names
  podman save --multi-image-archive --format docker-archive $images |
    ctr_ images import - >/dev/null 2>>"$logs/containerd.log" ||
    die "could not copy images from Podman into containerd: $images"
  log "images copied into the node ($((SECONDS - s0))s): $images"
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

# kube-proxy (iptables mode): Services' ClusterIPs work from Pods and from the host, as
# users expect (the API server calls the webhook through its Service; Pods reach the API
# server at the "kubernetes" Service). Differences from a production node: conntrack and
# route_localnet sysctls are left alone (this sandbox may not set them; no NodePort on
# localhost is needed), and it runs as a host process, not a DaemonSet.
write_kube_proxy_config() {
  make_cert kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
  write_kubeconfig "$node_dir/kube-proxy.kubeconfig" system:kube-proxy kube-proxy
  # KubeProxyConfiguration (k8s.io/kube-proxy config/v1alpha1 types.go)
  cat >"$node_dir/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $node_dir/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
iptables:
  localhostNodePorts: false
  masqueradeAll: false
  syncPeriod: 5s
  minSyncPeriod: 0s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
nodePortAddresses: [primary]
EOF
}

# The API server's own Service answers through kube-proxy's rules (from the host).
kube_proxy_serving() {
  curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://$SERVICE_IP:443/readyz" >/dev/null 2>&1
}

start_kube_proxy() {
  write_kube_proxy_config
  start_proc kube-proxy "$tools/kube-proxy" --config="$node_dir/kube-proxy-config.yaml" --v=1
  wait_for 60 "kube-proxy: the kubernetes Service ($SERVICE_IP:443) answers" kube_proxy_serving
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
  for t in kubelet kube-proxy containerd containerd-shim-runc-v2 ctr pause cni/bridge cni/host-local cni/loopback cni/portmap; do
    [[ -x "$tools/$t" ]] || die "$tools/$t missing: run e2e/local-cluster/build-tools.sh (make tools)"
  done
  ip="$(node_ip)"
  [[ -n "$ip" ]] || die "no address for the node (no default route): set LOCAL_CLUSTER_NODE_IP"
  port_free "$KUBELET_HEALTHZ_PORT" || die "127.0.0.1:$KUBELET_HEALTHZ_PORT is in use (LOCAL_CLUSTER_KUBELET_HEALTHZ_PORT)"
  port_free "$PROXY_HEALTHZ_PORT" || die "127.0.0.1:$PROXY_HEALTHZ_PORT is in use (LOCAL_CLUSTER_PROXY_HEALTHZ_PORT)"
  port_free "$PROXY_METRICS_PORT" || die "127.0.0.1:$PROXY_METRICS_PORT is in use (LOCAL_CLUSTER_PROXY_METRICS_PORT)"
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
  start_kube_proxy
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
  stop_one kube-proxy
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
  local m c f
  for m in $(node_mounts); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  for _ in 1 2 3 4 5; do
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
