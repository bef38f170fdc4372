//! Crafted and broken volumes (issue "Hostile and broken inputs"): D is a cloned volume of
//! tablet 101 restored as tablet 202, OUT a directory next to it. Every refusal leaves D
//! byte-identical; nothing in OUT is ever touched; nothing hangs.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use vtsnap_core::fault::FAULT_ENV;
use vtsnap_testkit::layout::{POD_UID, TabletLayout};
use vtsnap_testkit::tree::{Tree, assert_same};

const OLD: u32 = 101;
const NEW: &str = "202";

struct Run {
    code: i32,
    json: Value,
    stderr: String,
}

/// Runs the restore on `v` as tablet 202, as `uid` if given; fails the test if it does
/// not end within 20 s (a FIFO must never hang it).
fn restore_as(v: &Path, uid: Option<u32>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vtsnap-restore"));
    cmd.arg("--vtdataroot")
        .arg(v)
        .arg("--tablet-uid")
        .arg(NEW)
        .env_remove(FAULT_ENV)
        .env("VTSNAP_LOG_FORMAT", "text")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(u) = uid {
        std::os::unix::process::CommandExt::uid(&mut cmd, u);
        std::os::unix::process::CommandExt::gid(&mut cmd, u);
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("vtsnap-restore hung for 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    Run {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap_or(Value::Null),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn restore(v: &Path) -> Run {
    restore_as(v, None)
}

/// D (`vtdataroot`) with tablet 101 laid out, and OUT beside it holding a victim file.
struct Scene {
    _tmp: tempfile::TempDir,
    v: PathBuf,
    out: PathBuf,
    t: PathBuf,
}

impl Scene {
    fn new(layout: TabletLayout) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let v = tmp.path().join("vtdataroot");
        let out = tmp.path().join("out");
        std::fs::create_dir(&v).unwrap();
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("victim"), "outside the volume\n").unwrap();
        std::fs::set_permissions(out.join("victim"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let t = layout.write(&v).unwrap();
        Self {
            _tmp: tmp,
            v,
            out,
            t,
        }
    }

    fn mariadb() -> Self {
        Self::new(TabletLayout::mariadb(OLD))
    }

    fn bin(&self, name: &str) -> PathBuf {
        self.t.join("bin-logs").join(name)
    }

    fn victim(&self) -> PathBuf {
        self.out.join("victim")
    }

    fn edit_mycnf(&self, f: impl FnOnce(String) -> String) {
        let p = self.t.join("my.cnf");
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, f(text)).unwrap();
    }

    /// Runs the restore and checks a refusal with `code` that changed nothing in D or OUT.
    fn assert_refused(&self, code: &str) -> Run {
        self.assert_refused_as(code, None)
    }

    fn assert_refused_as(&self, code: &str, uid: Option<u32>) -> Run {
        let (before, outside) = (Tree::capture(&self.v), Tree::capture(&self.out));
        let r = restore_as(&self.v, uid);
        assert_eq!(
            (r.code, r.json["error"]["code"].as_str()),
            (3, Some(code)),
            "expected refusal {code}: {}\n{}",
            r.json,
            r.stderr
        );
        assert_eq!(r.json["action"], "refused");
        assert_same(&before, &Tree::capture(&self.v), code);
        assert_same(&outside, &Tree::capture(&self.out), "OUT");
        r
    }

    /// Runs the restore and checks it finished without touching OUT.
    fn assert_moved(&self) -> Run {
        let outside = Tree::capture(&self.out);
        let r = restore(&self.v);
        assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
        assert_eq!(r.json["action"], "moved");
        assert_same(&outside, &Tree::capture(&self.out), "OUT");
        r
    }

    fn message(r: &Run) -> String {
        r.json["error"]["message"].as_str().unwrap_or("").to_owned()
    }
}

fn is_root() -> bool {
    std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0
}

// 1. Temp files are never followed out of the volume.

#[test]
fn a_symlinked_journal_temp_file_is_refused() {
    let s = Scene::mariadb();
    symlink(s.victim(), s.v.join("..vtsnap-restore.journal.vtsnap-tmp")).unwrap();
    s.assert_refused("symlink-leaves-volume");
}

#[test]
fn a_symlinked_index_temp_file_is_refused() {
    let s = Scene::mariadb();
    symlink(s.victim(), s.bin(".vt-0000000202-bin.index.vtsnap-tmp")).unwrap();
    s.assert_refused("symlink-leaves-volume");
}

// 2. A hand-made journal acts only inside the volume, on the names a move touches.

fn hand_made_journal(s: &Scene, step: Value) {
    let j = serde_json::json!({
        "version": 1,
        "plan": {
            "from": 101, "to": 202, "server_id": 4242, "old_server_id": null,
            "restore_in_progress": false,
            "steps": [step],
        }
    });
    std::fs::write(s.v.join(".vtsnap-restore.journal"), j.to_string()).unwrap();
}

#[test]
fn a_journal_removing_an_absolute_path_is_refused() {
    let s = Scene::mariadb();
    hand_made_journal(
        &s,
        serde_json::json!({"op": "remove-file", "path": s.victim(), "why": "server-uuid-of-source"}),
    );
    s.assert_refused("bad-journal");
    // The same with a file name the journal check would otherwise let through.
    std::fs::write(s.out.join("auto.cnf"), "x").unwrap();
    hand_made_journal(
        &s,
        serde_json::json!({"op": "remove-file", "path": s.out.join("auto.cnf"), "why": "server-uuid-of-source"}),
    );
    s.assert_refused("bad-journal");
}

#[test]
fn a_journal_renaming_from_above_the_volume_is_refused() {
    let s = Scene::mariadb();
    std::fs::write(s.out.join("vt-0000000101-bin.000001"), "x").unwrap();
    hand_made_journal(
        &s,
        serde_json::json!({
            "op": "rename-file",
            "from": "vt_0000000101/../../out/vt-0000000101-bin.000001",
            "to": "vt_0000000101/../../out/vt-0000000202-bin.000001",
        }),
    );
    s.assert_refused("bad-journal");
}

// 3. Symlinks below the first level.

#[test]
fn a_last_binlog_symlinked_out_of_the_volume_is_refused() {
    let s = Scene::new(TabletLayout::mariadb(OLD).crash_image());
    let last = s.bin("vt-0000000101-bin.000003");
    std::fs::copy(&last, s.victim()).unwrap();
    std::fs::remove_file(&last).unwrap();
    symlink(s.victim(), &last).unwrap();
    s.assert_refused("symlink-leaves-volume");
}

#[test]
fn a_binlog_symlinked_to_a_system_file_is_refused() {
    let s = Scene::mariadb();
    symlink("/etc/passwd", s.bin("vt-0000000101-bin.000004")).unwrap();
    let r = s.assert_refused("symlink-leaves-volume");
    assert!(
        Scene::message(&r).contains("vt-0000000101-bin.000004"),
        "{}",
        r.json
    );
}

// 5. Only relay logs are deleted as relay logs.

#[test]
fn a_relay_log_base_naming_a_table_is_refused() {
    let s = Scene::mariadb();
    s.edit_mycnf(|c| {
        c.replace(
            "relay-log = /vt/vtdataroot/vt_0000000101/relay-logs/vt-0000000101-relay-bin",
            "relay-log = /vt/vtdataroot/vt_0000000101/data/vt_commerce/t0",
        )
    });
    let r = s.assert_refused("bad-my-cnf");
    assert!(Scene::message(&r).contains("t0.ibd"), "{}", r.json);
}

#[test]
fn a_relay_log_base_naming_my_cnf_is_refused() {
    let s = Scene::mariadb();
    s.edit_mycnf(|c| {
        c.replace(
            "relay-log = /vt/vtdataroot/vt_0000000101/relay-logs/vt-0000000101-relay-bin",
            "relay-log = /vt/vtdataroot/vt_0000000101/my",
        )
    });
    let r = s.assert_refused("bad-my-cnf");
    assert!(Scene::message(&r).contains("my.cnf"), "{}", r.json);
}

#[test]
fn mysql_index_bookkeeping_beside_the_relay_logs_is_left_alone() {
    let s = Scene::mariadb();
    let kept =
        s.t.join("relay-logs/vt-0000000101-relay-bin.index_crash_safe");
    std::fs::write(&kept, "left by a crash mid index rewrite\n").unwrap();
    s.assert_moved();
    assert!(
        s.v.join("vt_0000000202/relay-logs/vt-0000000101-relay-bin.index_crash_safe")
            .is_file()
    );
}

// 6b. A resumed move is pre-flighted too: what was planted after the kill is refused.

impl Scene {
    /// Runs the restore until it is killed at fault point `point`, leaving its journal.
    fn kill_at(&self, point: &str) {
        let out = Command::new(env!("CARGO_BIN_EXE_vtsnap-restore"))
            .arg("--vtdataroot")
            .arg(&self.v)
            .args(["--tablet-uid", NEW])
            .env(FAULT_ENV, point)
            .env("VTSNAP_LOG_FORMAT", "text")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(vtsnap_core::fault::FAULT_EXIT_CODE),
            "{point} was never reached: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(self.v.join(".vtsnap-restore.journal").is_file());
    }
}

#[test]
fn a_binlog_swapped_for_a_symlink_before_a_resume_is_refused() {
    let s = Scene::mariadb();
    s.kill_at("restore.journal-written");
    let b = s.bin("vt-0000000101-bin.000001");
    std::fs::remove_file(&b).unwrap();
    symlink(s.victim(), &b).unwrap();
    s.assert_refused("symlink-leaves-volume");
}

#[test]
fn a_temp_symlink_planted_in_the_moved_directory_before_a_resume_is_refused() {
    let s = Scene::mariadb();
    // Step 0 renames the tablet directory; the kill leaves the rest to do.
    s.kill_at("restore.step-0");
    let moved = s.v.join("vt_0000000202");
    assert!(moved.is_dir());
    symlink(s.victim(), moved.join(".my.cnf.vtsnap-tmp")).unwrap();
    s.assert_refused("symlink-leaves-volume");
}

#[test]
fn a_rename_target_planted_before_a_resume_is_refused() {
    let s = Scene::mariadb();
    s.kill_at("restore.step-0");
    let planted = s.v.join("vt_0000000202/bin-logs/vt-0000000202-bin.000001");
    std::fs::write(&planted, "someone else's binlog").unwrap();
    s.assert_refused("target-exists");
    // Once the intruder is gone, the resumed move finishes.
    std::fs::remove_file(&planted).unwrap();
    let r = s.assert_moved();
    assert_eq!(r.json["resumed"], true, "{}", r.json);
}

// 6. Conflicts found before the first change.

#[test]
fn a_binlog_name_that_is_not_utf8_is_refused() {
    let s = Scene::mariadb();
    let name = OsStr::from_bytes(b"vt-0000000101-bin.00000\xff");
    std::fs::write(s.t.join("bin-logs").join(name), "x").unwrap();
    s.assert_refused("bad-file-name");
}

#[test]
fn a_rename_target_that_exists_is_refused() {
    let s = Scene::mariadb();
    std::fs::write(s.bin("vt-0000000202-bin.000002"), "someone else's binlog").unwrap();
    let r = s.assert_refused("target-exists");
    assert!(
        Scene::message(&r).contains("vt-0000000202-bin.000002"),
        "{}",
        r.json
    );
}

#[test]
fn a_directory_where_a_relay_log_is_expected_is_refused() {
    let s = Scene::mariadb();
    std::fs::create_dir(s.t.join("relay-logs/vt-0000000101-relay-bin.000003")).unwrap();
    s.assert_refused("wrong-file-type");
}

#[test]
fn a_bin_logs_directory_the_pod_cannot_write_is_refused() {
    let s = Scene::mariadb();
    let bin = s.t.join("bin-logs");
    if is_root() {
        // The volume belongs to the pod user; bin-logs alone to root.
        std::os::unix::fs::chown(&s.v, Some(POD_UID), Some(POD_UID)).unwrap();
        std::os::unix::fs::chown(&bin, Some(0), Some(0)).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        s.assert_refused_as("not-writable", Some(POD_UID));
    } else {
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o555)).unwrap();
        s.assert_refused("not-writable");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

// 7. FIFOs never hang the restore.

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success());
}

