use super::*;
use vtsnap_core::config::GoDuration;
use vtsnap_core::naming::KeyRange;
use vtsnap_core::shard::{PodInfo, Replication, ShardRef};

/// A healthy shard: primary uid 100, replicas uid 101.., all ready and caught up.
fn shard(replicas: u32) -> Shard {
    let mut tablets = vec![tablet(100, TabletType::Primary)];
    for i in 0..replicas {
        tablets.push(tablet(101 + i, TabletType::Replica));
    }
    Shard {
        shard_ref: ShardRef {
            cluster: "example".into(),
            namespace: "vitess".into(),
            keyspace: "commerce".into(),
            shard: "-".parse::<KeyRange>().unwrap(),
        },
        primary: Some(TabletAlias::new("zone1", 100)),
        tablets,
        issues: vec![],
    }
}

fn tablet(uid: u32, t: TabletType) -> Tablet {
    Tablet {
        alias: TabletAlias::new("zone1", uid),
        vt_type: Some(t),
        pool_type: Some("replica".into()),
        pod: Some(PodInfo {
            name: format!("pod-{uid}"),
            uid: format!("uid-{uid}"),
            node: Some(format!("node-{uid}")),
            phase: "Running".into(),
            ready: true,
            terminating: false,
        }),
        pvc: Some(format!("pod-{uid}")),
        replication: (t != TabletType::Primary).then(|| Replication {
            position: "MariaDB/0-1-100".into(),
            lag_seconds: 0,
            lag_unknown: false,
            io_running: true,
            sql_running: true,
            last_error: None,
        }),
    }
}

fn policy() -> ResolvedTarget {
    ResolvedTarget {
        tablet_type: TargetType::Replica,
        allow_single_replica: false,
        max_lag: GoDuration::secs(30),
    }
}

fn at(s: &mut Shard, uid: u32) -> &mut Tablet {
    s.tablets
        .iter_mut()
        .find(|t| t.alias.uid.get() == uid)
        .unwrap()
}

#[test]
fn picks_the_most_caught_up_replica_then_the_lowest_uid() {
    let mut s = shard(3);
    assert_eq!(select(&s, &policy()).unwrap().alias, "zone1-0000000101");
    at(&mut s, 101).replication.as_mut().unwrap().lag_seconds = 5;
    at(&mut s, 102).replication.as_mut().unwrap().lag_seconds = 2;
    at(&mut s, 103).replication.as_mut().unwrap().lag_seconds = 2;
    let t = select(&s, &policy()).unwrap();
    assert_eq!(t.alias, "zone1-0000000102");
    assert_eq!(
        (t.pod.as_str(), t.node.as_str(), t.pvc.as_str()),
        ("pod-102", "node-102", "pod-102")
    );
}

#[test]
fn never_the_primary_even_when_vtctld_calls_it_a_replica() {
    // The shard record names 100 as primary, but GetTablets still lists it as a replica.
    let mut s = shard(2);
    at(&mut s, 100).vt_type = Some(TabletType::Replica);
    at(&mut s, 100).replication = at(&mut s.clone(), 101).replication.clone();
    let r = select(&s, &policy()).unwrap_err();
    assert_eq!(r.code(), "primary-uncertain");
}

#[test]
fn a_second_primary_type_is_uncertainty() {
    let mut s = shard(3);
    at(&mut s, 103).vt_type = Some(TabletType::Primary);
    assert_eq!(
        select(&s, &policy()).unwrap_err().code(),
        "primary-uncertain"
    );
}

#[test]
fn no_primary_no_snapshot() {
    let mut s = shard(2);
    s.primary = None;
    assert_eq!(select(&s, &policy()).unwrap_err(), Refusal::NoPrimary);
}

#[test]
fn no_replica() {
    assert_eq!(
        select(&shard(0), &policy()).unwrap_err(),
        Refusal::NoCandidates {
            tablet_type: "replica"
        }
    );
    let rdonly = ResolvedTarget {
        tablet_type: TargetType::Rdonly,
        ..policy()
    };
    assert_eq!(
        select(&shard(2), &rdonly).unwrap_err().code(),
        "no-candidates"
    );
}

#[test]
fn a_single_replica_needs_the_override() {
    let r = select(&shard(1), &policy()).unwrap_err();
    assert_eq!(r.code(), "single-replica");
    let allow = ResolvedTarget {
        allow_single_replica: true,
        ..policy()
    };
    assert_eq!(select(&shard(1), &allow).unwrap().alias, "zone1-0000000101");
}

#[test]
fn each_unhealthy_reason_is_named() {
    type Breakage = Box<dyn Fn(&mut Tablet)>;
    let cases: Vec<(Breakage, &str)> = vec![
        (Box::new(|t| t.pod = None), "pod-missing"),
        (
            Box::new(|t| t.pod.as_mut().unwrap().ready = false),
            "pod-not-ready",
        ),
        (
            Box::new(|t| t.pod.as_mut().unwrap().terminating = true),
            "pod-terminating",
        ),
        (Box::new(|t| t.pvc = None), "pvc-missing"),
        (
            Box::new(|t| t.replication = None),
            "replication-status-unknown",
        ),
        (
            Box::new(|t| t.replication.as_mut().unwrap().sql_running = false),
            "replication-stopped",
        ),
        (
            Box::new(|t| t.replication.as_mut().unwrap().lag_unknown = true),
            "lag-unknown",
        ),
        (
            Box::new(|t| t.replication.as_mut().unwrap().lag_seconds = 31),
            "lagging",
        ),
    ];
    for (break_it, reason) in cases {
        let mut s = shard(2);
        break_it(at(&mut s, 101));
        break_it(at(&mut s, 102));
        let r = select(&s, &policy()).unwrap_err();
        assert_eq!(r.code(), "no-healthy-candidate", "{reason}");
        let Refusal::NoHealthyCandidate { rejected, .. } = &r else {
            unreachable!()
        };
        let v = serde_json::to_value(rejected).unwrap();
        assert_eq!(v[0]["reason"], reason, "{v}");
        assert!(r.to_string().contains(reason), "{r}");
    }
}

#[test]
fn taking_the_last_healthy_replica_needs_the_override() {
    let mut s = shard(2);
    at(&mut s, 102).replication.as_mut().unwrap().lag_seconds = 600;
    let r = select(&s, &policy()).unwrap_err();
    assert_eq!(r.code(), "no-other-healthy-replica");
    assert!(r.to_string().contains("zone1-0000000101"), "{r}");
    let allow = ResolvedTarget {
        allow_single_replica: true,
        ..policy()
    };
    assert_eq!(select(&s, &allow).unwrap().alias, "zone1-0000000101");
}

#[test]
fn tablets_vtctld_does_not_know_are_never_chosen() {
    let mut s = shard(3);
    at(&mut s, 101).vt_type = None;
    assert_eq!(select(&s, &policy()).unwrap().alias, "zone1-0000000102");
}

#[test]
fn a_lag_equal_to_the_limit_is_still_healthy() {
    let mut s = shard(2);
    at(&mut s, 101).replication.as_mut().unwrap().lag_seconds = 30;
    at(&mut s, 102).replication.as_mut().unwrap().lag_seconds = 30;
    assert_eq!(select(&s, &policy()).unwrap().alias, "zone1-0000000101");
    at(&mut s, 101).replication.as_mut().unwrap().lag_seconds = 31;
    at(&mut s, 102).replication.as_mut().unwrap().lag_seconds = 31;
    assert_eq!(
        select(&s, &policy()).unwrap_err().code(),
        "no-healthy-candidate"
    );
}
