use k8s_openapi::jiff::Timestamp;
use vtsnap_core::coverage::{Exactness, GtidSet, Text};
use vtsnap_core::pitr::manifest::Compression;
use vtsnap_core::snapshot::GtidFlavor;

use super::*;

const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

fn u(range: &str) -> GtidSet {
    GtidSet::parse(GtidFlavor::Mysql56, &format!("{U}:{range}"), Text::Server).unwrap()
}

fn at(hms: &str) -> Timestamp {
    format!("2026-12-07T{hms}Z").parse().unwrap()
}

fn base(name: &str, range: &str, cut: &str) -> Base {
    Base {
        name: name.into(),
        gtid: u(range),
        exactness: Exactness::Exact,
        cut: at(cut),
    }
}

fn inc(name: &str, from: &str, to: &str, last: &str) -> Increment {
    Increment {
        name: name.into(),
        tablet: TabletAlias::new("zone1", 103),
        from: u(from),
        to: u(to),
        purged: GtidSet::empty(GtidFlavor::Mysql56),
        first_commit: at(last),
        last_commit: at(last),
        started: at(last),
        compression: Compression::Gzip,
        files: Vec::new(),
    }
}

fn tablet(uid: u32, kind: TabletType) -> Tablet {
    Tablet {
        alias: TabletAlias::new("zone1", uid),
        kind,
    }
}

fn shard() -> Vec<Tablet> {
    vec![
        tablet(101, TabletType::Primary),
        tablet(103, TabletType::Rdonly),
        tablet(102, TabletType::Replica),
        tablet(104, TabletType::Drained),
    ]
}

#[test]
fn the_archive_goes_on_from_the_newest_snapshot_as_far_as_it_reaches() {
    let bases = [
        base("old", "1-50", "09:00:00"),
        base("new", "1-100", "10:00:00"),
    ];
    let t = next_increment(&bases, &[], &shard(), OnPrimary::Never).unwrap();
    assert_eq!(
        t,
        Take {
            alias: TabletAlias::new("zone1", 102),
            tablet: "zone1-0000000102".into(),
            from: format!("MySQL56/{U}:1-100"),
            base: "new".into(),
            after_increments: 0,
            on_primary: false,
        }
    );
    let archive = [
        inc("a", "1-90", "1-150", "10:10:00"),
        inc("b", "1-150", "1-200", "10:20:00"),
    ];
    let t = next_increment(&bases, &archive, &shard(), OnPrimary::Never).unwrap();
    assert_eq!(
        (t.from.as_str(), t.after_increments),
        (&*format!("MySQL56/{U}:1-200"), 2)
    );
    // An increment that does not follow (a gap before it) is not gone on from.
    let t = next_increment(&bases, &archive[1..], &shard(), OnPrimary::Never).unwrap();
    assert_eq!(t.from, format!("MySQL56/{U}:1-100"));
}

#[test]
fn a_replica_is_asked_first_and_the_primary_only_when_allowed_and_alone() {
    let bases = [base("new", "1-100", "10:00:00")];
    let spare_only = [
        tablet(101, TabletType::Primary),
        tablet(105, TabletType::Spare),
    ];
    assert_eq!(
        next_increment(&bases, &[], &spare_only, OnPrimary::Never)
            .unwrap()
            .tablet,
        "zone1-0000000105"
    );
    let no_replica = [tablet(101, TabletType::Rdonly)];
    assert_eq!(
        next_increment(&bases, &[], &no_replica, OnPrimary::Never)
            .unwrap()
            .tablet,
        "zone1-0000000101"
    );
    let alone = [
        tablet(101, TabletType::Primary),
        tablet(104, TabletType::Drained),
    ];
    assert_eq!(
        next_increment(&bases, &[], &alone, OnPrimary::Never)
            .unwrap_err()
            .to_string(),
        "no replica to take the increment on (tablets: zone1-0000000101 primary, \
         zone1-0000000104 drained); the primary is not used"
    );
    let t = next_increment(&bases, &[], &alone, OnPrimary::WhenNoReplica).unwrap();
    assert!(t.on_primary && t.tablet == "zone1-0000000101", "{t:?}");
    assert_eq!(
        next_increment(&bases, &[], &[], OnPrimary::WhenNoReplica).unwrap_err(),
        NoTake::NoReplica("none".into())
    );
    assert_eq!(
        next_increment(&[], &[], &shard(), OnPrimary::Never).unwrap_err(),
        NoTake::NoBase
    );
}