#[test]
fn a_fifo_my_cnf_is_refused_without_hanging() {
    let s = Scene::mariadb();
    std::fs::remove_file(s.t.join("my.cnf")).unwrap();
    mkfifo(&s.t.join("my.cnf"));
    s.assert_refused("wrong-file-type");
}

#[test]
fn a_fifo_journal_is_refused_without_hanging() {
    let s = Scene::mariadb();
    mkfifo(&s.v.join(".vtsnap-restore.journal"));
    s.assert_refused("wrong-file-type");
}

// 11. Bounded input.

#[test]
fn a_huge_my_cnf_is_refused_unread() {
    let s = Scene::mariadb();
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(s.t.join("my.cnf"))
        .unwrap();
    f.set_len(64 << 20).unwrap();
    let r = s.assert_refused("bad-my-cnf");
    assert!(Scene::message(&r).contains("too large"), "{}", r.json);
}

#[test]
fn an_oversized_checkpoint_event_is_refused_unread() {
    let s = Scene::new(TabletLayout::mariadb(OLD).crash_image());
    let last = s.bin("vt-0000000101-bin.000003");
    let mut bytes = std::fs::read(&last).unwrap();
    let size: u32 = 64 << 20;
    let mut h = vtsnap_testkit::binlog::event(161, 0, &[0; 8], true);
    h[9..13].copy_from_slice(&size.to_le_bytes());
    h.truncate(19);
    bytes.extend(&h);
    let len = bytes.len() as u64 + u64::from(size);
    std::fs::write(&last, &bytes).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len)
        .unwrap();
    s.assert_refused("bad-binlog");
}

