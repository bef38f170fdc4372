//! Snapshots vtsnap did not write, or that contradict themselves: each is passed over with
//! a reason, never chosen.

use k8s_openapi::jiff::SignedDuration;
use serde_json::{Value, json};

use super::tests::{GI, chosen, enabled, node_local, now, read, said, snap, tablet};
use super::*;
use crate::snapshot::{
    ANN_CUT_TIME, ANN_GTID_EXECUTED, ANN_GTID_LOWER_BOUND, ANN_LAYOUT, ANN_READY_TIME,
    ANN_SOURCE_NODE, ANN_SOURCE_PVC, ANN_SOURCE_TABLET, CLOCK_SKEW, LABEL_TABLET_UID,
};

/// The choice among these snapshot objects for a 100Gi PVC of a shard on MySQL 8.0.
fn choice_of(
    objects: &[Value],
    policy: &ResolvedRestore,
) -> Result<Choice, Vec<(String, Rejection)>> {
    choose(
        &read(objects),
        super::tests::mysql80(),
        policy,
        100 * GI,
        now(),
    )
}

/// `f` applied to a good snapshot `s-bad` cut an hour ago, beside `s-good` cut 20h ago:
/// `s-good` is chosen; alone, `s-bad` is passed over with a reason containing `words`.
fn passed_over(what: &str, f: impl Fn(&mut Value), words: &str) {
    let bad = || {
        let mut o = snap("s-bad", 1.0).object();
        f(&mut o);
        o
    };
    let c = choice_of(&[bad(), snap("s-good", 20.0).object()], &enabled());
    assert_eq!(chosen(&c), Some("s-good"), "{what}: {c:#?}");
    let said = said(&choice_of(&[bad()], &enabled()));
    assert!(said.contains(words), "{what}: {said}");
}

fn at(t: Timestamp) -> Value {
    json!(t.to_string())
}

fn later(secs: i64) -> Timestamp {
    now().checked_add(SignedDuration::from_secs(secs)).unwrap()
}

/// Every time of the snapshot object set to `t`.
fn all_times(o: &mut Value, t: Timestamp) {
    o["metadata"]["creationTimestamp"] = at(t);
    o["metadata"]["annotations"][ANN_CUT_TIME] = at(t);
    o["status"]["creationTime"] = at(t);
}

// ---- times ---------------------------------------------------------------------------

#[test]
fn a_snapshot_from_the_future_is_never_chosen() {
    // Cut a day ahead: before, it was the newest and never aged out.
    passed_over(
        "cut in the future",
        |o| o["metadata"]["annotations"][ANN_CUT_TIME] = at(later(86_400)),
        "s-bad: impossible time: vtsnap.io/cut-time",
    );
    passed_over(
        "created in the future",
        |o| all_times(o, later(7200)),
        "s-bad: impossible time: metadata.creationTimestamp",
    );
    passed_over(
        "taken in the future",
        |o| o["status"]["creationTime"] = at(later(7200)),
        "impossible time: status.creationTime",
    );
    passed_over(
        "ready in the future",
        |o| o["metadata"]["annotations"][ANN_READY_TIME] = at(later(7200)),
        "impossible time: vtsnap.io/ready-time",
    );
}

#[test]
fn clock_skew_is_allowed_up_to_its_bound_and_not_beyond() {
    let skew = CLOCK_SKEW.as_secs();
    let within = {
        let mut o = snap("s-ahead", 1.0).object();
        all_times(&mut o, later(skew));
        o
    };
    let c = choice_of(&[within, snap("s-good", 2.0).object()], &enabled());
    assert_eq!(
        chosen(&c),
        Some("s-ahead"),
        "exactly the skew ahead: {c:#?}"
    );
    passed_over(
        "one second beyond the skew",
        |o| all_times(o, later(skew + 1)),
        "impossible time",
    );
}

#[test]
fn a_cut_before_its_own_creation_is_impossible() {
    passed_over(
        "cut a day before the object existed",
        |o| o["metadata"]["annotations"][ANN_CUT_TIME] = at(later(-90_000)),
        "vtsnap.io/cut-time",
    );
    passed_over(
        "ready before the cut",
        |o| o["metadata"]["annotations"][ANN_READY_TIME] = at(later(-86_400)),
        "is before",
    );
}

