//! The `--objects` dump reader and the planner on what it reads: no panic, and whatever
//! the dump, nothing is both deleted and kept, nothing skipped is deleted or recovered, an
//! unreadable Pending PVC holds its namespace and an unreadable VitessCluster removes no shard;
//! a restore is un-stuck only when its PVC never bound and its Pod is Pending.

#![no_main]

use std::collections::BTreeSet;
use std::sync::OnceLock;

use k8s_openapi::jiff::Timestamp;
use libfuzzer_sys::fuzz_target;
use vtsnap_core::config::Config;
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_gc::decide::{Reason, plan};
use vtsnap_gc::observe::{Inventory, Kind};

const CONFIG: &str = "clusters:\n- name: example\n  namespace: vitess\n  \
    retention: {maxCount: 2, maxAge: 7d}\n  deletionPolicy: {whenScaled: Delete, gracePeriod: 1h}\n  \
    restore: {enabled: true, nodeLocal: true, pendingTimeout: 10m}\n";

fn config() -> &'static Config {
    static C: OnceLock<Config> = OnceLock::new();
    C.get_or_init(|| Config::from_yaml(CONFIG).expect("the fuzz config is valid"))
}

fuzz_target!(|data: &[u8]| {
    let now: Timestamp = "2026-11-29T12:00:00Z".parse().expect("a time");
    let Ok(inv) = Inventory::from_dump_text(data, now) else {
        return;
    };
    let p = plan(config(), &inv, now, None);
    let key = |ns: &str, name: &str| ObjectKey::new(ns, name);
    let deleted: BTreeSet<_> = p
        .delete
        .iter()
        .map(|i| key(&i.namespace, &i.name))
        .collect();
    assert_eq!(deleted.len(), p.delete.len(), "a snapshot deleted twice");
    for i in &p.keep {
        assert!(
            !deleted.contains(&key(&i.namespace, &i.name)),
            "deleted and kept: {i:?}"
        );
    }
    for i in &p.delete {
        assert!(!i.namespace.is_empty() && !i.name.is_empty(), "{i:?}");
    }
    for s in &p.skipped {
        let k = key(&s.namespace, &s.name);
        match s.kind {
            Kind::VolumeSnapshot => assert!(!deleted.contains(&k), "skipped and deleted: {s:?}"),
            Kind::Lease => assert!(
                !p.recover_fences
                    .iter()
                    .any(|f| key(&f.namespace, &f.name) == k),
                "skipped and recovered: {s:?}"
            ),
            // An unreadable Pending PVC holds every snapshot of its namespace (of all,
            // when its own is unknown).
            Kind::PersistentVolumeClaim => assert!(
                !p.delete
                    .iter()
                    .any(|d| s.namespace.is_empty() || d.namespace == s.namespace),
                "a snapshot deleted beside an unreadable PVC: {s:?}"
            ),
            // An unreadable VitessCluster removes no shard (the one config cluster's).
            Kind::VitessCluster => assert!(
                s.name != "example"
                    || !p
                        .delete
                        .iter()
                        .any(|d| d.reason == Reason::ShardRemoved && d.namespace == s.namespace),
                "a shard of an unreadable cluster removed: {s:?}"
            ),
        }
    }
    for u in &p.restores.unstick {
        let unbound = inv.restored.iter().any(|r| {
            r.namespace == u.namespace
                && r.name == u.pvc
                && r.uid == u.pvc_uid
                && !r.bound
                && !r.has_volume
        });
        assert!(unbound, "un-stuck a PVC that may hold data: {u:?}");
        let pod = inv.pods.get(&key(&u.namespace, &u.pod));
        assert!(
            pod.is_some_and(|p| p.phase == "Pending" && p.uid == u.pod_uid),
            "un-stuck a Pod that is not Pending: {u:?}"
        );
    }
});