// 12. Clear messages.

#[test]
fn old_and_new_present_names_both_padded_directories() {
    let s = Scene::mariadb();
    TabletLayout::mariadb(202).write(&s.v).unwrap();
    let r = s.assert_refused("old-and-new-present");
    let m = Scene::message(&r);
    assert!(
        m.contains("vt_0000000101") && m.contains("vt_0000000202"),
        "{m}"
    );
}

#[test]
fn a_symlink_loop_is_called_a_loop() {
    let s = Scene::mariadb();
    symlink("/vt/vtdataroot/loop", s.v.join("loop")).unwrap();
    std::fs::remove_dir_all(s.t.join("tmp")).unwrap();
    symlink("/vt/vtdataroot/loop", s.t.join("tmp")).unwrap();
    let r = s.assert_refused("symlink-loop");
    assert!(
        !Scene::message(&r).contains("leaves the volume"),
        "{}",
        r.json
    );
}

#[test]
fn a_server_id_too_large_is_called_out_of_range() {
    let s = Scene::mariadb();
    s.edit_mycnf(|c| c.replace("server-id = 1000101", "server-id = 99999999999"));
    let r = s.assert_refused("bad-my-cnf");
    let m = Scene::message(&r);
    assert!(
        m.contains("out of range") && !m.contains("not a number"),
        "{m}"
    );
}