/// Without a recorded cut (an object of an earlier version, read from a dump), the
/// snapshot's creation in the storage dates it.
#[test]
fn a_snapshot_without_a_cut_is_dated_by_its_creation() {
    let mut o = snap("s", 3.0).object();
    o["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(ANN_CUT_TIME);
    o["metadata"]["creationTimestamp"] = at(super::tests::hours_ago(5.0));
    o["status"]["creationTime"] = at(super::tests::hours_ago(4.0));
    let c = choice_of(&[o], &enabled()).unwrap();
    assert_eq!(
        c.cut,
        super::tests::hours_ago(4.0),
        "status.creationTime, not the object's"
    );
}

// ---- what vtsnap did not write ------------------------------------------------------

#[test]
fn a_layout_or_position_vtsnap_does_not_write_is_passed_over() {
    passed_over(
        "unknown layout",
        |o| o["metadata"]["annotations"][ANN_LAYOUT] = json!("2"),
        "vtsnap.io/layout \"2\" is not a layout vtsnap writes",
    );
    passed_over(
        "no layout",
        |o| {
            o["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove(ANN_LAYOUT);
        },
        "s-bad: no vtsnap.io/layout recorded",
    );
    passed_over(
        "garbage position",
        |o| o["metadata"]["annotations"][ANN_GTID_EXECUTED] = json!("lol; DROP TABLE"),
        "vtsnap.io/gtid-executed \"lol; DROP TABLE\" is not a GTID position",
    );
    passed_over(
        "garbage lower bound",
        |o| o["metadata"]["annotations"][ANN_GTID_LOWER_BOUND] = json!("MySQL56/u:1-100"),
        "vtsnap.io/gtid-lower-bound",
    );
    passed_over(
        "a MariaDB position on a MySQL snapshot",
        |o| o["metadata"]["annotations"][ANN_GTID_EXECUTED] = json!("MariaDB/0-1-100"),
        "is a MariaDB position, but vtsnap.io/mysql-flavor is mysql",
    );
}

#[test]
fn a_snapshot_of_another_shards_pvc_is_not_restored_into_this_one() {
    // Labelled for `-`, taken of a tablet PVC of `-80`.
    let (other, other_pvc) = tablet("-80", 1);
    passed_over(
        "another shard's PVC",
        |o| {
            o["spec"]["source"]["persistentVolumeClaimName"] = json!(other_pvc);
            o["metadata"]["annotations"][ANN_SOURCE_PVC] = json!(other_pvc);
            o["metadata"]["annotations"][ANN_SOURCE_TABLET] = json!(other.to_string());
            o["metadata"]["labels"][LABEL_TABLET_UID] = json!(other.uid.to_string());
        },
        "not taken of a tablet PVC of this shard: source tablet",
    );
    passed_over(
        "the claim and the annotation disagree",
        |o| o["spec"]["source"]["persistentVolumeClaimName"] = json!(other_pvc),
        "differs from vtsnap.io/source-pvc",
    );
    passed_over(
        "a claim that is no tablet's",
        |o| {
            o["spec"]["source"]["persistentVolumeClaimName"] = json!("pvc-2");
            o["metadata"]["annotations"][ANN_SOURCE_PVC] = json!("pvc-2");
        },
        "not taken of a tablet PVC of this shard: source PVC \"pvc-2\"",
    );
    passed_over(
        "no claim",
        |o| {
            o.as_object_mut().unwrap().remove("spec");
        },
        "no spec.source.persistentVolumeClaimName",
    );
}

#[test]
fn each_way_the_recorded_version_fails_is_named() {
    use crate::snapshot::{ANN_MYSQL_FLAVOR, ANN_MYSQL_VERSION};
    let cases = [
        (
            "no flavor",
            ANN_MYSQL_FLAVOR,
            None,
            "s-bad: no MySQL flavor recorded (vtsnap.io/mysql-flavor)",
        ),
        (
            "no version",
            ANN_MYSQL_VERSION,
            None,
            "s-bad: no MySQL version recorded (vtsnap.io/mysql-version)",
        ),
        (
            "unknown flavor",
            ANN_MYSQL_FLAVOR,
            Some("percona"),
            "s-bad: flavor \"percona\" is not mysql or mariadb",
        ),
        (
            "unparsable version",
            ANN_MYSQL_VERSION,
            Some("latest"),
            "s-bad: version \"latest\" does not read as <major>.<minor>",
        ),
        (
            "a MariaDB version on a MySQL snapshot",
            ANN_MYSQL_VERSION,
            Some("10.11.18-MariaDB"),
            "s-bad: flavor mysql with version \"10.11.18-MariaDB\", which is not a mysql version",
        ),
    ];
    for (what, key, value, words) in cases {
        passed_over(
            what,
            |o| {
                let ann = o["metadata"]["annotations"].as_object_mut().unwrap();
                match value {
                    Some(v) => ann.insert(key.into(), json!(v)),
                    None => ann.remove(key),
                };
            },
            words,
        );
    }
}

// ---- node-local restores ------------------------------------------------------------

/// A DNS subdomain of `n` characters (a valid node name).
fn node_name(n: usize) -> String {
    let mut s: String = "node-".into();
    while s.len() < n {
        s.push(if s.len().is_multiple_of(20) { '.' } else { 'a' });
    }
    s
}

fn on_node(node: &str) -> Value {
    let mut o = snap("s", 1.0).object();
    o["metadata"]["annotations"][ANN_SOURCE_NODE] = json!(node);
    o
}

#[test]
fn a_source_node_a_node_selector_cannot_name_is_not_restored_onto() {
    // 84 characters: a valid node name, not a label value; before, the Pod was refused.
    let long = node_name(84);
    assert!(crate::k8s_names::is_dns_subdomain(&long));
    let said_of = |node: &str| said(&choice_of(&[on_node(node)], &node_local()));
    let s = said_of(&long);
    assert!(
        s.contains("cannot be pinned with a nodeSelector (not a label value: must be at most 63 characters (is 84)"),
        "{s}"
    );
    // 63 is a label value: chosen, with its node.
    let ok = node_name(63);
    let c = choice_of(&[on_node(&ok)], &node_local()).unwrap();
    assert_eq!(c.source_node.as_deref(), Some(ok.as_str()));
    assert!(said_of(&node_name(64)).contains("cannot be pinned"), "64");
    // A label value that is no node name.
    assert!(said_of("Node_1").contains("(not a node name: "));
    // No node recorded.
    assert!(said_of("").contains("s: no source node recorded (node-local restore)"));
    // Not node-local: the node is not needed, so not judged.
    let c = choice_of(&[on_node(&long)], &enabled());
    assert_eq!(chosen(&c), Some("s"));
}
