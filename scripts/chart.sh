#!/usr/bin/env bash
# make chart: lint the chart and render it with each example values file under
# charts/vtsnap/ci/ into target/chart/<name>.yaml; then check that bad values are
# refused with a message naming what is wrong (the schema, and the chart's own checks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
helm=${HELM:-$root/target/tools/helm}
[ -x "$helm" ] || { echo "chart: $helm is missing (make tools builds it)" >&2; exit 1; }
chart=charts/vtsnap
out=target/chart
rm -rf "$out" && mkdir -p "$out"
kube_version=1.36.3 # the local control plane's (e2e/local-cluster/build-tools.sh)

for values in "$chart"/ci/*-values.yaml; do
  name=$(basename "$values" -values.yaml)
  "$helm" lint --strict "$chart" -f "$values" --kube-version "$kube_version" >"$out/$name.lint" 2>&1 \
    || { cat "$out/$name.lint"; echo "chart: helm lint failed with $values" >&2; exit 1; }
  "$helm" template vtsnap "$chart" -n vtsnap -f "$values" --kube-version "$kube_version" >"$out/$name.yaml"
  # Every image names its version: a tag, and never latest.
  if grep -E '^\s*image: ' "$out/$name.yaml" | grep -vE ':[0-9A-Za-z._-]+"?$' | grep . \
    || grep -E '^\s*image: .*:latest"?$' "$out/$name.yaml"; then
    echo "chart: an image without a version tag in $out/$name.yaml" >&2; exit 1
  fi
  echo "chart: $values → $out/$name.yaml ($(grep -c '^kind:' "$out/$name.yaml") objects)"
done

# Each bad value must fail, and the message must contain the given words.
refuse() { # words, --set arguments...
  local words=$1; shift
  local msg
  if msg=$("$helm" template vtsnap "$chart" -f "$chart/ci/default-values.yaml" "$@" 2>&1); then
    echo "chart: accepted $*; it must be refused" >&2; exit 1
  fi
  if ! grep -qF -- "$words" <<<"$msg"; then
    echo "chart: $* was refused without naming '$words':" >&2; echo "$msg" >&2; exit 1
  fi
  echo "chart: refused $* ($(grep -F -- "$words" <<<"$msg" | head -1 | sed 's/^[- ]*//'))"
}
refuse "additional properties 'shard' not allowed" --set 'snapshot.shard[0].cluster=example'
refuse "additional properties 'replica' not allowed" --set admission.replica=3
refuse "/admission/replicas': got string, want integer" --set admission.replicas=two
refuse "/snapshot/staggerMinutes': got boolean, want integer" --set snapshot.staggerMinutes=true
refuse "/node/kubeletDir': 'var/lib/kubelet' does not match pattern" --set node.kubeletDir=var/lib/kubelet
refuse "/gc/schedule'" --set gc.schedule=hourly
refuse "/admission/certificate/source'" --set admission.certificate.source=vault
refuse "/snapshot/shards/0/mode'" --set 'snapshot.shards[0].mode=warm'
refuse "image.tag: latest is refused" --set image.tag=latest
refuse 'snapshot.shards[0].cluster: "nope" is not a config.clusters[].name' --set 'snapshot.shards[0].cluster=nope'
refuse "missing property 'clusters'" --set 'config.clusters=null'
refuse "/config/clusters': minItems: got 0, want 1" --set-json 'config.clusters=[]'
refuse "/config/clusters/0': missing property 'namespace'" --set-json 'config.clusters=[{"name":"x"}]'
refuse "is already snapshot.shards[0]'s" --set-json 'snapshot.shards=[{"cluster":"example","keyspace":"commerce","shard":"-"},{"cluster":"example","keyspace":"commerce","shard":"-"}]'
refuse "must be below admission.replicas" --set admission.replicas=1
refuse "/snapshot/reconcile/schedule'" --set snapshot.reconcile.schedule=hourly
refuse "additional properties 'enable' not allowed" --set snapshot.reconcile.enable=true
refuse 'drill.shards[0].cluster: "nope" is not a config.clusters[].name' --set drill.enabled=true --set 'drill.shards[0].cluster=nope' --set 'drill.shards[0].keyspace=k' --set 'drill.shards[0].shard=-'
refuse "/drill/deadline'" --set drill.deadline=soon
refuse "at '/drill/shards/0': additional properties 'mode' not allowed" --set-json 'drill.shards=[{"cluster":"example","keyspace":"k","shard":"-","mode":"cold"}]'
refuse "pitr.backupStorage: name where Vitess keeps its backups" --set pitr.enabled=true
refuse "pitr.backupStorage: url and volume name two storages" --set pitr.enabled=true --set pitr.backupStorage.url=s3://b/r --set pitr.backupStorage.volume.nfs.server=n --set pitr.backupStorage.volume.nfs.path=/p
refuse "/pitr/backupStorage/url'" --set pitr.enabled=true --set pitr.backupStorage.url=ftp://b/r
refuse "/pitr/backupStorage/secret'" --set pitr.enabled=true --set pitr.backupStorage.url=s3://b/r --set pitr.backupStorage.secret=Bad_Name
nfs='pitr.backupStorage.volume={"nfs":{"server":"nfs","path":"/b"}}'
refuse "pitr.enabled: the binlog archive's CronJobs are made by the schedule reconciler" --set pitr.enabled=true --set-json "$nfs" --set snapshot.reconcile.enabled=false
refuse "/pitr/backupTimeout'" --set pitr.backupTimeout=soon
refuse "/pitr/backupStorage/root': 'vt/backups' does not match pattern" --set pitr.backupStorage.root=vt/backups
refuse "at '/pitr/shards/0': additional properties 'mode' not allowed" --set-json 'pitr.shards=[{"cluster":"example","keyspace":"k","shard":"-","mode":"cold"}]'