// Boundaries and checks that only a crafted volume reaches (each one a mutant that
// survived the first full mutation run of observe.rs).

#[test]
fn a_my_cnf_of_exactly_the_size_cap_is_read() {
    let s = Scene::mariadb();
    s.edit_mycnf(|c| {
        let mut c = c;
        let cap = vtsnap_core::mycnf::MAX_LEN;
        while c.len() + 80 < cap {
            c.push_str(&format!("# {}\n", "x".repeat(76)));
        }
        let room = cap - c.len();
        c.push('#');
        c.push_str(&" ".repeat(room - 2));
        c.push('\n');
        assert_eq!(c.len(), cap);
        c
    });
    s.assert_moved();
}

#[test]
fn a_relative_datadir_is_refused() {
    let s = Scene::mariadb();
    s.edit_mycnf(|c| {
        c.replace(
            "datadir = /vt/vtdataroot/vt_0000000101/data",
            "datadir = vt/vtdataroot/vt_0000000101/data",
        )
    });
    let r = s.assert_refused("bad-my-cnf");
    assert!(Scene::message(&r).contains("datadir"), "{}", r.json);
}

#[test]
fn a_top_level_directory_no_tablet_links_to_is_refused() {
    let s = Scene::new(TabletLayout::mariadb(OLD).symlinked_top_dirs());
    std::fs::create_dir(s.v.join("data/vt_0000000999")).unwrap();
    let r = s.assert_refused("unlinked-top-dir");
    assert!(
        Scene::message(&r).contains("data/vt_0000000999"),
        "{}",
        r.json
    );
}

