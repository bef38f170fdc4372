//! `vtsnap-drill plan --objects`: the same decision from a dump instead of the cluster, for
//! previews and support (docs/drill.md). vtctld is not asked: its view of the shard comes
//! from `--shard-state` (what the webhook's `/debug/shards` returns for it), and without it
//! the shard's MySQL series is unknown, so the plan refuses as a run would. What the
//! primary purged is never known offline: the catch-up part of the verdict is left out.

use std::path::Path;

use serde_json::Value;
use vtsnap_core::config::ConfiguredShard;
use vtsnap_core::input::{Accept, MAX_DUMP, read_bounded};
use vtsnap_core::snapshot::VolumeSnapshot;
use vtsnap_core::snapshot::choice::ShardState;
use vtsnap_core::tablet_volume::{data_claim_of, shape_tablet};

use super::{Observed, TabletPod, TabletPvc, drill_selector, tablet_selector};

/// Reads a bounded JSON file that is not a dump (the shard state; a pipe is accepted),
/// naming it in every error. The dump is read by [`vtsnap_core::dump`].
pub fn read_json(path: &Path, what: &'static str) -> Result<Value, String> {
    let bytes =
        read_bounded(path, what, MAX_DUMP, Accept::FileOrPipe).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: not JSON: {e}", path.display()))
}

/// Whether `obj` (in `namespace`) carries every `key=value` of `selector`.
fn selected(obj: &Value, namespace: &str, selector: &str) -> bool {
    let in_ns = obj.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace);
    in_ns
        && selector.split(',').all(|kv| {
            kv.split_once('=').is_some_and(|(k, v)| {
                obj.pointer("/metadata/labels")
                    .and_then(|l| l.get(k))
                    .and_then(Value::as_str)
                    == Some(v)
            })
        })
}

fn kind<'a>(items: &'a [Value], k: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    items.iter().filter(move |i| i["kind"] == k)
}

fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// What [`crate::decide::plan`] needs, from the items of a `kubectl get
/// volumesnapshots,pods,persistentvolumeclaims -o json` List of the shard's namespace.
pub fn from_dump(
    configured: &ConfiguredShard,
    items: &[Value],
    state: Option<ShardState>,
    named: Option<String>,
) -> Result<Observed, String> {
    let shard = &configured.shard;
    let ns = shard.namespace.as_str();
    let snapshots = kind(items, "VolumeSnapshot")
        .filter(|o| VolumeSnapshot::is_vtsnaps(o) && VolumeSnapshot::is_of_shard(o, shard))
        .map(VolumeSnapshot::read)
        .collect();
    let tablet_pod =
        shape_tablet(kind(items, "Pod").filter(|p| selected(p, ns, &tablet_selector(shard))));
    let tablet_pvc = tablet_pod.and_then(data_claim_of).and_then(|claim| {
        kind(items, "PersistentVolumeClaim").find(|c| {
            name(c) == claim && c.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns)
        })
    });
    let drills = drill_selector(shard);
    let mut leftovers: Vec<String> = kind(items, "PersistentVolumeClaim")
        .filter(|c| selected(c, ns, &drills))
        .map(|c| format!("PersistentVolumeClaim/{}", name(c)))
        .collect();
    leftovers.extend(
        kind(items, "Pod")
            .filter(|p| selected(p, ns, &drills))
            .map(|p| format!("Pod/{}", name(p))),
    );
    let state = match state {
        Some(s) if s.key == *shard => s,
        Some(s) => {
            return Err(format!(
                "--shard-state is of {}/{}/{}/{}, not of this shard",
                s.key.namespace, s.key.cluster, s.key.keyspace, s.key.shard
            ));
        }
        None => ShardState {
            key: shard.clone(),
            primary: None,
            tablets: Vec::new(),
            refreshed_at: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            error: Some("vtctld is not asked offline: give --shard-state".into()),
        },
    };
    Ok(Observed {
        shard: shard.clone(),
        restore: configured.policy.restore.clone(),
        snapshots,
        state,
        tablet_pvc: tablet_pvc.map(TabletPvc::read),
        tablet_pod: tablet_pod.map(TabletPod::read),
        leftovers,
        named,
        purged: Err("not read offline".into()),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;
    use vtsnap_core::config::Config;
    use vtsnap_core::shard::ShardName;
    use vtsnap_core::snapshot::choice::TabletVersion;
    use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};

    use super::*;
    use crate::decide::objects::Settings;
    use crate::decide::{Plan, Refusal, plan};

    fn configured() -> ConfiguredShard {
        Config::from_yaml(
            "clusters:\n- name: example\n  namespace: vitess\n  restore: {enabled: true}\n",
        )
        .unwrap()
        .shard(&ShardName::new("example", "commerce", "-"))
        .unwrap()
    }

    /// A dump of the shard's namespace: two snapshots, a tablet and its PVC, a drill Pod
    /// left behind, and objects of another namespace that must not count.
    fn dump(with_leftover: bool) -> Vec<Value> {
        let shard = operator_shard();
        let now = k8s_openapi::jiff::Timestamp::now();
        let ago = |h: i64| {
            now.checked_sub(k8s_openapi::jiff::SignedDuration::from_hours(h))
                .unwrap()
        };
        let snap = |name: &str, h: i64| {
            let mut o = shard.snapshot(name, ago(h)).object();
            let source = shard.tablet("replica", 2);
            o["spec"]["source"]["persistentVolumeClaimName"] = json!(source.name);
            o["metadata"]["annotations"]["vtsnap.io/source-pvc"] = json!(source.name);
            o["metadata"]["annotations"]["vtsnap.io/source-tablet"] =
                json!(source.alias.to_string());
            o["metadata"]["labels"]["vtsnap.io/tablet-uid"] = json!(source.alias.uid.to_string());
            o["kind"] = json!("VolumeSnapshot");
            o
        };
        let tablet = shard.tablet("replica", 1);
        let mut pvc = tablet.pvc(&pvc_template("100Gi"));
        pvc["kind"] = json!("PersistentVolumeClaim");
        let mut pod = tablet.pod();
        pod["kind"] = json!("Pod");
        let mut elsewhere = snap("s-elsewhere", 1);
        elsewhere["metadata"]["namespace"] = json!("other");
        let mut items = vec![snap("s-old", 20), snap("s-new", 2), elsewhere, pvc, pod];
        if with_leftover {
            items.push(
                json!({"kind": "Pod", "metadata": {"name": "vtsnap-drill-left",
                "namespace": "vitess", "labels": {"app.kubernetes.io/managed-by": "vtsnap-drill",
                "app.kubernetes.io/component": "drill", "vtsnap.io/cluster": "example",
                "vtsnap.io/keyspace": "commerce", "vtsnap.io/shard": "x-x"}}}),
            );
        }
        // Through the reader `plan --objects` uses.
        vtsnap_core::dump::parse(
            json!({"kind": "List", "items": items})
                .to_string()
                .as_bytes(),
        )
        .unwrap()
    }

    fn state(primary: Option<&str>) -> ShardState {
        ShardState {
            key: configured().shard,
            primary: primary.map(str::to_owned),
            tablets: vec![TabletVersion {
                alias: "zone1-0000000101".into(),
                version: Some("8.0.36".into()),
            }],
            refreshed_at: k8s_openapi::jiff::Timestamp::now(),
            error: None,
        }
    }

    fn settings() -> Settings {
        Settings::with_images("vtsnap/vtsnap-restore:1", "vtsnap/vtsnap-drill:1")
    }

    #[test]
    fn a_dump_decides_as_the_cluster_would() {
        let o = from_dump(
            &configured(),
            &dump(false),
            Some(state(Some("zone1-0000000101"))),
            None,
        )
        .unwrap();
        assert_eq!(o.snapshots.len(), 2, "only the shard's namespace counts");
        assert!(o.tablet_pod.is_some() && o.tablet_pvc.is_some());
        assert!(o.purged.is_err(), "never known offline");
        let p = plan(&o, &settings(), None, k8s_openapi::jiff::Timestamp::now());
        let Plan::Drill { snapshot, pvc, .. } = &p else {
            panic!("{p:?}")
        };
        assert_eq!(snapshot, "s-new");
        assert_eq!(pvc["spec"]["dataSourceRef"]["name"], "s-new");
    }

    #[test]
    fn without_vtctld_s_view_or_with_a_drill_left_it_refuses_as_a_run_would() {
        let o = from_dump(&configured(), &dump(false), None, None).unwrap();
        let p = plan(&o, &settings(), None, k8s_openapi::jiff::Timestamp::now());
        assert!(
            matches!(
                p,
                Plan::Nothing {
                    refusal: Refusal::ShardSeries { .. }
                }
            ),
            "{p:?}"
        );
        let o = from_dump(
            &configured(),
            &dump(true),
            Some(state(Some("zone1-0000000101"))),
            None,
        )
        .unwrap();
        assert_eq!(o.leftovers, ["Pod/vtsnap-drill-left"]);
        let p = plan(&o, &settings(), None, k8s_openapi::jiff::Timestamp::now());
        assert!(
            matches!(
                p,
                Plan::Nothing {
                    refusal: Refusal::DrillUnderWay { .. }
                }
            ),
            "{p:?}"
        );
    }

    #[test]
    fn a_dump_or_state_that_does_not_fit_is_named() {
        let e = vtsnap_core::dump::parse(br#"{"kind": "Pod"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a List"), "{e}");
        let mut other = state(None);
        other.key.keyspace = "customer".into();
        let e = from_dump(&configured(), &dump(false), Some(other), None).unwrap_err();
        assert!(e.contains("not of this shard"), "{e}");
    }
}
