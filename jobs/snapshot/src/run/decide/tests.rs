use std::path::PathBuf;

use vtsnap_core::config::Config;
use vtsnap_core::naming::{KeyRange, TabletAlias};
use vtsnap_core::shard::{PodInfo, Replication, ShardRef, Tablet};

use super::*;

/// Primary 100, replicas 101 and 102 (102 the most caught up), all healthy.
pub(super) fn shard() -> Shard {
    let tablet = |uid: u32, t: TabletType, lag: u32| Tablet {
        alias: TabletAlias::new("zone1", uid),
        vt_type: Some(t),
        pool_type: Some("replica".into()),
        pod: Some(PodInfo {
            name: format!("example-vttablet-zone1-{uid:010}-abcdef01"),
            uid: format!("pod-uid-{uid}"),
            node: Some(format!("node-{uid}")),
            phase: "Running".into(),
            ready: true,
            terminating: false,
        }),
        pvc: Some(format!("example-vttablet-zone1-{uid:010}-abcdef01")),
        replication: (t != TabletType::Primary).then(|| Replication {
            position: "MariaDB/0-100-1000".into(),
            lag_seconds: lag,
            lag_unknown: false,
            io_running: true,
            sql_running: true,
            last_error: None,
        }),
    };
    Shard {
        shard_ref: ShardRef {
            cluster: "example".into(),
            namespace: "vitess".into(),
            keyspace: "commerce".into(),
            shard: "-80".parse::<KeyRange>().unwrap(),
        },
        primary: Some(TabletAlias::new("zone1", 100)),
        tablets: vec![
            tablet(100, TabletType::Primary, 0),
            tablet(101, TabletType::Replica, 3),
            tablet(102, TabletType::Replica, 0),
        ],
        issues: vec![],
    }
}

pub(super) fn policy(snapshot: &str) -> ResolvedPolicy {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"127.0.0.1:15999\"\n  snapshot: {snapshot}\n"
    ))
    .unwrap()
    .resolve("example", "commerce", "-80")
    .unwrap()
}

fn steps(p: &SnapshotPlan) -> Vec<Step> {
    p.steps.iter().map(|s| s.step).collect()
}

/// Compares with the reviewed file under `golden/`; `UPDATE_GOLDEN=1` rewrites it.
fn golden(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/run/decide/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        got,
        want,
        "{} differs (UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
}

#[test]
fn a_cold_plan_quiesces_in_order_and_unwinds_in_reverse() {
    let p = decide(&shard(), "example/commerce/-80", &policy("{}"), Mode::Cold).unwrap();
    assert_eq!(p.target.target.alias, "zone1-0000000102");
    assert_eq!(p.target.original_type, TabletType::Replica);
    assert_eq!(
        steps(&p),
        [
            Step::Fence,
            Step::ProbeLayout,
            Step::Drain,
            Step::StopReplication,
            Step::RecordPosition,
            Step::StopMysqld,
            Step::HoldMysqld,
            Step::CreateSnapshot,
            Step::WaitForCut,
        ]
    );
    assert_eq!(
        p.unwind,
        [
            Undo::ReleaseNode,
            Undo::StartReplication,
            Undo::RestoreType,
            Undo::Unfence
        ]
    );
    golden("cold.txt", &render(&p));
    golden(
        "cold.json",
        &(serde_json::to_string_pretty(&p).unwrap() + "\n"),
    );
}

#[test]
fn a_cold_plan_waiting_for_ready_keeps_the_fence_until_ready() {
    let p = decide(
        &shard(),
        "example/commerce/-80",
        &policy("{waitFor: ready}"),
        Mode::Cold,
    )
    .unwrap();
    assert_eq!(steps(&p).last(), Some(&Step::WaitForReady));
    assert!(!steps(&p).contains(&Step::WaitForCut));
    golden("cold-wait-ready.txt", &render(&p));
}

#[test]
fn an_online_plan_never_touches_type_replication_or_mysqld() {
    let p = decide(
        &shard(),
        "example/commerce/-80",
        &policy("{}"),
        Mode::Online,
    )
    .unwrap();
    assert_eq!(
        steps(&p),
        [
            Step::CheckOnlinePreconditions,
            Step::Fence,
            Step::ProbeLayout,
            Step::CreateSnapshot,
            Step::WaitForCut,
        ]
    );
    assert_eq!(p.unwind, [Undo::Unfence]);
    golden("online.txt", &render(&p));
}

