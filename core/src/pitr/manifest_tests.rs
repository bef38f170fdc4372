use serde_json::{Value, json};

use super::*;

const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
const NAME: &str = "2026-12-07.093512.zone1-0000000102";
const EXPECTED: Expected<'static> = Expected {
    backup: NAME,
    keyspace: "commerce",
    shard: "-",
};

fn now() -> Timestamp {
    "2026-12-07T10:00:00Z".parse().unwrap()
}

/// An incremental backup's MANIFEST as Vitess 24 writes it (key names and order of
/// `BackupManifest` + `builtinBackupManifest`).
fn incremental() -> Value {
    json!({
        "BackupName": NAME,
        "BackupMethod": "builtin",
        "Position": format!("MySQL56/{U}:1-250"),
        "PurgedPosition": format!("MySQL56/{U}:1-10"),
        "FromPosition": format!("MySQL56/{U}:1-120"),
        "FromBackup": "",
        "Incremental": true,
        "BackupTime": "2026-12-07T09:35:12Z",
        "FinishedTime": "2026-12-07T09:35:13Z",
        "ServerUUID": U,
        "TabletAlias": "zone1-0000000102",
        "Hostname": "example-vttablet-zone1-0000000102",
        "Keyspace": "commerce",
        "Shard": "-",
        "MySQLVersion": "Ver 9.7.4-2 (Debian)",
        "UpgradeSafe": false,
        "IncrementalDetails": {
            "FirstTimestamp": "2026-12-07T09:20:01Z",
            "FirstTimestampBinlog": "vt-0000000102-bin.000003",
            "LastTimestamp": "2026-12-07T09:35:11Z",
            "LastTimestampBinlog": "vt-0000000102-bin.000004"
        },
        "CompressionEngine": "pargzip",
        "FileEntries": [
            {"Base": "BinLog", "Name": "vt-0000000102-bin.000003", "Hash": "1a2b3c4d", "ParentPath": ""},
            {"Base": "BinLog", "Name": "vt-0000000102-bin.000004", "Hash": "00ff00ff", "ParentPath": ""}
        ],
        "SkipCompress": false,
        "ExternalDecompressor": ""
    })
}

fn read_value(v: &Value) -> Result<Record, ManifestError> {
    read(v.to_string().as_bytes(), EXPECTED, now())
}

fn increment(v: &Value) -> Increment {
    match read_value(v).unwrap() {
        Record::Increment(i) => *i,
        other => panic!("{other:?}"),
    }
}

fn set(s: &str) -> GtidSet {
    GtidSet::parse_position(s, Text::Strict).unwrap()
}

#[test]
fn an_incremental_manifest_gives_its_positions_times_and_files() {
    let i = increment(&incremental());
    assert_eq!(i.name, NAME);
    assert_eq!(i.tablet, TabletAlias::new("zone1", 102));
    assert_eq!(i.from, set(&format!("MySQL56/{U}:1-120")));
    assert_eq!(i.to, set(&format!("MySQL56/{U}:1-250")));
    assert_eq!(i.purged, set(&format!("MySQL56/{U}:1-10")));
    assert_eq!(i.first_commit.to_string(), "2026-12-07T09:20:01Z");
    assert_eq!(i.last_commit.to_string(), "2026-12-07T09:35:11Z");
    assert_eq!(i.started.to_string(), "2026-12-07T09:35:12Z");
    assert_eq!(i.compression, Compression::Gzip);
    assert_eq!(
        i.files,
        [
            BinlogFile {
                stored: "0".into(),
                binlog: "vt-0000000102-bin.000003".into(),
                crc32: 0x1a2b_3c4d,
            },
            BinlogFile {
                stored: "1".into(),
                binlog: "vt-0000000102-bin.000004".into(),
                crc32: 0x00ff_00ff,
            },
        ]
    );
}

