//! The offline plan on an arbitrary dump: no panic; whatever the dump, a running Pod is
//! never to be deleted, a PVC is never to be deleted beside a Pod that stays, nothing is
//! deleted on a shard whose objects could not be read or whose wanted template is not a
//! PVC spec, and only a Pod known not to run (Pending, Succeeded, Failed), not already
//! going and carrying no tablet label is ever deleted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_vtbackup_storage::decide::{Action, Kind, Reason, plan};
use vtsnap_vtbackup_storage::observe::World;

const CONFIG: &str = "clusters:\n- name: example\n  namespace: vitess\n  vtbackup: {useEmptyDirForInitialBackup: true}\n";

const TABLET_LABELS: [&str; 3] = [
    "planetscale.com/tablet-uid",
    "planetscale.com/tablet-type",
    "planetscale.com/tablet-index",
];

/// The dump's objects of `kind` with this UID.
fn by_uid<'a>(items: &'a [Value], kind: &str, uid: &str) -> Vec<&'a Value> {
    items
        .iter()
        .filter(|i| i.get("kind").and_then(Value::as_str) == Some(kind))
        .filter(|i| i.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(items) = vtsnap_core::dump::parse(data) else {
        return;
    };
    let Ok(config) = Config::from_yaml(CONFIG) else {
        return;
    };
    let world = World::from_dump(&config, &items);
    let plan = plan(&config, &world, None);
    for s in &plan.shards {
        let pod = s.objects.iter().find(|o| o.kind == Kind::Pod);
        let pvc = s
            .objects
            .iter()
            .find(|o| o.kind == Kind::PersistentVolumeClaim);
        if let Some(p) = pod {
            assert!(
                !(p.reason == Reason::RunningBackupPreserved && p.action != Action::Keep),
                "{s:?}"
            );
            if p.action != Action::DeletePod {
                assert!(
                    pvc.is_none_or(|c| c.action != Action::DeletePvc),
                    "a PVC deleted beside a Pod that stays: {s:?}"
                );
            }
        }
        let unreadable = s.objects.iter().any(|o| {
            matches!(
                o.reason,
                Reason::PodUnreadable
                    | Reason::PvcUnreadable
                    | Reason::DesiredUnknown
                    | Reason::TemplateInvalid
                    | Reason::PodPhaseUncertain
                    | Reason::PodTerminating
            )
        });
        if unreadable {
            assert!(
                s.objects
                    .iter()
                    .all(|o| !matches!(o.action, Action::DeletePod | Action::DeletePvc)),
                "{s:?}"
            );
        }
        for o in &s.objects {
            let kind = match (o.kind, o.action) {
                (Kind::Pod, Action::DeletePod) => "Pod",
                (Kind::PersistentVolumeClaim, Action::DeletePvc) => "PersistentVolumeClaim",
                _ => continue,
            };
            for obj in by_uid(&items, kind, &o.uid) {
                let labels = obj.pointer("/metadata/labels");
                assert!(
                    TABLET_LABELS
                        .iter()
                        .all(|l| labels.and_then(|m| m.get(l)).is_none()),
                    "an object with a tablet label deleted: {s:?}"
                );
                if kind == "Pod" {
                    let phase = obj.pointer("/status/phase").and_then(Value::as_str);
                    assert!(
                        matches!(phase, Some("Pending" | "Succeeded" | "Failed")),
                        "a Pod in phase {phase:?} deleted: {s:?}"
                    );
                    assert!(
                        obj.pointer("/metadata/deletionTimestamp")
                            .is_none_or(Value::is_null),
                        "a Pod already going deleted again: {s:?}"
                    );
                }
            }
        }
    }
});
