use super::*;
use crate::snapshot::GtidFlavor;

const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

fn purged_mysql(s: &str) -> Purged {
    Purged::Mysql56(GtidSet::parse(GtidFlavor::Mysql56, s, Text::Server).unwrap())
}

fn oldest_mariadb(s: &str) -> Purged {
    Purged::MariadbOldestBinlogStart(GtidSet::parse(GtidFlavor::Mariadb, s, Text::Server).unwrap())
}

#[test]
fn mysql_covered_while_purged_is_a_subset_of_the_snapshot() {
    let at = format!("MySQL56/{A}:1-100");
    let c = |purged: &str| coverage(Some(&at), Exactness::Exact, Some(&purged_mysql(purged)));
    assert_eq!(c(""), Coverage::Covered);
    assert_eq!(c(&format!("{A}:1-100")), Coverage::Covered);
    assert_eq!(
        c(&format!("{A}:1-120")),
        Coverage::NotCovered {
            missing: format!("{A}:101-120")
        }
    );
}

#[test]
fn mariadb_covered_while_no_domain_of_the_oldest_binlog_is_ahead() {
    let at = "MariaDB/0-1-100,1-1-7";
    let c = |oldest: &str| coverage(Some(at), Exactness::Exact, Some(&oldest_mariadb(oldest)));
    assert_eq!(c("0-1-100"), Coverage::Covered);
    assert_eq!(
        c("0-2-90,1-1-7"),
        Coverage::Covered,
        "the server id does not matter"
    );
    assert_eq!(c(""), Coverage::Covered, "nothing purged yet");
    assert_eq!(
        c("0-1-101"),
        Coverage::NotCovered {
            missing: "0-1-101".into()
        }
    );
    assert_eq!(
        c("2-1-1"),
        Coverage::NotCovered {
            missing: "2-1-1".into()
        },
        "a domain the snapshot never saw, already in a purged binlog"
    );
}

#[test]
fn an_online_snapshot_is_judged_at_its_lower_bound_and_says_so() {
    let got = coverage(
        Some("MariaDB/0-1-50"),
        Exactness::LowerBound,
        Some(&oldest_mariadb("0-1-60")),
    );
    assert_eq!(
        got,
        Coverage::NotCovered {
            missing: "0-1-60 (beyond its lower bound)".into()
        }
    );
}

#[test]
fn anything_unread_or_mismatched_is_unknown_never_a_verdict() {
    let p = purged_mysql("");
    for (position, purged) in [
        (None, Some(&p)),
        (Some("MySQL56/x"), Some(&p)),
        (Some("MariaDB/0-1-1"), Some(&p)),
        (Some("MySQL56/"), None),
    ] {
        let got = coverage(position, Exactness::Exact, purged);
        assert!(
            matches!(got, Coverage::Unknown { .. }),
            "{position:?}: {got:?}"
        );
    }
}

#[test]
fn headroom_is_expiry_minus_age_and_none_without_expiry() {
    let h = |age: u64, exp: u64| headroom(Duration::from_secs(age), Duration::from_secs(exp));
    assert_eq!(
        h(3600, 7 * 86400),
        Some(Duration::from_secs(7 * 86400 - 3600))
    );
    assert_eq!(h(8 * 86400, 7 * 86400), Some(Duration::ZERO));
    assert_eq!(h(10, 0), None);
}
