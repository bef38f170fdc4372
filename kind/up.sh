#!/usr/bin/env bash
# make e2e / make e2e-keep: a kind cluster with TopoLVM thin snapshots, vitess-operator
# and a two-shard VitessCluster, with vtsnap's images and chart installed. Needs Docker,
# the internet, root (sudo) for LVM and loop devices, systemd, lvm2,
# thin-provisioning-tools and xfsprogs on the host, kubectl, and about 8 GiB of memory.
# Idempotent: a step whose result exists is skipped. kind/down.sh undoes all of it.
# shellcheck source=kind/lib.sh
source "$(dirname "$0")/lib.sh"
mkdir -p "$out"

need docker "install Docker (kind runs its nodes as Docker containers)"
need kubectl "install kubectl"
need lvcreate "apt-get install lvm2 thin-provisioning-tools"
need systemd-run "lvmd runs on the host as a transient systemd unit"
need curl "apt-get install curl"
kind=$(kind_bin)
helm=$(helm_bin)

# 1. The host: inotify limits, and AppArmor's user-namespace restriction, which kills
#    mysqld inside kind nodes on Ubuntu 24.04 (vitess-operator's CI does the same).
as_root sysctl -q -w fs.inotify.max_user_watches=524288 fs.inotify.max_user_instances=512
as_root sysctl -q -w kernel.apparmor_restrict_unprivileged_userns=0 2>/dev/null || true

# 2. One volume group with a thin pool per worker, on a loop file, and its lvmd.
lvmd=$out/bin/lvmd
if [ ! -x "$lvmd" ]; then
  mkdir -p "$out/bin"
  log "downloading lvmd $TOPOLVM_VERSION"
  curl -fsSL "https://github.com/topolvm/topolvm/releases/download/v$TOPOLVM_VERSION/lvmd-$TOPOLVM_VERSION.tar.gz" \
    | tar -xz -C "$out/bin" lvmd
fi
as_root mkdir -p "$state/backups"
as_root chmod 0777 "$state/backups"
for n in "${workers[@]}"; do
  vg=vtsnap-node$n-thin
  file=$state/vg$n.img
  as_root mkdir -p "$state/lvmd$n" "$state/worker$n"
  if ! as_root vgs "$vg" >/dev/null 2>&1; then
    log "volume group $vg on $file"
    as_root truncate --size="$VG_FILE_SIZE" "$file"
    dev=$(as_root losetup --find --show "$file")
    as_root vgcreate -y "$vg" "$dev" >/dev/null
    as_root lvcreate -T -n pool0 -L "$THIN_POOL_SIZE" "$vg" >/dev/null
  fi
  sed "s/@N@/$n/g" "$kind_dir/lvmd.yaml.in" >"$out/lvmd$n.yaml"
  if ! as_root systemctl is-active -q "vtsnap-lvmd$n.service"; then
    as_root systemctl reset-failed "vtsnap-lvmd$n.service" 2>/dev/null || true
    as_root systemd-run -q --unit="vtsnap-lvmd$n.service" "$lvmd" --config="$out/lvmd$n.yaml"
  fi
done

# 3. The kind cluster.
if ! "$kind" get clusters 2>/dev/null | grep -qx "$cluster"; then
  log "kind create cluster ($KIND_NODE_IMAGE)"
  "$kind" create cluster --config "$kind_dir/cluster.yaml" --image "$KIND_NODE_IMAGE" \
    --kubeconfig "$KUBECONFIG" --wait 300s
fi
"$kind" export kubeconfig --name "$cluster" --kubeconfig "$KUBECONFIG" >/dev/null

# 4. The snapshot CRDs and controller, TopoLVM, its VolumeSnapshotClass.
base=https://raw.githubusercontent.com/kubernetes-csi/external-snapshotter/$SNAPSHOTTER_VERSION
for f in client/config/crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml \
         client/config/crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml \
         client/config/crd/snapshot.storage.k8s.io_volumesnapshots.yaml \
         deploy/kubernetes/snapshot-controller/rbac-snapshot-controller.yaml \
         deploy/kubernetes/snapshot-controller/setup-snapshot-controller.yaml; do
  kubectl apply -f "$base/$f" >/dev/null
done
"$helm" repo add topolvm https://topolvm.github.io/topolvm >/dev/null 2>&1 || true
"$helm" upgrade --install topolvm topolvm/topolvm --version "$TOPOLVM_CHART_VERSION" \
  -n topolvm-system --create-namespace -f "$kind_dir/topolvm-values.yaml" --wait --timeout 10m >/dev/null
kubectl apply -f "$kind_dir/manifests/volumesnapshotclass.yaml" >/dev/null

