use vtsnap_core::coverage::Text;
use vtsnap_core::snapshot::GtidFlavor;

use super::*;

const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

fn u(range: &str) -> GtidSet {
    GtidSet::parse(GtidFlavor::Mysql56, &format!("{U}:{range}"), Text::Server).unwrap()
}

fn client() -> Client {
    Client {
        socket: "/vt/socket/mysql.sock".into(),
        user: "vt_dba".into(),
    }
}

fn base(exactness: Exactness) -> Base {
    Base {
        name: "snap".into(),
        gtid: u("1-100"),
        exactness,
        cut: Timestamp::UNIX_EPOCH,
    }
}

#[test]
fn a_time_target_stops_each_binlog_at_the_utc_second_and_a_set_includes_it() {
    let files = [
        PathBuf::from("/vt/pitr/b1/vt-0000000102-bin.000003"),
        PathBuf::from("/vt/pitr/b2/vt-0000000102-bin.000004"),
    ];
    // 15:02:59.9 in +02:00 is 13:02:59 UTC at whole seconds.
    let t: Timestamp = "2026-12-07T15:02:59.9+02:00".parse().unwrap();
    let target = Target::Before(t);
    let g = guard(&base(Exactness::Exact), &[], &target);
    let s = script(&files, &target, &client(), &g, None).unwrap();
    let mysql = "mysql --no-defaults -S '/vt/socket/mysql.sock' -u 'vt_dba'";
    assert_eq!(
        s,
        format!(
            "set -euo pipefail\nexport TZ=UTC\n\
             check() {{ [ \"$({mysql} -N -B -e \"$2\")\" = 1 ] || {{ echo \"vtsnap-pitr: $1\" >&2; exit 3; }}; }}\n\
             {mysql} -e 'SET GLOBAL super_read_only = OFF'\n\
             mysqlbinlog --stop-datetime='2026-12-07 13:02:59' '/vt/pitr/b1/vt-0000000102-bin.000003' | {mysql}\n\
             mysqlbinlog --stop-datetime='2026-12-07 13:02:59' '/vt/pitr/b2/vt-0000000102-bin.000004' | {mysql}\n\
             check 'the server holds transactions past the target or the archive' \"SELECT GTID_SUBSET(@@global.gtid_executed, '{U}:1-100')\"\n"
        )
    );
    let target = Target::Through(u("1-5:7"));
    let g = guard(&base(Exactness::Exact), &[], &target);
    let s = script(&files[..1], &target, &client(), &g, None).unwrap();
    assert!(
        s.contains(&format!(
            "mysqlbinlog --include-gtids='{U}:1-5:7' '/vt/pitr/b1/"
        )),
        "{s}"
    );
    assert!(
        s.ends_with(&format!(
            "check 'the replay stopped short of the target' \"SELECT GTID_SUBSET('{U}:1-5:7', @@global.gtid_executed)\"\n"
        )),
        "{s}"
    );
    assert!(
        !s.contains("the restored base"),
        "an exact base needs no check: {s}"
    );
    let bad = [PathBuf::from("/tmp/it's")];
    assert_eq!(
        script(&bad, &target, &client(), &g, None).unwrap_err(),
        ScriptError::Unquotable("/tmp/it's".into())
    );
}

#[test]
fn the_guard_checks_an_online_base_first_and_bounds_a_time_replay_by_the_archive() {
    let target = Target::Through(u("1-150"));
    let g = guard(&base(Exactness::LowerBound), &[], &target);
    assert_eq!(
        g,
        Guard {
            base_within: Some(u("1-150")),
            end_within: u("1-150"),
            end_holds: Some(u("1-150")),
        }
    );
    let s = script(&[], &target, &client(), &g, None).unwrap();
    let check = s.find("the restored base holds").unwrap();
    assert!(check < s.find("super_read_only").unwrap(), "{s}");
    let inc = |to: &str| Increment {
        name: "i".into(),
        tablet: vtsnap_core::naming::TabletAlias::new("zone1", 103),
        from: u("1"),
        to: u(to),
        purged: u("1"),
        first_commit: Timestamp::UNIX_EPOCH,
        last_commit: Timestamp::UNIX_EPOCH,
        started: Timestamp::UNIX_EPOCH,
        compression: vtsnap_core::pitr::manifest::Compression::Gzip,
        files: Vec::new(),
    };
    let (a, b) = (inc("1-150"), inc("1-200"));
    let g = guard(
        &base(Exactness::LowerBound),
        &[&a, &b],
        &Target::Before(Timestamp::UNIX_EPOCH),
    );
    assert_eq!(
        g,
        Guard {
            base_within: None,
            end_within: u("1-200"),
            end_holds: None,
        }
    );
}

#[test]
fn the_report_is_written_last_and_only_after_every_check() {
    let target = Target::Before(Timestamp::from_second(1_000).unwrap());
    let g = guard(&base(Exactness::Exact), &[], &target);
    let r = Report {
        path: "/pitr/result.json".into(),
        bytes: 4096,
        last_transaction: Some(990),
    };
    let s = script(
        &[PathBuf::from("/pitr/b/binlog.000002")],
        &target,
        &client(),
        &g,
        Some(&r),
    )
    .unwrap();
    let written = s.find("> '/pitr/result.json'").unwrap();
    assert!(s.rfind("check ").unwrap() < written, "{s}");
    assert!(s.find("mysqlbinlog").unwrap() < written, "{s}");
    assert!(
        s.contains(r#"{"bytes":4096,"lastTransaction":990,"gtidExecuted":"%s"}"#),
        "{s}"
    );
    let none = Report {
        last_transaction: None,
        ..r.clone()
    };
    let s = script(&[], &target, &client(), &g, Some(&none)).unwrap();
    assert!(s.contains(r#""lastTransaction":null"#), "{s}");
    let quote = Report {
        path: "/pitr/it's".into(),
        ..r
    };
    assert!(script(&[], &target, &client(), &g, Some(&quote)).is_err());
    assert!(
        !script(&[], &target, &client(), &g, None)
            .unwrap()
            .contains("printf")
    );
}
