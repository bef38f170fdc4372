//! `vtsnap-pitr plan` as an SRE runs it: a dump of the snapshots, the archive's file
//! storage, a target; the JSON line and the exit code.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use vtsnap_testkit::operator_objects::operator_shard;

const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
const SHARD: &str = "vitess/example/commerce/-";
const FIRST: &str = "2026-12-01.101001.zone1-0000000103";
const SECOND: &str = "2026-12-01.102001.zone1-0000000103";

fn at(hms: &str) -> String {
    format!("2026-12-01T{hms}Z")
}

/// An incremental backup's MANIFEST, in Vitess's shape.
fn manifest(name: &str, from: &str, to: &str, first: &str, last: &str) -> Value {
    manifest_with_hash(name, from, to, first, last, "0000abcd")
}

fn manifest_with_hash(
    name: &str,
    from: &str,
    to: &str,
    first: &str,
    last: &str,
    hash: &str,
) -> Value {
    json!({
        "BackupName": name, "BackupMethod": "builtin", "Incremental": true,
        "Position": format!("MySQL56/{U}:{to}"), "PurgedPosition": "MySQL56/",
        "FromPosition": format!("MySQL56/{U}:{from}"),
        "BackupTime": at(last), "FinishedTime": at(last),
        "TabletAlias": "zone1-0000000103", "Keyspace": "commerce", "Shard": "-",
        "IncrementalDetails": {"FirstTimestamp": at(first), "LastTimestamp": at(last)},
        "CompressionEngine": "pargzip", "SkipCompress": false,
        "FileEntries": [{"Base": "BinLog", "Name": "vt-0000000103-bin.000002", "Hash": hash}]
    })
}

struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    /// The snapshot `snap-a` (at `U:1-100`, cut 10:00) and two increments after it.
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cut = at("10:00:00").parse().unwrap();
        let snap = operator_shard().snapshot("snap-a", cut).object();
        let dump = json!({"kind": "List", "items": [snap]});
        std::fs::write(dir.path().join("snapshots.json"), dump.to_string()).unwrap();
        let s = Self { dir };
        s.put(
            FIRST,
            &manifest(FIRST, "1-90", "1-150", "09:59:00", "10:10:00"),
        );
        s.put(
            SECOND,
            &manifest(SECOND, "1-150", "1-200", "10:10:01", "10:20:00"),
        );
        s
    }

    fn put(&self, name: &str, m: &Value) {
        let d = self.archive().join("commerce/-").join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("MANIFEST"), m.to_string()).unwrap();
    }

    /// [`Self::new`], the first increment holding one stored binlog file `0`; the
    /// binlog and the file as stored.
    fn with_stored_binlog() -> (Self, Vec<u8>, Vec<u8>) {
        let s = Self::new();
        let (data, stored) = stored_binlog();
        let hash = format!("{:08x}", crc32fast::hash(&stored));
        s.put(
            FIRST,
            &manifest_with_hash(FIRST, "1-90", "1-150", "09:59:00", "10:10:00", &hash),
        );
        let backup = s.archive().join("commerce/-").join(FIRST);
        std::fs::write(backup.join("0"), &stored).unwrap();
        (s, data, stored)
    }

    fn archive(&self) -> &Path {
        self.dir.path()
    }

    fn plan(&self, extra: &[&str]) -> (i32, Value, String) {
        self.run("plan", extra)
    }

    fn run(&self, command: &str, extra: &[&str]) -> (i32, Value, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_vtsnap-pitr"))
            .arg(command)
            .args(["--shard", SHARD, "--archive-root"])
            .arg(self.archive())
            .arg("--objects")
            .arg(self.dir.path().join("snapshots.json"))
            .args(extra)
            .env_remove("VTSNAP_SHARD")
            .env_remove("VTSNAP_ARCHIVE_ROOT")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        (
            out.status.code().unwrap(),
            line,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[test]
fn a_time_and_a_gtid_set_get_the_snapshot_and_the_increments_that_reach_them() {
    let s = Scene::new();
    let (code, line, err) = s.plan(&["--to-time", &at("10:15:00")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(line["plan"]["base"], "snap-a");
    assert_eq!(line["plan"]["increments"], json!([FIRST, SECOND]));
    assert_eq!(line["plan"]["baseCheck"], "recorded");
    assert_eq!(line["target"], json!({"before": at("10:15:00")}));
    assert_eq!(
        line["window"],
        json!([{"from": at("10:00:00"), "to": at("10:20:00")}])
    );
    assert_eq!(line["increments"], 2);

    let (code, line, _) = s.plan(&["--to-gtid", &format!("{U}:1-120")]);
    assert_eq!(code, 0);
    assert_eq!(line["plan"]["increments"], json!([FIRST]));
}

#[test]
fn a_target_out_of_reach_is_refused_with_the_window_and_a_hole_names_its_gtids() {
    let s = Scene::new();
    let (code, line, err) = s.plan(&["--to-time", &at("10:25:00")]);
    assert_eq!(code, 3);
    assert_eq!(line["plan"], Value::Null);
    let said = format!(
        "no snapshot of {SHARD} reaches the time {}: the shard can be recovered to any \
         point from {} to {}",
        at("10:25:00"),
        at("10:00:00"),
        at("10:20:00")
    );
    assert_eq!(line["message"], said.as_str());
    assert!(err.contains(&said), "{err}");
    // Before the oldest snapshot: the same window.
    let (code, early, _) = s.plan(&["--to-time", &at("09:00:00")]);
    assert_eq!(code, 3);
    assert!(
        early["message"]
            .as_str()
            .unwrap()
            .ends_with("from 2026-12-01T10:00:00Z to 2026-12-01T10:20:00Z"),
        "{early}"
    );
    let why = line["refused"][0]["why"].as_str().unwrap();
    assert_eq!(line["refused"][0]["name"], "snap-a");
    assert!(
        why.contains("from 2026-12-01T10:00:00Z to 2026-12-01T10:20:00Z"),
        "{why}"
    );

    // The first increment's MANIFEST gone: an incomplete backup, and a gap.
    std::fs::remove_file(s.archive().join("commerce/-").join(FIRST).join("MANIFEST")).unwrap();
    let (code, line, _) = s.plan(&["--to-time", &at("10:15:00")]);
    assert_eq!(code, 3);
    assert_eq!(line["incompleteBackups"], json!([FIRST]));
    let why = line["refused"][0]["why"].as_str().unwrap();
    assert!(why.contains(&format!("{U}:101-150 are missing")), "{why}");

    // A damaged MANIFEST is named, not skipped in silence.
    let mut bad = manifest(FIRST, "1-90", "1-150", "09:59:00", "10:10:00");
    bad["FileEntries"][0]["Hash"] = json!("xyz");
    s.put(FIRST, &bad);
    let (_, line, _) = s.plan(&["--to-time", &at("10:15:00")]);
    assert_eq!(line["passedBackups"][0]["name"], FIRST);
    assert!(
        line["passedBackups"][0]["why"]
            .as_str()
            .unwrap()
            .contains("not 8 hex digits")
    );
}

#[test]
fn bad_usage_is_named_and_exits_2() {
    let s = Scene::new();
    for (args, words) in [
        (
            vec!["--to-time", "yesterday"],
            "--to-time \"yesterday\": not an RFC 3339 time",
        ),
        (vec!["--to-time", "2999-01-01T00:00:00Z"], "after now"),
        (vec!["--to-gtid", "nope:1"], "--to-gtid \"nope:1\""),
        (
            vec!["--to-time", "2026-12-01T10:15:00Z", "--snapshot", "snap-x"],
            "--snapshot snap-x: no snapshot of vitess/example/commerce/- has that name",
        ),
        (vec![], "--to-time"),
    ] {
        let (code, _, err) = s.plan(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(words), "{args:?}: {err}");
    }
}

/// A binlog as the archive stores it: the magic, some bytes, gzip in two members.
fn stored_binlog() -> (Vec<u8>, Vec<u8>) {
    use flate2::write::GzEncoder;
    use std::io::Write;
    let mut data = vec![0xfe, b'b', b'i', b'n'];
    data.extend((0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    let mut stored = Vec::new();
    for chunk in data.chunks(250_000) {
        let mut e = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(chunk).unwrap();
        stored.extend(e.finish().unwrap());
    }
    (data, stored)
}

#[test]
fn fetch_writes_the_checked_binlogs_and_the_replay_script_or_names_the_damaged_file() {
    let (s, data, stored) = Scene::with_stored_binlog();
    let backup = s.archive().join("commerce/-").join(FIRST);
    let dest = s.dir.path().join("recovery");
    let dest_arg = dest.display().to_string();
    let fetch = |extra: &[&str]| {
        let mut args = vec!["--to-gtid", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-120"];
        args.extend_from_slice(&["--dest", &dest_arg, "--seen-as", "/vt/vtdataroot/pitr"]);
        args.extend_from_slice(extra);
        s.run("fetch", &args)
    };
    let (code, line, err) = fetch(&[]);
    assert_eq!(code, 0, "{err}");
    let binlog = format!("/vt/vtdataroot/pitr/{FIRST}/vt-0000000103-bin.000002");
    assert_eq!(line["files"], json!([binlog]));
    assert_eq!(line["bytes"], data.len());
    assert_eq!(line["script"], "/vt/vtdataroot/pitr/replay.sh");
    assert_eq!(line["plan"]["increments"], json!([FIRST]));
    let fetched = dest.join(FIRST).join("vt-0000000103-bin.000002");
    assert_eq!(std::fs::read(fetched).unwrap(), data);
    let script = std::fs::read_to_string(dest.join("replay.sh")).unwrap();
    assert!(
        script.contains(&format!("--include-gtids='{U}:1-120' '{binlog}' | mysql")),
        "{script}"
    );

    // One byte changed in the archive: named, exit 1.
    let mut bad = stored.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    std::fs::write(backup.join("0"), &bad).unwrap();
    std::fs::remove_dir_all(&dest).unwrap();
    let (code, _, err) = fetch(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "backup {FIRST}: file 0 (vt-0000000103-bin.000002) "
        )),
        "{err}"
    );
}

/// `run`'s own inputs are checked before anything is read or made: each bad one is named.
#[test]
fn run_names_each_bad_input_and_exits_2_before_reading_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "clusters: []\n").unwrap();
    let base = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_vtsnap-pitr"))
            .arg("run")
            .arg("--config")
            .arg(&config)
            .args([
                "--cluster",
                "example",
                "--keyspace",
                "commerce",
                "--shard",
                "-",
            ])
            .args(["--archive-root", "/vt/backups", "--restore-image", "r:1"])
            .args(["--pitr-image", "p:1"])
            .args(extra)
            .env_clear()
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let volume = r#"{"nfs":{"server":"nfs","path":"/b"}}"#;
    for (args, words) in [
        (
            vec![
                "--archive-volume",
                "[1]",
                "--to-time",
                "2026-12-01T10:15:00Z",
            ],
            "--archive-volume: not a JSON object",
        ),
        (
            vec![
                "--archive-volume",
                "{nfs",
                "--to-time",
                "2026-12-01T10:15:00Z",
            ],
            "--archive-volume: not JSON",
        ),
        (
            vec!["--archive-volume", volume, "--to-time", "soon"],
            "--to-time \"soon\": not an RFC 3339 time",
        ),
        (
            vec![
                "--archive-volume",
                volume,
                "--to-time",
                "2999-01-01T00:00:00Z",
            ],
            "after now",
        ),
        (
            vec!["--archive-volume", volume, "--to-gtid", "nope:1"],
            "--to-gtid \"nope:1\"",
        ),
        (
            vec![
                "--archive-volume",
                volume,
                "--to-time",
                "2026-12-01T10:15:00Z",
                "--after",
                "later",
            ],
            "--after",
        ),
        (vec!["--archive-volume", volume], "--to-time"),
        (
            vec![
                "--archive-volume",
                volume,
                "--to-time",
                "2026-12-01T10:15:00Z",
                "--mysqld-resources",
                r#"{"requests":{"cpu":[1]}}"#,
            ],
            "--mysqld-resources is not a container's resources",
        ),
        (
            vec![
                "--archive-volume",
                volume,
                "--to-time",
                "2026-12-01T10:15:00Z",
                "--image-pull-secret",
                "Bad/Name",
            ],
            "--image-pull-secret \"Bad/Name\" is not a Secret's name",
        ),
        (
            vec!["--to-time", "2026-12-01T10:15:00Z"],
            "--archive-root needs --archive-volume",
        ),
        (
            vec!["--archive-url", "s3://b/r", "--archive-volume", volume],
            "cannot be used with",
        ),
        (
            vec!["--archive-volume", volume, "--archive-secret", "s3-keys"],
            "--archive-url",
        ),
    ] {
        let (code, err) = base(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(words), "{args:?}: {err}");
    }
}

/// `fetch` (what the recovery Pod's fetch container runs) reads the same archive from an
/// object store (moto, a real S3 server) as from the folder: the same line, the same
/// binlog; a bad URL or secret is named before anything is read.
#[test]
fn fetch_reads_the_same_archive_from_an_object_store() {
    let (s, data, stored) = Scene::with_stored_binlog();
    let s3 = vtsnap_testkit::s3::S3Server::start();
    s3.create_bucket("vitess");
    // The folder's backups as Vitess's s3 storage names them, under the root `prod`.
    s3.mirror("vitess", "prod/commerce/-", &s.archive().join("commerce/-"));
    let fetch = |storage: &[&str], dest: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_vtsnap-pitr"))
            .args(["fetch", "--shard", SHARD])
            .args(storage)
            .arg("--objects")
            .arg(s.dir.path().join("snapshots.json"))
            .args([
                "--to-gtid",
                &format!("{U}:1-120"),
                "--seen-as",
                "/vt/vtdataroot/pitr",
            ])
            .arg("--dest")
            .arg(dest)
            .env_clear()
            .envs(s3.client_env())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        (
            out.status.code().unwrap(),
            serde_json::from_str::<Value>(stdout.trim()).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let root = s.archive().display().to_string();
    let from_folder = s.dir.path().join("from-folder");
    let from_store = s.dir.path().join("from-store");
    let (code, folder_line, err) = fetch(&["--archive-root", &root], &from_folder);
    assert_eq!(code, 0, "{err}");
    let (code, store_line, err) = fetch(&["--archive-url", "s3://vitess/prod"], &from_store);
    assert_eq!(code, 0, "{err}");
    assert_eq!(store_line, folder_line);
    let binlog = Path::new(FIRST).join("vt-0000000103-bin.000002");
    assert_eq!(std::fs::read(from_store.join(&binlog)).unwrap(), data);
    // Only the binlog and the script: the stored copy is gone.
    let mut left: Vec<String> = std::fs::read_dir(from_store.join(FIRST))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["vt-0000000103-bin.000002"]);

    // The object changed in the store: named as the folder's would be, exit 1.
    let mut bad = stored;
    bad[10] ^= 0xff;
    s3.put("vitess", &format!("prod/commerce/-/{FIRST}/0"), &bad);
    let (code, _, err) = fetch(
        &["--archive-url", "s3://vitess/prod"],
        &s.dir.path().join("bad"),
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "backup {FIRST}: file 0 (vt-0000000103-bin.000002) "
        )),
        "{err}"
    );

    for (storage, words) in [
        (
            vec!["--archive-url", "ftp://vitess/prod"],
            "--archive-url ftp://vitess/prod: scheme",
        ),
        (
            vec!["--archive-url", "s3://vitess/a/../b"],
            "not a path of names",
        ),
        (
            vec!["--archive-url", "s3://x", "--archive-root", "/b"],
            "cannot be used with",
        ),
        (vec![], "--archive-root"),
    ] {
        let (code, _, err) = fetch(&storage, &s.dir.path().join("never"));
        assert_eq!(code, 2, "{storage:?}: {err}");
        assert!(err.contains(words), "{storage:?}: {err}");
    }
}
