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

#[test]
fn a_time_target_stops_each_binlog_at_the_utc_second_and_a_set_includes_it() {
    let files = [
        PathBuf::from("/vt/pitr/b1/vt-0000000102-bin.000003"),
        PathBuf::from("/vt/pitr/b2/vt-0000000102-bin.000004"),
    ];
    // 15:02:59.9 in +02:00 is 13:02:59 UTC at whole seconds.
    let t: Timestamp = "2026-12-07T15:02:59.9+02:00".parse().unwrap();
    let s = script(&files, &Target::Before(t), &client()).unwrap();
    let mysql = "mysql --no-defaults -S '/vt/socket/mysql.sock' -u 'vt_dba'";
    assert_eq!(
        s,
        format!(
            "set -euo pipefail\nexport TZ=UTC\n\
             {mysql} -e 'SET GLOBAL super_read_only = OFF'\n\
             mysqlbinlog --stop-datetime='2026-12-07 13:02:59' '/vt/pitr/b1/vt-0000000102-bin.000003' | {mysql}\n\
             mysqlbinlog --stop-datetime='2026-12-07 13:02:59' '/vt/pitr/b2/vt-0000000102-bin.000004' | {mysql}\n"
        )
    );
    let s = script(&files[..1], &Target::Through(u("1-5:7")), &client()).unwrap();
    assert!(
        s.contains(&format!(
            "mysqlbinlog --include-gtids='{U}:1-5:7' '/vt/pitr/b1/"
        )),
        "{s}"
    );
    let bad = [PathBuf::from("/tmp/it's")];
    assert_eq!(
        script(&bad, &Target::Through(u("1")), &client()).unwrap_err(),
        ScriptError::Unquotable("/tmp/it's".into())
    );
}

#[test]
fn a_replay_is_checked_against_its_base_the_archive_and_the_target() {
    let base = u("1-100");
    let reached = u("1-200");
    // A time target: anything between the base and what the archive held.
    let ok = verify(
        &base,
        &u("1-150"),
        &reached,
        &Target::Before(Timestamp::UNIX_EPOCH),
    )
    .unwrap();
    assert_eq!(ok.gtids, format!("{U}:101-150"));
    // A set target: exactly it.
    let ok = verify(&base, &u("1-150"), &reached, &Target::Through(u("1-150"))).unwrap();
    assert_eq!(ok.gtids, format!("{U}:101-150"));
    for (after, target, want) in [
        (
            u("1-140"),
            Target::Through(u("1-150")),
            VerifyError::Short(format!("{U}:141-150")),
        ),
        (
            u("1-160"),
            Target::Through(u("1-150")),
            VerifyError::Past(format!("{U}:151-160")),
        ),
        (
            u("1-50:60-150"),
            Target::Through(u("1-150")),
            VerifyError::LostBase(format!("{U}:51-59")),
        ),
        (
            u("1-210"),
            Target::Before(Timestamp::UNIX_EPOCH),
            VerifyError::NotFromArchive(format!("{U}:201-210")),
        ),
    ] {
        assert_eq!(verify(&base, &after, &reached, &target).unwrap_err(), want);
    }
    // An online base that holds more than the target is refused before the replay.
    assert_eq!(
        check_base(&u("1-120"), &Target::Through(u("1-110"))).unwrap_err(),
        VerifyError::BaseBeyondTarget(format!("{U}:111-120"))
    );
    assert!(check_base(&u("1-100"), &Target::Through(u("1-110"))).is_ok());
    assert!(check_base(&u("1-120"), &Target::Before(Timestamp::UNIX_EPOCH)).is_ok());
}