#[test]
fn a_full_backup_is_told_apart_and_storage_forms_are_read() {
    let mut full = incremental();
    full["Incremental"] = json!(false);
    full["FromPosition"] = json!("");
    full["IncrementalDetails"] = Value::Null;
    assert_eq!(
        read_value(&full).unwrap(),
        Record::Full { name: NAME.into() }
    );
    // An empty engine is pgzip; SkipCompress wins over any engine.
    let mut v = incremental();
    v["CompressionEngine"] = json!("");
    assert_eq!(increment(&v).compression, Compression::Gzip);
    v["CompressionEngine"] = json!("zstd");
    v["SkipCompress"] = json!(true);
    assert_eq!(increment(&v).compression, Compression::None);
    // Vitess writes `MySQL56/` for an empty gtid_purged.
    v["PurgedPosition"] = json!("MySQL56/");
    assert_eq!(
        increment(&v).purged,
        GtidSet::empty(crate::snapshot::GtidFlavor::Mysql56)
    );
}

/// Each hostile change to a good MANIFEST, and the words its refusal must say.
#[test]
fn every_bad_manifest_is_refused_naming_the_field() {
    type Change = fn(&mut Value);
    let cases: Vec<(&str, Change, &str)> = vec![
        (
            "other name",
            |v| v["BackupName"] = json!("2026-12-07.000000.zone1-0000000101"),
            "BackupName is \"2026-12-07.000000.zone1-0000000101\", and its directory is",
        ),
        (
            "no name",
            |v| v["BackupName"] = Value::Null,
            "BackupName is missing",
        ),
        (
            "other keyspace",
            |v| v["Keyspace"] = json!("customer"),
            "Keyspace is \"customer\", and the backup is stored under \"commerce\"",
        ),
        (
            "other shard",
            |v| v["Shard"] = json!("-80"),
            "Shard is \"-80\"",
        ),
        (
            "xtrabackup",
            |v| v["BackupMethod"] = json!("xtrabackup"),
            "an incremental backup of engine \"xtrabackup\"",
        ),
        (
            "bad alias",
            |v| v["TabletAlias"] = json!("zone1"),
            "TabletAlias is \"zone1\"",
        ),
        (
            "mariadb",
            |v| v["Position"] = json!("MariaDB/0-1-100"),
            "Position is a MariaDB position",
        ),
        (
            "bad position",
            |v| v["FromPosition"] = json!(format!("MySQL56/{U}:9-1")),
            "FromPosition is not a GTID position",
        ),
        (
            "no from",
            |v| v["FromPosition"] = Value::Null,
            "FromPosition is missing",
        ),
        (
            "to short of from",
            |v| v["Position"] = json!(format!("MySQL56/{U}:1-100")),
            "short of its own FromPosition by 3e11fa47-71ca-11e1-9e33-c80aa9429562:101-120",
        ),
        (
            "no details",
            |v| v["IncrementalDetails"] = Value::Null,
            "IncrementalDetails is missing",
        ),
        (
            "last before first",
            |v| v["IncrementalDetails"]["LastTimestamp"] = json!("2026-12-07T09:00:00Z"),
            "before its FirstTimestamp",
        ),
        (
            "future",
            |v| v["IncrementalDetails"]["LastTimestamp"] = json!("2026-12-08T00:00:00Z"),
            "in the future",
        ),
        (
            "not a time",
            |v| v["BackupTime"] = json!("yesterday"),
            "BackupTime is \"yesterday\", not an RFC 3339 time",
        ),
        (
            "zstd",
            |v| v["CompressionEngine"] = json!("zstd"),
            "compressed with \"zstd\"",
        ),
        ("no files", |v| v["FileEntries"] = json!([]), "0 entries"),
        (
            "data file",
            |v| v["FileEntries"][1]["Base"] = json!("InnoDBData"),
            "entry 1 of base \"InnoDBData\"",
        ),
        (
            "walks up",
            |v| v["FileEntries"][0]["Name"] = json!("../../etc/passwd.000001"),
            "entry 0 naming \"../../etc/passwd.000001\"",
        ),
        (
            "hidden",
            |v| v["FileEntries"][0]["Name"] = json!(".bin.000001"),
            "not a binlog file's name",
        ),
        (
            "no number",
            |v| v["FileEntries"][0]["Name"] = json!("vt-bin.12"),
            "not a binlog file's name",
        ),
        (
            "nested",
            |v| v["FileEntries"][0]["ParentPath"] = json!("sub"),
            "not a binlog file's name",
        ),
        (
            "short hash",
            |v| v["FileEntries"][1]["Hash"] = json!("abc"),
            "entry 1 with hash \"abc\", not 8 hex digits",
        ),
        (
            "signed hash",
            |v| v["FileEntries"][1]["Hash"] = json!("+1234567"),
            "not 8 hex digits",
        ),
        (
            "no hash",
            |v| v["FileEntries"][1]["Hash"] = Value::Null,
            "FileEntries is missing",
        ),
        (
            "typed wrong",
            |v| v["Incremental"] = json!("yes"),
            "is not JSON of a Vitess backup",
        ),
    ];
    for (what, change, words) in cases {
        let mut v = incremental();
        change(&mut v);
        let e = read_value(&v).unwrap_err().to_string();
        assert!(e.starts_with(&format!("backup {NAME}: ")), "{what}: {e}");
        assert!(e.contains(words), "{what}: {e}");
    }
    let e = read(b"{", EXPECTED, now()).unwrap_err();
    assert!(matches!(e, ManifestError::NotAManifest { .. }), "{e}");
}

