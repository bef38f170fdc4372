#!/usr/bin/env bash
# Builds the real Kubernetes control plane and the CSI sidecars from their upstream Go
# modules into target/tools/ (test infrastructure only; the product is Rust):
#
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler   tools/control-plane/
#   snapshot-controller, csi-snapshotter                           tools/snapshotter/
#   csi-provisioner                                                tools/provisioner/
#   helm (for the chart's tests)                                   tools/helm/
#   csi-sanity (the CSI driver's conformance test)                 tools/csi-test/
#   crds/*.yaml  (VolumeSnapshot CRDs, copied from the module cache)
#
# Each directory under tools/ is a Go module of our own holding only go.mod/go.sum with
# `tool` directives; the upstream code stays in the Go module cache. Separate modules
# because the sidecars' dependency graphs clash with k8s.io/kubernetes' under MVS.
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

# name | module dir (under tools/) | package | ldflags kind
TOOLS=(
  "etcd|control-plane|go.etcd.io/etcd/server/v3|etcd"
  "kube-apiserver|control-plane|k8s.io/kubernetes/cmd/kube-apiserver|k8s"
  "kube-controller-manager|control-plane|k8s.io/kubernetes/cmd/kube-controller-manager|k8s"
  "kube-scheduler|control-plane|k8s.io/kubernetes/cmd/kube-scheduler|k8s"
  "snapshot-controller|snapshotter|github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller|snapshotter"
  "csi-snapshotter|snapshotter|github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter|snapshotter"
  "csi-provisioner|provisioner|github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner|provisioner"
  "helm|helm|helm.sh/helm/v3/cmd/helm|helm"
  "csi-sanity|csi-test|github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity|csi-test"
)
MODULES=(control-plane snapshotter provisioner helm csi-test)
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
      echo "-s -w$f" ;;
    etcd) echo "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=none" ;; # 3.6.8: a constant
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
      sha256sum "$here/tools/$m/go.mod" "$here/tools/$m/go.sum" | awk '{print $1}'
    done
    sha256sum "$here/build-tools.sh" | awk '{print $1}'
    "$GO" version
  } | sha256sum | awk '{print $1}'
}

all_outputs_exist() {
  local t name
  for t in "${TOOLS[@]}"; do
    name="${t%%|*}"
    [[ -x "$out/$name" ]] || return 1
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
  step "download $m" bash -c "cd '$here/tools/$m' && '$GO' mod download"
done

for t in "${TOOLS[@]}"; do
  IFS='|' read -r name mod pkg kind <<<"$t"
  step "build $name" bash -c "cd '$here/tools/$mod' && '$GO' build -trimpath -buildvcs=false \
    -ldflags '$(ldflags "$kind")' -o '$out/$name.tmp' '$pkg' && mv '$out/$name.tmp' '$out/$name'"
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
