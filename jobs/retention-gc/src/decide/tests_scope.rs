//! What the GC plans at all: only the configured clusters in their own namespaces, each
//! with its own policy; what it could not read, or saw twice, skipped and holding what it
//! may hold; shards in the order plans are printed in.

use std::collections::BTreeMap;

use super::tests::{H, State, cluster, config, now, reasons, snap, snap_secs};
use super::*;
use crate::observe::{LeaseRef, Unreadable, UnreadableObject};

/// `example` in `vitess` and `other` in `elsewhere`.
fn two_clusters() -> Config {
    Config::from_yaml(
        "clusters:\n- name: example\n  namespace: vitess\n- name: other\n  namespace: elsewhere\n",
    )
    .unwrap()
}

fn of(name: &str, namespace: &str, cluster: &str) -> Snap {
    let mut s = snap(name, "commerce", "x-x", 1, State::Ready);
    s.namespace = namespace.into();
    s.cluster = cluster.into();
    s
}

#[test]
fn a_snapshot_is_planned_only_under_its_own_cluster_and_namespace() {
    let inv = Inventory {
        snapshots: vec![
            of("mine", "vitess", "example"),
            of("theirs", "elsewhere", "other"),
            // Named by the config, but not in these namespaces: no policy applies.
            of("other-in-vitess", "vitess", "other"),
            of("example-elsewhere", "elsewhere", "example"),
        ],
        ..Inventory::default()
    };
    let planned = |only| {
        let p = plan(&two_clusters(), &inv, now(), only);
        let mut n: Vec<String> = p
            .keep
            .iter()
            .chain(&p.delete)
            .map(|i| i.name.clone())
            .collect();
        n.sort();
        n
    };
    assert_eq!(planned(None), ["mine", "theirs"]);
    assert_eq!(planned(Some("other")), ["theirs"]);
    assert_eq!(planned(Some("example")), ["mine"]);
}

fn unreadable(namespace: &str, ident: [Option<&str>; 3]) -> UnreadableObject {
    let [cluster, keyspace, shard] = ident.map(|v| v.map(str::to_owned));
    UnreadableObject {
        kind: Kind::VolumeSnapshot,
        namespace: namespace.into(),
        name: "broken".into(),
        cluster,
        keyspace,
        shard,
        error: Unreadable::NoCreationTime {
            namespace: namespace.into(),
            name: "broken".into(),
        },
    }
}

#[test]
fn a_skipped_snapshot_holds_the_removal_of_only_the_shards_it_may_be_of() {
    let cfg = config("  deletionPolicy: {whenScaled: Delete, gracePeriod: 1h}\n");
    let removed = |u: UnreadableObject| {
        let inv = Inventory {
            snapshots: vec![snap("gone", "commerce", "x-x", 48, State::Ready)],
            clusters: cluster(&[("commerce", "-80"), ("commerce", "80-")]),
            unreadable: vec![u],
            ..Inventory::default()
        };
        let p = plan(&cfg, &inv, now(), None);
        (reasons(&p)["gone"], p.skipped.len())
    };
    let (c, k, s) = (Some("example"), Some("commerce"), Some("x-x"));
    let held = (("skipped-in-shard", false), 1);
    assert_eq!(removed(unreadable("vitess", [c, k, s])), held);
    assert_eq!(removed(unreadable("vitess", [None, k, s])), held);
    assert_eq!(removed(unreadable("vitess", [c, None, s])), held);
    assert_eq!(removed(unreadable("vitess", [c, k, None])), held);
    assert_eq!(removed(unreadable("vitess", [None, None, None])), held);
    let free = (("shard-removed", true), 1);
    assert_eq!(
        removed(unreadable("vitess", [c, Some("customer"), s])),
        free
    );
    assert_eq!(removed(unreadable("vitess", [c, k, Some("x-80")])), free);
    // Out of scope: neither holding nor reported.
    assert_eq!(
        removed(unreadable("elsewhere", [c, k, s])),
        (("shard-removed", true), 0)
    );
    assert_eq!(
        removed(unreadable("vitess", [Some("other"), k, s])),
        (("shard-removed", true), 0)
    );
    // An unreadable lease holds no snapshot.
    let mut lease = unreadable("vitess", [None, None, None]);
    lease.kind = Kind::Lease;
    assert_eq!(removed(lease), free);
}