#[test]
fn a_new_tablets_top_level_directory_is_refused_as_both_present() {
    let s = Scene::new(TabletLayout::mariadb(OLD).symlinked_top_dirs());
    std::fs::create_dir(s.v.join("bin-logs/vt_0000000202")).unwrap();
    s.assert_refused("old-and-new-present");
}

#[test]
fn other_entries_beside_the_top_level_directories_are_left_alone() {
    let s = Scene::new(TabletLayout::mariadb(OLD).symlinked_top_dirs());
    // Not `vt_*` inside a top directory, and a file (not a directory) named like one.
    std::fs::create_dir(s.v.join("data/lost+found")).unwrap();
    let s2 = Scene::mariadb();
    std::fs::write(s2.v.join("relay-logs"), "a file, not the top directory").unwrap();
    s.assert_moved();
    assert!(s.v.join("data/lost+found").is_dir());
    s2.assert_moved();
    assert!(s2.v.join("relay-logs").is_file());
}

#[test]
fn log_bin_and_relay_log_naming_the_same_files_is_refused() {
    // MySQL's binlogs have no `.state` file, so the relay-log base check alone passes.
    let s = Scene::new(TabletLayout::mysql80(OLD));
    s.edit_mycnf(|c| {
        c.replace(
            "relay-log = /vt/vtdataroot/vt_0000000101/relay-logs/vt-0000000101-relay-bin",
            "relay-log = /vt/vtdataroot/vt_0000000101/bin-logs/vt-0000000101-bin",
        )
        .replace(
            "relay-log-index = /vt/vtdataroot/vt_0000000101/relay-logs/vt-0000000101-relay-bin.index",
            "relay-log-index = /vt/vtdataroot/vt_0000000101/relay-logs/other-relay-bin.index",
        )
    });
    let r = s.assert_refused("bad-my-cnf");
    assert!(Scene::message(&r).contains("both name"), "{}", r.json);
}

