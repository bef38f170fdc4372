#!/usr/bin/env bash
# Builds the real Kubernetes control plane and the CSI sidecars from their upstream Go
# modules into target/tools/ (test infrastructure only; the product is Rust):
#
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
#   kubelet, kube-proxy, kubectl                                   tools/control-plane/
#   registrar (kubelet's CSI plugin registration: our own code)    tools/control-plane/registrar/
#   containerd, containerd-shim-runc-v2, ctr (the local node)      tools/containerd/
#   cni/{bridge,host-local,loopback,portmap} (its pod network)     tools/cni/
#   snapshot-controller, csi-snapshotter                           tools/snapshotter/
#   csi-provisioner                                                tools/provisioner/
#   helm (for the chart's tests)                                   tools/helm/
#   csi-sanity (the CSI driver's conformance test)                 tools/csi-test/
#   pause (the node's sandbox program: our own code)               pause/
#   crds/*.yaml  (VolumeSnapshot CRDs, copied from the module cache)
#
# Each directory under tools/ is a Go module of our own holding only go.mod/go.sum with
# `tool` directives (and, in control-plane/, our registrar); the upstream code stays in the
# Go module cache. Separate modules
# because the sidecars' dependency graphs clash with k8s.io/kubernetes' under MVS.
# One `go build` per module builds all of its binaries (shared packages compile once).
# runc is not built: the node uses Debian's (package runc, scripts/setup-host.sh).
#
# Cached: a stamp records a hash of every go.mod/go.sum, this script and `go version`;
# when it matches and every output exists, nothing is rebuilt.
#
# Usage: build-tools.sh [--force]      (TOOLS_DIR overrides the output directory)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${TOOLS_DIR:-$root/target/tools}"
force=0
[[ "${1:-}" == "--force" ]] && force=1

if command -v go >/dev/null 2>&1; then GO="$(command -v go)"
elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
else echo "build-tools: no Go toolchain (go) found in PATH" >&2; exit 1; fi

# Versions: the modules' own versions, stamped into the binaries below.
K8S_VERSION=v1.36.3
SNAPSHOTTER_VERSION=v8.7.0
PROVISIONER_VERSION=v6.4.0
HELM_VERSION=v3.22.0
HELM_K8S_MINOR=37 # the k8s.io/client-go minor helm v3.22.0 is built with: its default kube version
CSI_TEST_VERSION=v5.6.0

CONTAINERD_VERSION=v2.4.2
CNI_PLUGINS_VERSION=v1.10.0

# One `go build` per entry: module dir (under e2e/local-cluster/) | ldflags kind | output subdir
# ("." = target/tools) | name=package ... (the binary's name in the output directory)
BUILDS=(
  "tools/control-plane|k8s|.|etcd=go.etcd.io/etcd/server/v3 kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler kubelet=k8s.io/kubernetes/cmd/kubelet kubectl=k8s.io/kubernetes/cmd/kubectl kube-proxy=k8s.io/kubernetes/cmd/kube-proxy registrar=vtsnap/e2e/local-cluster/tools/control-plane/registrar"
  "tools/containerd|containerd|.|containerd=github.com/containerd/containerd/v2/cmd/containerd containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 ctr=github.com/containerd/containerd/v2/cmd/ctr"
  "tools/cni|cni|cni|bridge=github.com/containernetworking/plugins/plugins/main/bridge host-local=github.com/containernetworking/plugins/plugins/ipam/host-local loopback=github.com/containernetworking/plugins/plugins/main/loopback portmap=github.com/containernetworking/plugins/plugins/meta/portmap"
  "tools/snapshotter|snapshotter|.|snapshot-controller=github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller csi-snapshotter=github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
  "tools/provisioner|provisioner|.|csi-provisioner=github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
  "tools/helm|helm|.|helm=helm.sh/helm/v3/cmd/helm"
  "tools/csi-test|csi-test|.|csi-sanity=github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity"
  "pause|plain|.|pause=vtsnap/e2e/local-cluster/pause"
)
MODULES=(tools/control-plane tools/containerd tools/cni tools/snapshotter tools/provisioner tools/helm tools/csi-test pause)
# from the snapshotter's client module (its config/crd), the release the binaries use
CRDS=(
  snapshot.storage.k8s.io_volumesnapshotclasses.yaml
  snapshot.storage.k8s.io_volumesnapshotcontents.yaml
  snapshot.storage.k8s.io_volumesnapshots.yaml
  groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses.yaml
  groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml
  groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml
)