#[test]
fn binlog_names_are_a_stem_and_a_number() {
    for good in [
        "vt-0000000101-bin.000001",
        "mysql-bin.1234567",
        "a.b.000001",
    ] {
        assert!(is_binlog_name(good), "{good}");
    }
    for bad in [
        "",
        "000001",
        ".000001",
        "x.00001",
        "x/y.000001",
        "x.00000a",
        "x.000001/",
    ] {
        assert!(!is_binlog_name(bad), "{bad}");
    }
    assert!(!is_binlog_name(&format!("{}.000001", "x".repeat(250))));
}

#[test]
fn a_time_may_run_ahead_by_the_clock_skew_and_no_more_and_the_size_is_bounded() {
    let skew = CLOCK_SKEW.as_secs();
    let ahead = |secs: i64| {
        let t = Timestamp::from_second(now().as_second() + secs).unwrap();
        let mut v = incremental();
        v["IncrementalDetails"]["LastTimestamp"] = json!(t.to_string());
        read_value(&v)
    };
    assert!(ahead(skew).is_ok());
    let e = ahead(skew + 1).unwrap_err().to_string();
    assert!(e.contains("in the future"), "{e}");
    // Padded past the bound with whitespace, which JSON allows: refused unread.
    let mut text = incremental().to_string().into_bytes();
    text.resize(MAX_MANIFEST as usize + 1, b' ');
    let e = read(&text, EXPECTED, now()).unwrap_err().to_string();
    assert!(e.contains(&format!("more than {MAX_MANIFEST}")), "{e}");
    text.truncate(MAX_MANIFEST as usize);
    assert!(read(&text, EXPECTED, now()).is_ok());
}

#[test]
fn one_transaction_has_one_time_and_the_file_count_is_bounded_exactly() {
    let mut v = incremental();
    v["IncrementalDetails"]["LastTimestamp"] = v["IncrementalDetails"]["FirstTimestamp"].clone();
    let i = increment(&v);
    assert_eq!(i.first_commit, i.last_commit);
    let files = |n: usize| -> Value {
        (0..n)
            .map(|k| json!({"Base": "BinLog", "Name": format!("vt-0000000102-bin.{k:06}"), "Hash": "00000000"}))
            .collect()
    };
    v["FileEntries"] = files(MAX_FILES);
    assert_eq!(increment(&v).files.len(), MAX_FILES);
    v["FileEntries"] = files(MAX_FILES + 1);
    let e = read_value(&v).unwrap_err().to_string();
    assert!(
        e.contains(&format!("{} entries, not 1 to {MAX_FILES}", MAX_FILES + 1)),
        "{e}"
    );
}