#[test]
fn fsfreeze_adds_a_node_release_only_online() {
    let p = decide(
        &shard(),
        "example/commerce/-80",
        &policy("{fsfreeze: true, mode: online}"),
        Mode::Online,
    )
    .unwrap();
    assert!(p.fsfreeze);
    assert_eq!(
        steps(&p)[3..],
        [Step::Fsfreeze, Step::CreateSnapshot, Step::WaitForCut]
    );
    assert_eq!(p.unwind, [Undo::ReleaseNode, Undo::Unfence]);
    golden("online-fsfreeze.txt", &render(&p));
    // A cold run never freezes the file system: mysqld is stopped.
    let cold = decide(
        &shard(),
        "example/commerce/-80",
        &policy("{fsfreeze: true, mode: online}"),
        Mode::Cold,
    )
    .unwrap();
    assert!(!cold.fsfreeze && !steps(&cold).contains(&Step::Fsfreeze));
}

#[test]
fn the_primary_is_never_planned_and_an_unknown_type_refuses() {
    let mut s = shard();
    s.tablets.retain(|t| t.vt_type == Some(TabletType::Primary));
    let e = decide(&s, "x", &policy("{}"), Mode::Cold).unwrap_err();
    assert!(matches!(e, NoPlan::Refused(_)), "{e}");

    let mut s = shard();
    for t in &mut s.tablets {
        if t.alias.uid.get() == 102 {
            t.vt_type = Some(TabletType::Unknown);
        }
    }
    let p = decide(&s, "x", &policy("{}"), Mode::Cold);
    // 102 is no longer a replica to vtctld: 101 is the only replica left, so refused.
    assert!(p.is_err(), "{p:?}");
}

#[test]
fn the_unwind_is_the_reverse_of_what_was_pushed_with_each_undo_once() {
    assert_eq!(unwind_order(&[]), []);
    assert_eq!(
        unwind_order(&[Step::Fence, Step::ProbeLayout]),
        [Undo::Unfence]
    );
    assert_eq!(
        unwind_order(&[Step::Fence, Step::ProbeLayout, Step::Drain]),
        [Undo::RestoreType, Undo::Unfence]
    );
    assert_eq!(
        unwind_order(&[
            Step::Fence,
            Step::Drain,
            Step::StopReplication,
            Step::StopMysqld,
            Step::HoldMysqld
        ]),
        [
            Undo::ReleaseNode,
            Undo::StartReplication,
            Undo::RestoreType,
            Undo::Unfence
        ]
    );
}

#[test]
fn crash_safety_names_every_variable_that_does_not_hold() {
    let ok = |v: &[&str]| v.iter().map(|s| Some((*s).to_owned())).collect::<Vec<_>>();
    assert!(crash_safety(Flavor::Mysql, &ok(&["1", "1", "ON", "ON"])).is_empty());
    assert!(crash_safety(Flavor::Mariadb, &ok(&["1", "1", "1"])).is_empty());
    assert!(crash_safety(Flavor::Mysql, &ok(&["1", "1", "on", "on"])).is_empty());
    let bad = crash_safety(Flavor::Mysql, &ok(&["0", "2", "OFF", "OFF"]));
    let names: Vec<_> = bad.iter().map(|v| v.variable).collect();
    assert_eq!(
        names,
        [
            "sync_binlog",
            "innodb_flush_log_at_trx_commit",
            "log_bin",
            "gtid_mode"
        ]
    );
    assert_eq!(bad[0].to_string(), "sync_binlog=0 (needs 1)");
    assert_eq!(bad[2].to_string(), "log_bin=OFF (needs 1 or ON)");
    // MariaDB is never asked for gtid_mode; a missing answer is a violation, not a pass.
    let missing = crash_safety(Flavor::Mariadb, &[Some("1".into())]);
    let names: Vec<_> = missing.iter().map(|v| v.variable).collect();
    assert_eq!(names, ["innodb_flush_log_at_trx_commit", "log_bin"]);
    assert!(
        Flavor::of_version("10.11.6-MariaDB-log") == Flavor::Mariadb
            && Flavor::of_version("8.0.36") == Flavor::Mysql
    );
}
