//! The registry on disk: entries as earlier versions wrote them, unreadable ones kept.

use vtsnap_core::naming::TabletAlias;
use vtsnap_core::vtctld::TabletType;

use super::*;

fn entry(lease: &str) -> Entry {
    Entry {
        lease: lease.into(),
        pod_uid: "uid".into(),
        tablet_alias: TabletAlias::new("zone1", 101),
        original_type: TabletType::Rdonly,
        vtctld: "http://vtctld:15999".into(),
        container_id: None,
        volume_mount: None,
        mysqlctl_socket: "/s/mysqlctl.sock".into(),
        mysqld_socket: "/s/mysql.sock".into(),
        stopped_mysqld: true,
        mysqld_down: true,
        cgroup: None,
        fs_frozen: None,
        hold_since_ms: Some(1),
        max_hold_secs: 60,
        watchdog_released: false,
    }
}

#[test]
fn an_entry_is_stored_as_the_strings_earlier_versions_wrote() {
    let v = serde_json::to_value(entry("ns/a")).unwrap();
    assert_eq!(v["tablet_alias"], "zone1-0000000101");
    assert_eq!(v["original_type"], "rdonly");
}

#[test]
fn an_unreadable_entry_is_kept_verbatim_and_never_overwritten_or_removed() {
    let dir = tempfile::tempdir().unwrap();
    let bad = r#"{"lease": "ns/bad", "tablet_alias": "no-dash-uid-x", "weird":  [1, 2.50]}"#;
    let good = serde_json::to_string(&entry("ns/good")).unwrap();
    std::fs::write(
        dir.path().join("holds.json"),
        format!(r#"{{"ns/bad": {bad}, "ns/good": {good}}}"#),
    )
    .unwrap();
    let reg = Registry::open(dir.path()).unwrap();
    assert_eq!(reg.all(), vec![entry("ns/good")]);
    let problems = reg.unreadable();
    assert_eq!(problems.len(), 1);
    assert!(matches!(&problems[0], RegistryError::Unreadable { lease, .. } if lease == "ns/bad"));

    // Rewrites (a put, a remove of another entry) keep it byte for byte.
    reg.put(entry("ns/other")).unwrap();
    reg.remove("ns/good").unwrap();
    let text = std::fs::read_to_string(dir.path().join("holds.json")).unwrap();
    assert!(text.contains(bad), "{text}");

    // It can be neither overwritten nor removed.
    assert!(reg.put(entry("ns/bad")).is_err());
    assert!(reg.remove("ns/bad").is_err());
    let reopened = Registry::open(dir.path()).unwrap();
    assert_eq!(reopened.unreadable().len(), 1);
    assert_eq!(reopened.all(), vec![entry("ns/other")]);
}