#[test]
fn a_creation_time_up_to_an_hour_ahead_is_clock_skew_beyond_it_is_skipped() {
    let inv = Inventory {
        snapshots: vec![
            snap_secs("skewed", "x-x", -H, State::Ready),
            snap_secs("future", "x-x", -H - 1, State::Ready),
            snap_secs("now", "x-x", 0, State::Ready),
        ],
        clusters: cluster(&[("commerce", "-")]),
        ..Inventory::default()
    };
    let p = plan(&config("  retention: {maxCount: 1}\n"), &inv, now(), None);
    let r = reasons(&p);
    assert_eq!(r["skewed"], ("newest-ready", false));
    assert_eq!(r["now"], ("beyond-max-count", true));
    assert_eq!(
        p.skipped
            .iter()
            .map(|s| (s.name.as_str(), s.reason))
            .collect::<Vec<_>>(),
        [("future", SkipReason::CreatedInTheFuture)]
    );
}

#[test]
fn every_copy_of_a_name_is_skipped_and_other_names_are_not() {
    let lease = |name: &str| LeaseRef {
        namespace: "vitess".into(),
        name: name.into(),
        expiry: Expiry::Expired,
    };
    let inv = Inventory {
        snapshots: vec![
            snap("twin", "commerce", "x-x", 1, State::Ready),
            snap("twin", "commerce", "x-x", 50, State::Ready),
            snap("single", "commerce", "x-x", 2, State::Ready),
        ],
        leases: vec![lease("fence"), lease("fence"), lease("alone")],
        clusters: cluster(&[("commerce", "-")]),
        ..Inventory::default()
    };
    let p = plan(&config("  retention: {maxCount: 1}\n"), &inv, now(), None);
    assert_eq!(reasons(&p).len(), 1);
    assert_eq!(reasons(&p)["single"], ("newest-ready", false));
    assert_eq!(
        p.recover_fences,
        [FenceItem {
            namespace: "vitess".into(),
            name: "alone".into()
        }]
    );
    let skipped: Vec<(Kind, &str, SkipReason)> = p
        .skipped
        .iter()
        .map(|s| (s.kind, s.name.as_str(), s.reason))
        .collect();
    assert_eq!(
        skipped,
        [
            (Kind::Lease, "fence", SkipReason::Duplicate),
            (Kind::Lease, "fence", SkipReason::Duplicate),
            (Kind::VolumeSnapshot, "twin", SkipReason::Duplicate),
            (Kind::VolumeSnapshot, "twin", SkipReason::Duplicate),
        ]
    );
}

#[test]
fn shards_are_planned_in_safe_name_order() {
    // `80-x` sorts before `x-80` and `x-x`: the order plans have always been printed in,
    // not the key ranges' own (`-`, `-80`, `80-`).
    let inv = Inventory {
        snapshots: vec![
            snap("whole", "commerce", "x-x", 1, State::Ready),
            snap("low", "commerce", "x-80", 1, State::Ready),
            snap("high", "commerce", "80-x", 1, State::Ready),
            snap("other-keyspace", "customer", "x-x", 1, State::Ready),
        ],
        clusters: cluster(&[("commerce", "-80"), ("commerce", "80-")]),
        ..Inventory::default()
    };
    let p = plan(&config(""), &inv, now(), None);
    let planned: Vec<&str> = p.keep.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(planned, ["high", "low", "whole", "other-keyspace"]);
}

/// Review round three, item 4, in the GC: with `example` configured in two namespaces,
/// the lookup by name alone was ambiguous and every shard of both was left out (nothing
/// ever deleted). Each namespace's shards get their own cluster's policy.
#[test]
fn one_cluster_name_in_two_namespaces_gets_each_namespace_s_policy() {
    let cfg = Config::from_yaml(
        "clusters:\n- name: example\n  namespace: ns-a\n  retention: {maxCount: 1}\n\
         - name: example\n  namespace: ns-b\n  retention: {maxCount: 2}\n",
    )
    .unwrap();
    let in_ns = |ns: &str, name: &str, hours: i64| Snap {
        namespace: ns.into(),
        ..snap(name, "commerce", "x-x", hours, State::Ready)
    };
    let mut clusters = BTreeMap::new();
    for ns in ["ns-a", "ns-b"] {
        let mut c = cluster(&[("commerce", "-")]);
        let one = c.remove(&ObjectKey::new("vitess", "example")).unwrap();
        clusters.insert(ObjectKey::new(ns, "example"), one);
    }
    let inv = Inventory {
        snapshots: vec![
            in_ns("ns-a", "a1", 1),
            in_ns("ns-a", "a2", 2),
            in_ns("ns-b", "b1", 1),
            in_ns("ns-b", "b2", 2),
            in_ns("ns-b", "b3", 3),
        ],
        clusters,
        ..Inventory::default()
    };
    let r = reasons(&plan(&cfg, &inv, now(), None));
    assert_eq!(r["a2"], ("beyond-max-count", true), "{r:?}");
    assert_eq!(r["b2"], ("within-max-count", false), "{r:?}");
    assert_eq!(r["b3"], ("beyond-max-count", true), "{r:?}");
}