# 5. vitess-operator (its install file hard-codes the namespace `example` and an rc image).
kubectl create namespace example --dry-run=client -o yaml | kubectl apply -f - >/dev/null
op=https://raw.githubusercontent.com/planetscale/vitess-operator/$VITESS_OPERATOR_VERSION/test/endtoend/operator
kubectl apply -n example --server-side -f "$op/operator.yaml" >/dev/null
kubectl -n example set image deploy/vitess-operator "vitess-operator=planetscale/vitess-operator:$VITESS_OPERATOR_VERSION" >/dev/null
kubectl -n example rollout status deploy/vitess-operator --timeout=300s >/dev/null

# 6. vtsnap: the images (built with a builder stage; Docker reaches a registry here),
#    loaded into the nodes, and the chart. Before the VitessCluster, so the webhook sees
#    the first vtbackup Pod.
version=$(grep -m1 '^version' "$root/Cargo.toml" | cut -d'"' -f2)
commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
for p in vtsnap-snapshot vtsnap-gc vtsnap-vtbackup-storage vtsnap-admission vtsnap-node vtsnap-restore; do
  run_as=65532:65532
  [ "$p" = vtsnap-node ] && run_as=0:0
  log "image vtsnap/$p:$version"
  docker build -q -f "$root/images/vtsnap/Containerfile.builder" --build-arg "PROGRAM=$p" \
    --build-arg "VERSION=$version" --build-arg "GIT_COMMIT=$commit" --build-arg "RUN_AS=$run_as" \
    -t "vtsnap/$p:$version" "$root" >/dev/null
  "$kind" load docker-image --name "$cluster" "vtsnap/$p:$version" >/dev/null
done
"$helm" upgrade --install vtsnap "$root/charts/vtsnap" -n vtsnap --create-namespace \
  -f "$kind_dir/manifests/vtsnap-values.yaml" --wait --timeout 5m >/dev/null

# 7. The VitessCluster, its Secret (users.json; init_db.sql taken from the operator's
#    example at the same tag), the VSchema and the table of the write load.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL "$op/101_initial_cluster.yaml" -o "$tmp/example.yaml"
python3 - "$tmp/example.yaml" "$tmp/init_db.sql" <<'PY'
import sys, yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if doc and doc.get("kind") == "Secret":
        open(sys.argv[2], "w").write(doc["stringData"]["init_db.sql"])
        break
else:
    sys.exit("no Secret with init_db.sql in the operator's example")
PY
printf '{"user": [{"UserData": "user", "Password": ""}]}\n' >"$tmp/users.json"
kubectl -n example create secret generic example-cluster-config \
  --from-file=users.json="$tmp/users.json" --from-file=init_db.sql="$tmp/init_db.sql" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f "$kind_dir/manifests/vitesscluster.yaml" >/dev/null
# The initial backups' Pods as seen while they run: the operator deletes each once its
# backup is complete, and the kind tests check their data volume (kind.rs reads these).
seen=$out/vtbackup-init-pods
mkdir -p "$seen"
keep_init_pods() {
  local p
  for p in $(kubectl -n example get pods -o name \
    -l planetscale.com/component=vtbackup,backup.planetscale.com/type=init 2>/dev/null); do
    kubectl -n example get "$p" -o json >"$seen/${p#pod/}.json.tmp" 2>/dev/null \
      && mv "$seen/${p#pod/}.json.tmp" "$seen/${p#pod/}.json"
  done
  rm -f "$seen"/*.tmp
}
log "waiting for six tablets (3/3 ready each)"
deadline=$((SECONDS + 1200))
until [ "$(kubectl -n example get pods -l planetscale.com/component=vttablet \
  -o jsonpath='{range .items[*]}{.status.containerStatuses[*].ready}{"\n"}{end}' 2>/dev/null \
  | grep -c '^true true true$')" -ge 6 ]; do
  [ $SECONDS -lt $deadline ] || die "the tablets did not become ready in 20 minutes"
  keep_init_pods
  sleep 5
done
keep_init_pods
vtctld=$(kubectl -n example get pods -l planetscale.com/component=vtctld -o name | head -1)
kubectl -n example exec "$vtctld" -c vtctld -- vtctldclient --server localhost:15999 \
  ApplyVSchema --vschema "$(cat "$kind_dir/manifests/vschema.json")" commerce >/dev/null
kubectl -n example exec "$vtctld" -c vtctld -- vtctldclient --server localhost:15999 \
  ApplySchema --sql "$(cat "$kind_dir/manifests/schema.sql")" commerce >/dev/null
kubectl apply -f - >/dev/null <<YAML
$(sed -n '/^apiVersion: v1$/,/^---$/p' "$kind_dir/manifests/write-load.yaml" | sed '$d')
YAML
log "up: KUBECONFIG=$KUBECONFIG"