ldflags() {
  local k8s_minor
  k8s_minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
  case "$1" in
    k8s)
      local f=""
      for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        f+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor"
        # no commit: the module zip has none (an empty gitCommit, not "$Format:%H$")
        f+=" -X $p.gitCommit= -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
      done
      # one build links etcd and the Kubernetes binaries: -X naming a package a binary does
      # not link is ignored, so both sets go to all of them
      f+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=none" # etcd 3.6.8: its version is a constant
      echo "-s -w$f" ;;
    containerd)
      local p=github.com/containerd/containerd/v2/version # version/version.go: Version, Revision
      echo "-s -w -X $p.Version=$CONTAINERD_VERSION -X $p.Revision= -X $p.Package=github.com/containerd/containerd/v2" ;;
    plain) echo "-s -w" ;;
    cni) echo "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" ;;
    snapshotter) echo "-s -w -X main.version=$SNAPSHOTTER_VERSION" ;;
    provisioner) echo "-s -w -X main.version=$PROVISIONER_VERSION" ;;
    csi-test) echo "-s -w -X main.VERSION=$CSI_TEST_VERSION" ;; # cmd/csi-sanity/main.go: var VERSION
    helm)
      local f="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
      f+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
      for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
        f+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$HELM_K8S_MINOR"
      done
      echo "$f" ;;
  esac
}

inputs_hash() {
  {
    for m in "${MODULES[@]}"; do
      # (pause/ and control-plane/registrar/ are our own programs: their .go files)
      find "$here/$m" -maxdepth 2 -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) -print0 |
        sort -z | xargs -0 sha256sum | awk '{print $1}'
    done
    sha256sum "$here/build-tools.sh" | awk '{print $1}'
    "$GO" version
  } | sha256sum | awk '{print $1}'
}

all_outputs_exist() {
  local b mod kind sub bins nv
  for b in "${BUILDS[@]}"; do
    IFS='|' read -r mod kind sub bins <<<"$b"
    for nv in $bins; do [[ -x "$out/$sub/${nv%%=*}" ]] || return 1; done
  done
  for c in "${CRDS[@]}"; do [[ -s "$out/crds/$c" ]] || return 1; done
}

mkdir -p "$out"
exec 8>"$out/.build.lock"
flock 8 # one build at a time

stamp="$out/.build-stamp"
want="$(inputs_hash)"
if [[ $force == 0 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && all_outputs_exist; then
  echo "build-tools: target/tools is up to date ($("$GO" version | awk '{print $3}'), inputs ${want:0:12})"
  exit 0
fi

mkdir -p "$out/crds"
rm -f "$stamp"
export CGO_ENABLED=0
summary=()
total_start=$SECONDS

step() { # label, command...
  local label="$1"; shift
  local s=$SECONDS
  echo "== $label"
  "$@"
  summary+=("$(printf '%-34s %6ss' "$label" $((SECONDS - s)))")
}

for m in "${MODULES[@]}"; do
  step "download $m" bash -c "cd '$here/$m' && '$GO' mod download"
done

# go build -o DIR/ names a binary after its package's last element (before a /vN suffix):
# built into a scratch directory, then renamed into place.
build_module() { # module kind subdir "name=pkg ..."
  local mod="$1" kind="$2" sub="$3" nv pkgs=() tmp
  for nv in $4; do pkgs+=("${nv#*=}"); done
  tmp="$out/.build-${mod##*/}"
  rm -rf "$tmp"
  mkdir -p "$tmp" "$out/$sub"
  (cd "$here/$mod" && "$GO" build -trimpath -buildvcs=false -ldflags "$(ldflags "$kind")" \
    -o "$tmp/" "${pkgs[@]}")
  for nv in $4; do
    local pkg="${nv#*=}" base
    base="${pkg##*/}"
    [[ "$base" =~ ^v[0-9]+$ ]] && { base="${pkg%/*}"; base="${base##*/}"; }
    mv "$tmp/$base" "$out/$sub/${nv%%=*}"
  done
  rmdir "$tmp"
}

for b in "${BUILDS[@]}"; do
  IFS='|' read -r mod kind sub bins <<<"$b"
  names=""
  for nv in $bins; do names+=" ${nv%%=*}"; done
  step "build$names" build_module "$mod" "$kind" "$sub" "$bins"
done

copy_crds() {
  local dir
  dir="$(cd "$here/tools/snapshotter" && "$GO" list -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8)"
  for c in "${CRDS[@]}"; do
    install -m 0644 "$dir/config/crd/$c" "$out/crds/$c"
  done
}
step "copy VolumeSnapshot CRDs" copy_crds

echo "$want" >"$stamp"
echo
echo "build-tools: $("$GO" version | awk '{print $3}'), $(nproc) cores, into ${out#"$root"/}"
printf '%-34s %7s\n' step time
for line in "${summary[@]}"; do echo "$line"; done
printf '%-34s %6ss\n' total $((SECONDS - total_start))