if grep -q -- '-drill-' "$out/default.yaml"; then
  echo "chart: drills are off by default, yet rendered" >&2; exit 1
fi

# With the reconciler (the default) the chart renders the template and the reconciler,
# and no per-shard CronJob; without it, one CronJob per snapshot.shards entry.
python3 - "$out/default.yaml" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
crons = [d["metadata"]["name"] for d in docs if d["kind"] == "CronJob"]
assert not any("-snap-" in c for c in crons), crons
cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-snapshot-schedule"))
template = json.loads(cm["data"]["cronjob.json"])
c = template["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
assert [x["name"] for x in c] == ["snapshot"] and c[0]["args"] == ["run"], c
assert isinstance(json.loads(cm["data"]["overrides.json"]), list)
print("chart: the reconciler's template renders; no per-shard CronJob")
PY
"$helm" template vtsnap "$chart" -n vtsnap -f "$chart/ci/full-values.yaml" --set snapshot.reconcile.enabled=false --set pitr.enabled=false \
  --kube-version "$kube_version" >"$out/no-reconciler.yaml"
if ! grep -q 'name: vtsnap-snap-' "$out/no-reconciler.yaml" || grep -q 'snapshot-schedule' "$out/no-reconciler.yaml"; then
  echo "chart: without the reconciler, per-shard CronJobs and no template are expected" >&2; exit 1
fi
echo "chart: without the reconciler, one CronJob per snapshot.shards entry"

# Without the reconciler, a drill CronJob per drill.shards entry: its arguments name the
# images and the shard, and the Job's name and UID reach it from the Pod's labels (the
# owner of its objects).
python3 - "$out/no-reconciler.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
crons = {d["metadata"]["name"]: d for d in docs if d["kind"] == "CronJob" and "-drill-" in d["metadata"]["name"]}
assert sorted(crons) == ["vtsnap-drill-main-commerce-x-80", "vtsnap-drill-reporting-reports-x-x"], sorted(crons)
c = crons["vtsnap-drill-main-commerce-x-80"]
assert c["spec"]["schedule"] == "45 4 * * *", c["spec"]
pod = c["spec"]["jobTemplate"]["spec"]["template"]["spec"]
assert pod["serviceAccountName"] == "vtsnap-drill", pod
assert pod["imagePullSecrets"] == [{"name": "regcred"}], pod
args = pod["containers"][0]["args"]
want = ["run", "--restore-image", "registry.example.com:5000/platform/vtsnap/vtsnap-restore:0.1.0",
        "--checker-image", "registry.example.com:5000/platform/vtsnap/vtsnap-drill:0.1.0"]
assert args[:len(want)] == want, args
assert args[-5:] == ["--cluster", "main", "--keyspace", "commerce", "--shard=-80"], args
assert "--drill-uid=999999999" in args and args[args.index("--mysqld-command") + 1] == "mariadbd", args
assert args[args.index("--image-pull-secret") + 1] == "regcred", args
env = {e["name"]: e for e in pod["containers"][0]["env"]}
assert env["VTSNAP_OWNER_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['batch.kubernetes.io/controller-uid']", env
assert crons["vtsnap-drill-reporting-reports-x-x"]["spec"]["suspend"] is True
roles = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "vtsnap-drill"]
assert sorted(r["metadata"]["namespace"] for r in roles) == ["vitess", "vitess-reporting"], roles
print("chart: without the reconciler, one drill CronJob per drill.shards entry, its Job the owner of the drill's objects")
PY

# With it, no drill CronJob is rendered: the reconciler's ConfigMap carries the drill
# template (the same arguments and owner, no shard) and drill.shards as its overrides.
python3 - "$out/full.yaml" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
crons = [d["metadata"]["name"] for d in docs if d["kind"] == "CronJob"]
assert not any("-drill-" in c for c in crons), crons
cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-snapshot-schedule"))
t = json.loads(cm["data"]["drill-cronjob.json"])
pod = t["spec"]["jobTemplate"]["spec"]["template"]["spec"]
assert pod["serviceAccountName"] == "vtsnap-drill" and pod["imagePullSecrets"] == [{"name": "regcred"}], pod
c = pod["containers"]
assert [x["name"] for x in c] == ["drill"], c
assert c[0]["args"][0] == "run" and "--cluster" not in c[0]["args"], c[0]["args"]
assert {e["name"] for e in c[0]["env"]} >= {"VTSNAP_OWNER_NAME", "VTSNAP_OWNER_UID"}, c[0]["env"]
over = json.loads(cm["data"]["drill-overrides.json"])
assert [(o["cluster"], o["shard"]) for o in over] == [("main", "-80"), ("reporting", "-")], over
print("chart: with the reconciler, the drill template and its overrides in its ConfigMap")
PY

# The binlog archive's template: vtsnap-pitr archive with the backup storage mounted
# read-only where --archive-root reads it, its own account and Roles, no shard; its
# overrides beside it. Off by default.
python3 - "$out/full.yaml" "$out/default.yaml" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-snapshot-schedule"))
t = json.loads(cm["data"]["archive-cronjob.json"])
assert t["spec"]["concurrencyPolicy"] == "Forbid", t["spec"]
pod = t["spec"]["jobTemplate"]["spec"]["template"]["spec"]
assert pod["serviceAccountName"] == "vtsnap-pitr", pod
c = pod["containers"]
assert [x["name"] for x in c] == ["archive"], c
assert c[0]["image"] == "registry.example.com:5000/platform/vtsnap/vtsnap-pitr:0.1.0", c[0]["image"]
assert c[0]["args"] == ["archive", "--archive-root", "/vt/backups", "--backup-timeout", "30m"], c[0]["args"]
mounts = {m["name"]: m for m in c[0]["volumeMounts"]}
assert mounts["backups"] == {"name": "backups", "mountPath": "/vt/backups", "readOnly": True}, mounts
volumes = {v["name"]: v for v in pod["volumes"]}
assert volumes["backups"] == {"name": "backups", "nfs": {"server": "nfs.example.com", "path": "/exports/vitess-backups"}}, volumes
over = json.loads(cm["data"]["archive-overrides.json"])
assert [(o["cluster"], o["shard"], o["schedule"]) for o in over] == [("main", "-80", "*/5 * * * *")], over
roles = {(d["metadata"]["namespace"], tuple(r["resources"][0] for r in d["rules"])) for d in docs
         if d["kind"] == "Role" and d["metadata"]["name"] == "vtsnap-pitr"}
assert roles == {(ns, ("volumesnapshots", "services")) for ns in ("vitess", "vitess-reporting")}, roles
default = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
cm = next(d for d in default if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-snapshot-schedule"))
assert "archive-cronjob.json" not in cm["data"], cm["data"].keys()
assert not any(d["metadata"]["name"] == "vtsnap-pitr" for d in default), "no pitr account by default"
print("chart: the archive template, its storage mount and its Roles; off by default")
PY

# Vitess's storage in an object store: the archive and the recovery read it by URL, with
# the Secret's keys as their environment and no storage mount; the recovery passes the
# Secret on to its Pod's fetch container.
"$helm" template vtsnap "$chart" -n vtsnap -f "$chart/ci/full-values.yaml" --kube-version "$kube_version" \
  --set pitr.backupStorage.url=s3://vitess-backups/prod --set pitr.backupStorage.secret=vitess-s3 \
  --set-json pitr.backupStorage.volume=null >"$out/pitr-s3.yaml"
python3 - "$out/pitr-s3.yaml" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-snapshot-schedule"))
for key, args in [("archive-cronjob.json", ["archive", "--archive-url", "s3://vitess-backups/prod", "--backup-timeout", "30m"]),
                  ("recover-cronjob.json", ["run", "--archive-url", "s3://vitess-backups/prod", "--archive-secret", "vitess-s3"])]:
    pod = json.loads(cm["data"][key])["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["args"][:len(args)] == args, (key, c["args"])
    assert "--archive-root" not in c["args"] and "--archive-volume" not in c["args"], (key, c["args"])
    assert c["envFrom"] == [{"secretRef": {"name": "vitess-s3"}}], (key, c.get("envFrom"))
    assert [m["name"] for m in c["volumeMounts"]] == ["config"], (key, c["volumeMounts"])
    assert [v["name"] for v in pod["volumes"]] == ["config"], (key, pod["volumes"])
print("chart: an object-store archive is read by URL with its Secret, nothing mounted")
PY

# A long release name: CronJob names within 52 characters (the Job controller appends to
# them), Services, Deployments and DaemonSets within 63 (DNS labels), the rest within 253.
long=vtsnap-production-databases-eu-west-1-blue-green
"$helm" template "$long" "$chart" -n vtsnap -f "$chart/ci/full-values.yaml" --kube-version "$kube_version" >"$out/long-release.yaml"
python3 - "$out/long-release.yaml" <<'PY'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if not d:
        continue
    name = d["metadata"]["name"]
    limit = {"CronJob": 52, "Service": 63, "Deployment": 63, "DaemonSet": 63}.get(d["kind"], 253)
    assert len(name) <= limit, f"{d['kind']} {name}: {len(name)} characters, more than {limit}"
print("chart: with a 48-character release name every name fits")
PY
python3 scripts/chart-values-doc.py --check
echo "chart: lint, render and refusals passed"
