use vtsnap_core::naming::TabletAlias;

use super::super::tests::{policy, shard};
use super::super::{Mode, decide};
use super::*;

fn plan(s: &Shard, mode: Mode, snapshot: &str) -> SnapshotPlan {
    decide(s, "x", &policy(snapshot), mode).unwrap()
}

fn required(n: u32) -> PrimaryAcks {
    PrimaryAcks::Required { replicas: n }
}

fn stop_replication(s: &mut Shard, uid: u32) {
    let t = s
        .tablets
        .iter_mut()
        .find(|t| t.alias == TabletAlias::new("zone1", uid))
        .unwrap();
    t.replication.as_mut().unwrap().io_running = false;
}

#[test]
fn one_other_acking_replica_is_enough_for_one_acknowledgement() {
    let s = shard();
    let p = plan(&s, Mode::Cold, "{}");
    assert_eq!(check(&s, &p, required(1)), Ok(()));
    assert_eq!(check(&s, &p, PrimaryAcks::NotRequired), Ok(()));
}

#[test]
fn a_cold_cut_of_the_last_acking_replica_is_refused() {
    let s = shard();
    // allowSingleReplica lets a run take the only healthy replica: not past semi-sync
    let mut one = s.clone();
    stop_replication(&mut one, 101);
    let p = plan(&one, Mode::Cold, "{target: {allowSingleReplica: true}}");
    let e = check(&one, &p, required(1)).unwrap_err();
    assert_eq!(e.alias, "zone1-0000000102");
    assert_eq!((e.required, e.left), (1, 0));
    assert!(e.acking.is_empty());
    assert!(e.to_string().contains("no other replica replicates"), "{e}");
}

#[test]
fn the_count_the_primary_waits_for_is_what_must_be_left() {
    let s = shard();
    let p = plan(&s, Mode::Cold, "{}");
    let e = check(&s, &p, required(2)).unwrap_err();
    assert_eq!((e.required, e.left), (2, 1));
    assert_eq!(e.acking, vec!["zone1-0000000101".to_owned()]);
    assert!(
        e.to_string().contains("only zone1-0000000101 replicate"),
        "{e}"
    );
}

#[test]
fn online_without_fsfreeze_keeps_acknowledging_and_with_it_does_not() {
    let mut s = shard();
    stop_replication(&mut s, 101);
    let online = plan(
        &s,
        Mode::Online,
        "{mode: online, target: {allowSingleReplica: true}, fsfreeze: false}",
    );
    assert!(!stops_acks(&online));
    assert_eq!(check(&s, &online, required(1)), Ok(()));
    let frozen = plan(
        &s,
        Mode::Online,
        "{mode: online, target: {allowSingleReplica: true}, fsfreeze: true}",
    );
    assert!(stops_acks(&frozen));
    assert!(check(&s, &frozen, required(1)).is_err());
}

#[test]
fn an_rdonly_target_never_acknowledged() {
    let mut s = shard();
    for t in &mut s.tablets {
        if t.vt_type == Some(TabletType::Replica) {
            t.vt_type = Some(TabletType::Rdonly);
        }
    }
    let p = plan(&s, Mode::Cold, "{target: {tabletType: rdonly}}");
    assert!(!stops_acks(&p));
    assert_eq!(check(&s, &p, required(5)), Ok(()));
}

#[test]
fn the_primary_and_the_target_do_not_count() {
    let mut s = shard();
    // a primary with a replication entry (real vtctld gives it a position-only one)
    let entry = s.tablets[1].replication.clone();
    for t in &mut s.tablets {
        if t.vt_type == Some(TabletType::Primary) {
            t.replication = entry.clone();
        }
    }
    let p = plan(&s, Mode::Cold, "{}");
    let e = check(&s, &p, required(2)).unwrap_err();
    assert_eq!(e.left, 1, "{e}");
}

#[test]
fn a_replica_with_only_its_sql_thread_stopped_does_not_acknowledge() {
    let mut s = shard();
    let t = s
        .tablets
        .iter_mut()
        .find(|t| t.alias == TabletAlias::new("zone1", 101))
        .unwrap();
    t.replication.as_mut().unwrap().sql_running = false;
    let p = plan(&s, Mode::Cold, "{target: {allowSingleReplica: true}}");
    assert!(check(&s, &p, required(1)).is_err());
}

#[test]
fn the_variables_are_read_as_servers_write_them() {
    assert_eq!(parse(Some("1"), Some("1")), Some(required(1)));
    assert_eq!(parse(Some("ON"), Some("2")), Some(required(2)));
    assert_eq!(
        parse(Some("on"), None),
        Some(required(1)),
        "MariaDB: always one"
    );
    assert_eq!(parse(Some("0"), Some("3")), Some(PrimaryAcks::NotRequired));
    assert_eq!(parse(Some("OFF"), None), Some(PrimaryAcks::NotRequired));
    assert_eq!(parse(Some("maybe"), Some("1")), None);
    assert_eq!(parse(None, Some("1")), None);
    assert_eq!(
        parse(Some("1"), Some("0")),
        None,
        "a count of 0 is not a server's"
    );
    assert_eq!(parse(Some("1"), Some("x")), None);
    assert!(is_unknown_variable(
        "TabletManager.ExecuteFetchAsDba on zone1-0000000102: Unknown system variable 'rpl_semi_sync_source_enabled' (errno 1193) (sqlstate HY000)"
    ));
    assert!(is_unknown_variable("(errno 1193)"));
    assert!(!is_unknown_variable("(errno 2002)"));
}