#[test]
fn no_file_is_planned_twice() {
    for layout in [
        TabletLayout::mariadb(OLD),
        TabletLayout::mysql80(OLD),
        TabletLayout::mariadb(OLD).symlinked_top_dirs(),
    ] {
        let s = Scene::new(layout);
        let out = Command::new(env!("CARGO_BIN_EXE_vtsnap-restore"))
            .arg("--vtdataroot")
            .arg(&s.v)
            .args(["--tablet-uid", NEW, "--dry-run"])
            .env_remove(FAULT_ENV)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let json: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        let paths: Vec<String> = json["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|st| st["op"] == "remove-file")
            .map(|st| st["path"].as_str().unwrap().to_owned())
            .collect();
        let unique: std::collections::BTreeSet<_> = paths.iter().collect();
        assert_eq!(
            unique.len(),
            paths.len(),
            "a removal planned twice: {paths:?}"
        );
        assert!(!paths.is_empty());
    }
}

#[test]
fn relay_log_bookkeeping_must_be_named_as_such() {
    for (key, value) in [
        ("relay-log-info-file", "relay-log.txt"),
        ("relay-log-info-file", ".info"),
        ("relay-log-index", ".index"),
        ("relay-log-index", "relay.idx"),
    ] {
        let s = Scene::mariadb();
        s.edit_mycnf(|c| {
            c.lines()
                .map(|l| {
                    if l.starts_with(&format!("{key} =")) {
                        format!("{key} = /vt/vtdataroot/vt_0000000101/relay-logs/{value}")
                    } else {
                        l.to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n"
        });
        let r = s.assert_refused("bad-my-cnf");
        assert!(
            Scene::message(&r).contains("does not end in"),
            "{key} = {value}: {}",
            r.json
        );
    }
}

#[test]
fn an_empty_relay_log_info_file_means_the_default_in_the_datadir() {
    let s = Scene::mariadb();
    s.edit_mycnf(|c| {
        c.lines()
            .map(|l| {
                if l.starts_with("relay-log-info-file =") {
                    "relay-log-info-file =".to_owned()
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    });
    std::fs::write(s.t.join("data/relay-log.info"), "5\nstale\n").unwrap();
    s.assert_moved();
    assert!(!s.v.join("vt_0000000202/data/relay-log.info").exists());
}

#[test]
fn a_binlog_named_as_relay_log_bookkeeping_is_refused() {
    let s = Scene::mariadb();
    s.edit_mycnf(|c| {
        c.replace(
            "relay-log-index = /vt/vtdataroot/vt_0000000101/relay-logs/vt-0000000101-relay-bin.index",
            "relay-log-index = /vt/vtdataroot/vt_0000000101/bin-logs/vt-0000000101-bin.index",
        )
    });
    let r = s.assert_refused("bad-my-cnf");
    assert!(
        Scene::message(&r).contains("both a binlog file and relay-log bookkeeping"),
        "{}",
        r.json
    );
}

#[test]
fn a_relay_index_outside_the_relay_log_directory_is_removed_under_its_own_name() {
    let s = Scene::mariadb();
    let old_name = "vt-0000000101-relay-bin.index";
    s.edit_mycnf(|c| {
        c.replace(
            &format!("relay-log-index = /vt/vtdataroot/vt_0000000101/relay-logs/{old_name}"),
            &format!("relay-log-index = /vt/vtdataroot/vt_0000000101/data/{old_name}"),
        )
    });
    std::fs::write(s.t.join("data").join(old_name), "stale\n").unwrap();
    s.assert_moved();
    let data = s.v.join("vt_0000000202/data");
    assert!(
        !data.join(old_name).exists(),
        "the stale relay index was left"
    );
    assert!(!data.join("vt-0000000202-relay-bin.index").exists());
}

#[test]
fn relay_log_bookkeeping_beside_the_binlogs_is_removed_and_the_binlogs_kept() {
    let s = Scene::mariadb();
    s.edit_mycnf(|c| {
        c.replace(
            "relay-log-info-file = /vt/vtdataroot/vt_0000000101/relay-logs/relay-log.info",
            "relay-log-info-file = /vt/vtdataroot/vt_0000000101/bin-logs/relay-log.info",
        )
    });
    std::fs::rename(
        s.t.join("relay-logs/relay-log.info"),
        s.bin("relay-log.info"),
    )
    .unwrap();
    s.assert_moved();
    let bin = s.v.join("vt_0000000202/bin-logs");
    assert!(!bin.join("relay-log.info").exists());
    assert!(bin.join("vt-0000000202-bin.000001").is_file());
}
