//! The `vtsnap-restore` binary on synthetic Vitess tablet volumes (no database needed):
//! no-ops, refusals, full moves, dry-run, usage errors, and a kill at every fault point.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use vtsnap_core::fault::{FAULT_ENV, FAULT_EXIT_CODE};
use vtsnap_core::naming::TabletUid;
use vtsnap_restore::mycnf::{MyCnf, mentions_uid};
mod common;

use common::names_left;
use vtsnap_testkit::layout::{POD_UID, TabletLayout, resolve};
use vtsnap_testkit::tree::{Tree, assert_same};

const OLD: u32 = 101;
const NEW: u32 = 2_548_885_007;

struct Run {
    code: i32,
    json: Value,
    stderr: String,
}

fn restore(vtdataroot: &Path, uid: &str, args: &[&str], fault: Option<&str>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vtsnap-restore"));
    cmd.arg("--vtdataroot")
        .arg(vtdataroot)
        .arg("--tablet-uid")
        .arg(uid)
        .args(args);
    cmd.env_remove(FAULT_ENV).env("VTSNAP_LOG_FORMAT", "text");
    if let Some(f) = fault {
        cmd.env(FAULT_ENV, f);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("null");
    Run {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_str(last).unwrap_or(Value::Null),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn volume() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let v = d.path().join("vtdataroot");
    std::fs::create_dir(&v).unwrap();
    (d, v)
}

#[test]
fn an_empty_volume_is_left_byte_identical() {
    let (_d, v) = volume();
    std::fs::create_dir(v.join("lost+found")).unwrap();
    let before = Tree::capture(&v);
    let r = restore(&v, "102", &[], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json["action"], "empty");
    assert_same(&before, &Tree::capture(&v), "empty volume");
}

#[test]
fn a_volume_of_the_same_tablet_is_left_byte_identical() {
    let (_d, v) = volume();
    TabletLayout::mariadb(OLD)
        .crash_image()
        .restore_in_progress()
        .write(&v)
        .unwrap();
    let before = Tree::capture(&v);
    for uid in ["101", "0000000101"] {
        let r = restore(&v, uid, &[], None);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.json["action"], "none");
        assert_eq!(r.json["restore_in_progress"], true);
    }
    assert_same(&before, &Tree::capture(&v), "same-UID volume");
}

/// Lays out a refused volume, runs the restore, and checks it exits 3 changing nothing.
fn assert_refused(v: &Path, code: &str) {
    let before = Tree::capture(v);
    let r = restore(v, &NEW.to_string(), &[], None);
    assert_eq!(
        r.code, 3,
        "expected a refusal ({code}); stderr:\n{}",
        r.stderr
    );
    assert_eq!(r.json["action"], "refused");
    assert_eq!(r.json["error"]["code"], code, "{}", r.json);
    assert!(!r.json["error"]["message"].as_str().unwrap_or("").is_empty());
    assert_same(&before, &Tree::capture(v), code);
}

#[test]
fn several_tablet_directories_are_refused() {
    let (_d, v) = volume();
    TabletLayout::mariadb(OLD).write(&v).unwrap();
    TabletLayout::mariadb(103).write(&v).unwrap();
    assert_refused(&v, "several-tablets");
}

#[test]
fn old_and_new_tablet_directories_together_are_refused() {
    let (_d, v) = volume();
    TabletLayout::mariadb(OLD).write(&v).unwrap();
    TabletLayout::mariadb(NEW).write(&v).unwrap();
    assert_refused(&v, "old-and-new-present");
}

#[test]
fn symlinks_that_leave_the_volume_are_refused() {
    for (target, what) in [
        ("/var/lib/mysql", "absolute"),
        ("../../../../etc", "relative"),
    ] {
        let (_d, v) = volume();
        let t = TabletLayout::mariadb(OLD).write(&v).unwrap();
        std::fs::rename(t.join("bin-logs"), v.join("elsewhere")).unwrap();
        symlink(target, t.join("bin-logs")).unwrap();
        eprintln!("case: {what}");
        assert_refused(&v, "symlink-leaves-volume");
    }
}

#[test]
fn a_data_directory_outside_the_volume_is_refused() {
    let (_d, v) = volume();
    let t = TabletLayout::mariadb(OLD).write(&v).unwrap();
    let cnf = std::fs::read_to_string(t.join("my.cnf")).unwrap();
    let cnf = cnf.replace(
        "innodb_log_group_home_dir = /vt/vtdataroot/vt_0000000101/innodb/logs",
        "innodb_log_group_home_dir = /mnt/redo/vt_0000000101",
    );
    std::fs::write(t.join("my.cnf"), cnf).unwrap();
    assert_refused(&v, "off-volume");
}

#[test]
fn an_unparsable_or_missing_my_cnf_is_refused() {
    let (_d, v) = volume();
    let t = TabletLayout::mariadb(OLD).write(&v).unwrap();
    std::fs::write(
        t.join("my.cnf"),
        "[mysqld\ndatadir=/vt/vtdataroot/vt_0000000101/data\n",
    )
    .unwrap();
    assert_refused(&v, "bad-my-cnf");
    std::fs::remove_file(t.join("my.cnf")).unwrap();
    assert_refused(&v, "unreadable");
}

#[test]
fn a_strange_tablet_directory_name_is_refused() {
    let (_d, v) = volume();
    TabletLayout::mariadb(OLD).write(&v).unwrap();
    std::fs::create_dir(v.join("vt_12")).unwrap();
    assert_refused(&v, "strange-tablet-dir");
}

#[test]
fn a_journal_for_another_tablet_is_refused() {
    let (_d, v) = volume();
    TabletLayout::mariadb(OLD).write(&v).unwrap();
    let r = restore(&v, "103", &[], Some("restore.journal-written"));
    assert_eq!(r.code, FAULT_EXIT_CODE, "{}", r.stderr);
    assert_refused(&v, "journal-for-other-tablet");
}

#[test]
fn usage_errors_exit_2_and_change_nothing() {
    let (_d, v) = volume();
    TabletLayout::mariadb(OLD).write(&v).unwrap();
    let before = Tree::capture(&v);
    assert_eq!(restore(&v, "abc", &[], None).code, 2);
    assert_eq!(restore(&v, "4294967296", &[], None).code, 2);
    assert_eq!(restore(&v.join("missing"), "102", &[], None).code, 2);
    assert_eq!(restore(&v, "102", &["--server-id", "99"], None).code, 2);
    let same = restore(&v, "102", &["--server-id", "1000101"], None);
    assert_eq!(
        same.code, 2,
        "the source's own server-id must be refused: {}",
        same.json
    );
    assert_same(&before, &Tree::capture(&v), "usage errors");
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let (_d, v) = volume();
    TabletLayout::mariadb(OLD).crash_image().write(&v).unwrap();
    let before = Tree::capture(&v);
    let r = restore(&v, &NEW.to_string(), &["--dry-run"], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json["action"], "moved");
    assert_eq!(r.json["dry_run"], true);
    let steps = r.json["steps"].as_array().unwrap();
    assert!(steps.iter().all(|s| s["result"] == "planned"));
    assert!(steps.iter().any(|s| s["op"] == "patch-binlog-checkpoints"));
    assert_same(&before, &Tree::capture(&v), "dry run");
}

/// Checks a finished move from OLD to NEW against what §5.5 asks.
fn assert_moved(v: &Path, layout: &TabletLayout, r: &Run) {
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    assert_eq!(r.json["action"], "moved");
    assert_eq!(r.json["from_uid"], OLD);
    assert_eq!(r.json["to_uid"], NEW);
    let old = TabletUid::new(OLD);
    let new = TabletUid::new(NEW);
    let t = v.join(new.tablet_dir_name());
    let at = |sub: &str| resolve(v, &t.join(sub));
    assert!(!v.join(old.tablet_dir_name()).exists());
    assert!(
        !v.join(".vtsnap-restore.journal").exists(),
        "journal left behind"
    );

    // Nothing on the volume is named after the old tablet any more.
    let left = names_left(v, old);
    assert!(left.is_empty(), "names of the old tablet remain: {left:?}");

    // my.cnf: every path names the new tablet, a fresh server-id, socket and port kept.
    let text = std::fs::read_to_string(t.join("my.cnf")).unwrap();
    assert!(
        !mentions_uid(&text, old),
        "my.cnf still names the old tablet:\n{text}"
    );
    let cnf = MyCnf::parse(&text).unwrap();
    let sid = cnf.server_id().unwrap();
    assert_eq!(r.json["server_id"], sid);
    assert_ne!(sid, layout.server_id);
    assert!((100..1 << 31).contains(&sid));
    assert_eq!(cnf.get("socket"), Some("/vt/socket/mysql.sock"));
    assert_eq!(cnf.get("port"), Some("3306"));
    assert_eq!(
        cnf.get("datadir"),
        Some("/vt/vtdataroot/vt_2548885007/data")
    );
    assert_eq!(
        std::fs::metadata(t.join("my.cnf")).unwrap().mode() & 0o777,
        0o644
    );

    // Binlogs renamed, same bytes count, index lists the new names.
    let bin = at("bin-logs");
    let index = std::fs::read_to_string(bin.join("vt-2548885007-bin.index")).unwrap();
    let want: String = (1..=layout.binlogs)
        .map(|n| format!("/vt/vtdataroot/vt_2548885007/bin-logs/vt-2548885007-bin.{n:06}\n"))
        .collect();
    assert_eq!(index, want);
    for n in 1..=layout.binlogs {
        assert!(bin.join(format!("vt-2548885007-bin.{n:06}")).is_file());
    }

    // Relay logs and their bookkeeping are gone; master.info stays.
    let relay = at("relay-logs");
    assert_eq!(
        std::fs::read_dir(&relay).unwrap().count(),
        0,
        "relay logs left"
    );
    assert!(t.join("master.info").is_file());
    assert!(!at("data/auto.cnf").exists());
    assert_eq!(
        t.join("restore_in_progress").exists(),
        layout.restore_in_progress
    );
    assert_eq!(r.json["restore_in_progress"], layout.restore_in_progress);

    // Data files are untouched and still owned by the pod user.
    for i in 0..layout.data_files {
        let m = std::fs::metadata(at(&format!("data/vt_commerce/t{i}.ibd"))).unwrap();
        assert_eq!(m.len(), layout.data_file_bytes);
    }
    if nix_root() {
        assert_eq!(std::fs::metadata(t.join("my.cnf")).unwrap().uid(), POD_UID);
        assert_eq!(
            std::fs::metadata(bin.join("vt-2548885007-bin.index"))
                .unwrap()
                .uid(),
            POD_UID
        );
    }
}

fn nix_root() -> bool {
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

#[test]
fn moves_a_mariadb_volume() {
    let (_d, v) = volume();
    let layout = TabletLayout::mariadb(OLD);
    layout.write(&v).unwrap();
    let r = restore(&v, &NEW.to_string(), &[], None);
    assert_moved(&v, &layout, &r);
    assert!(
        v.join("vt_2548885007/bin-logs/vt-2548885007-bin.state")
            .is_file()
    );
    // The source's own server-id is never reused.
    assert_ne!(r.json["server_id"], r.json["old_server_id"]);
    assert_eq!(r.json["old_server_id"], layout.server_id);
}

#[test]
fn moves_a_mysql80_volume_and_removes_auto_cnf() {
    let (_d, v) = volume();
    let layout = TabletLayout::mysql80(OLD).restore_in_progress();
    let t = layout.write(&v).unwrap();
    assert!(t.join("data/auto.cnf").is_file());
    let r = restore(&v, "2548885007", &[], None);
    assert_moved(&v, &layout, &r);
    let ops: Vec<&str> = r.json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["why"].as_str())
        .collect();
    assert!(ops.contains(&"server-uuid-of-source"), "{ops:?}");
}

#[test]
fn moves_vitess_symlinked_top_level_directories() {
    let (_d, v) = volume();
    let layout = TabletLayout::mariadb(OLD).symlinked_top_dirs();
    layout.write(&v).unwrap();
    let r = restore(&v, &NEW.to_string(), &[], None);
    assert_moved(&v, &layout, &r);
    for top in ["data", "innodb", "relay-logs", "bin-logs"] {
        let link = std::fs::read_link(v.join("vt_2548885007").join(top)).unwrap();
        assert_eq!(
            link,
            PathBuf::from(format!("/vt/vtdataroot/{top}/vt_2548885007"))
        );
        assert!(v.join(top).join("vt_2548885007").is_dir());
        assert!(!v.join(top).join("vt_0000000101").exists());
    }
}

#[test]
fn patches_the_checkpoints_of_a_crash_image() {
    let (_d, v) = volume();
    let layout = TabletLayout::mariadb(OLD).crash_image();
    layout.write(&v).unwrap();
    let r = restore(&v, &NEW.to_string(), &[], None);
    assert_moved(&v, &layout, &r);
    let last = std::fs::read(v.join("vt_2548885007/bin-logs/vt-2548885007-bin.000003")).unwrap();
    let want = vtsnap_testkit::binlog::file(
        true,
        &["vt-2548885007-bin.000002", "vt-2548885007-bin.000003"],
    );
    assert_eq!(
        last, want,
        "checkpoint names and CRCs must be those of the new tablet"
    );
}

/// A kill right after any step, then a rerun, ends exactly where one clean run ends.
#[test]
fn a_kill_at_any_fault_point_is_finished_by_the_next_run() {
    for layout in [
        TabletLayout::mariadb(OLD)
            .crash_image()
            .symlinked_top_dirs(),
        TabletLayout::mysql80(OLD),
    ] {
        let (_d, clean) = volume();
        layout.write(&clean).unwrap();
        let r = restore(&clean, &NEW.to_string(), &["--server-id", "4242"], None);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let steps = r.json["steps"].as_array().unwrap().len();
        assert!(steps >= 8, "too few steps to be a real move: {steps}");
        let want = Tree::capture(&clean);

        let points = std::iter::once("restore.journal-written".to_owned())
            .chain((0..steps).map(|i| format!("restore.step-{i}")))
            .chain(std::iter::once("restore.synced".to_owned()));
        for point in points {
            let (_d, v) = volume();
            layout.write(&v).unwrap();
            let killed = restore(&v, &NEW.to_string(), &["--server-id", "4242"], Some(&point));
            assert_eq!(
                killed.code, FAULT_EXIT_CODE,
                "{point} was never reached: {}",
                killed.stderr
            );
            assert!(
                v.join(".vtsnap-restore.journal").is_file(),
                "{point}: no journal after a kill"
            );

            // The rerun must not need the same flags: the journal carries the plan.
            let rerun = restore(&v, &NEW.to_string(), &[], None);
            assert_eq!(
                rerun.code, 0,
                "{point}: rerun failed: {}\n{}",
                rerun.json, rerun.stderr
            );
            assert_eq!(rerun.json["resumed"], true);
            assert_eq!(rerun.json["server_id"], 4242);
            assert_same(&want, &Tree::capture(&v), &point);
        }
    }
}
