//! The node helper's actions on real kernel features (needs root): cgroup v1 and v2
//! freezers on live processes, FIFREEZE on a loop-mounted file system, the debug `hold` and
//! `fsfreeze` commands, and layout-probe refusals.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use vtsnap_core::naming::TabletUid;
use vtsnap_node::cgroup::{Cgroup, Roots, Version};
use vtsnap_node::fsfreeze::{self, FsFreezeError};
use vtsnap_node::probe::{self, ProbeError};
use vtsnap_testkit::btrfs::BtrfsVolume;
use vtsnap_testkit::layout::TabletLayout;

/// A child process that counts as fast as it can into a file, in a cgroup of its own.
struct Ticker {
    child: Child,
    counter: PathBuf,
    cgroups: Vec<PathBuf>,
    _dir: tempfile::TempDir,
}

impl Ticker {
    /// Starts the ticker in fresh cgroups under each of `hierarchies`.
    fn start(hierarchies: &[PathBuf]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let counter = dir.path().join("count");
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                // Builtins only: a loop that forks (an `mv` per tick) sometimes leaves the
                // v1 freezer stuck in FREEZING on a fresh child, which is not what is tested.
                "i=0; while :; do i=$((i+1)); echo $i > {}; done",
                counter.display()
            ))
            .spawn()
            .unwrap();
        let name = format!("vtsnap-test-{}-{}", std::process::id(), child.id());
        let mut cgroups = Vec::new();
        for h in hierarchies {
            let cg = h.join(&name);
            std::fs::create_dir_all(&cg).unwrap();
            std::fs::write(cg.join("cgroup.procs"), child.id().to_string()).unwrap();
            cgroups.push(cg);
        }
        let t = Self {
            child,
            counter,
            cgroups,
            _dir: dir,
        };
        t.wait_progress();
        t
    }

    fn count(&self) -> u64 {
        std::fs::read_to_string(&self.counter)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Waits (bounded) until the counter moves.
    fn wait_progress(&self) {
        let before = self.count();
        let start = Instant::now();
        while self.count() == before {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the ticker made no progress"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The counter must not move for a while: a frozen process makes no progress.
    fn assert_no_progress(&self) {
        let before = self.count();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(self.count(), before, "a frozen process made progress");
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        for cg in &self.cgroups {
            let _ = std::fs::write(cg.join("freezer.state"), "THAWED");
            let _ = std::fs::write(cg.join("cgroup.freeze"), "0");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        for cg in &self.cgroups {
            let _ = std::fs::remove_dir(cg);
        }
    }
}

fn v2_root() -> PathBuf {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").is_file() {
        root.to_path_buf()
    } else {
        root.join("unified")
    }
}

#[test]
fn cgroup_v1_freezer_stops_and_resumes_a_real_process() {
    let v1 = PathBuf::from("/sys/fs/cgroup/freezer");
    assert!(v1.is_dir(), "this host has no v1 freezer hierarchy");
    let t = Ticker::start(&[v1]);
    let cg = Cgroup::of_pid(&Roots::default(), t.child.id()).unwrap();
    assert_eq!(cg.version, Version::V1);
    cg.freeze().unwrap();
    assert!(cg.is_frozen().unwrap());
    t.assert_no_progress();
    cg.thaw().unwrap();
    t.wait_progress();
    cg.thaw().unwrap();
}

#[test]
fn cgroup_v2_freeze_stops_and_resumes_a_real_process() {
    let v2 = v2_root();
    assert!(
        v2.join("cgroup.controllers").is_file(),
        "this host has no cgroup v2 hierarchy"
    );
    let t = Ticker::start(std::slice::from_ref(&v2));
    // Point the roots at the v2 hierarchy alone, so the v2 interface is the one used.
    let roots = Roots {
        cgroup: v2.clone(),
        ..Roots::default()
    };
    let cg = Cgroup::of_pid(&roots, t.child.id()).unwrap();
    assert_eq!(cg.version, Version::V2);
    cg.freeze().unwrap();
    t.assert_no_progress();
    cg.thaw().unwrap();
    t.wait_progress();
}

/// Freezes and thaws twice through one kept [`Control`], reading the state back through the
/// same descriptors: what the watchdog relies on when no new descriptor can be opened.
fn kept_control_freezes_and_thaws_repeatedly(cg: &Cgroup, t: &Ticker) {
    let ctl = cg.open().unwrap();
    for _ in 0..2 {
        ctl.freeze().unwrap();
        assert!(ctl.is_frozen().unwrap());
        t.assert_no_progress();
        ctl.thaw().unwrap();
        assert!(!ctl.is_frozen().unwrap());
        t.wait_progress();
    }
}

#[test]
fn a_kept_v1_control_reads_fresh_state_through_its_own_descriptor() {
    let t = Ticker::start(&[PathBuf::from("/sys/fs/cgroup/freezer")]);
    let cg = Cgroup::of_pid(&Roots::default(), t.child.id()).unwrap();
    assert_eq!(cg.version, Version::V1);
    kept_control_freezes_and_thaws_repeatedly(&cg, &t);
}

#[test]
fn a_kept_v2_control_reads_fresh_state_through_its_own_descriptor() {
    let v2 = v2_root();
    let t = Ticker::start(std::slice::from_ref(&v2));
    let roots = Roots {
        cgroup: v2,
        ..Roots::default()
    };
    let cg = Cgroup::of_pid(&roots, t.child.id()).unwrap();
    assert_eq!(cg.version, Version::V2);
    kept_control_freezes_and_thaws_repeatedly(&cg, &t);
}

/// FIFREEZE and FITHAW through one kept descriptor; FITHAW reports whether it was frozen.
#[test]
fn a_kept_mount_freezes_and_thaws_through_its_own_descriptor() {
    let vol = BtrfsVolume::create(1 << 30);
    let _guard = ThawGuard(vol.path());
    let m = fsfreeze::open(vol.path(), Path::new("/")).unwrap();
    m.freeze().unwrap();
    let done = write_in_background(vol.path());
    assert!(done.recv_timeout(Duration::from_millis(500)).is_err());
    assert!(
        m.thaw().unwrap(),
        "FITHAW must say the file system was frozen"
    );
    done.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(!m.thaw().unwrap(), "a second FITHAW finds nothing frozen");
}

fn node_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vtsnap-node"))
}

fn first_line(child: &mut Child) -> String {
    let out = child.stdout.take().unwrap();
    let mut r = BufReader::new(out);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    child.stdout = Some(r.into_inner());
    line
}

fn wait_exit(child: &mut Child, limit: Duration) -> (i32, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut rest = String::new();
            std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut rest).unwrap();
            return (status.code().unwrap_or(-1), rest);
        }
        assert!(start.elapsed() < limit, "the hold did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn hold(pid: u32, max_hold: &str) -> Child {
    node_bin()
        .args([
            "hold",
            "--pid",
            &pid.to_string(),
            "--max-hold",
            max_hold,
            "--log-format",
            "json",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn debug_hold_releases_when_stdin_closes() {
    let t = Ticker::start(&[PathBuf::from("/sys/fs/cgroup/freezer")]);
    let mut h = hold(t.child.id(), "5m");
    assert!(first_line(&mut h).contains("\"held\""));
    t.assert_no_progress();
    drop(h.stdin.take());
    let (code, out) = wait_exit(&mut h, Duration::from_secs(20));
    assert_eq!(code, 0);
    assert!(out.contains("stdin-closed"), "{out}");
    t.wait_progress();
}

#[test]
fn debug_hold_releases_on_sigterm() {
    let t = Ticker::start(&[PathBuf::from("/sys/fs/cgroup/freezer")]);
    let mut h = hold(t.child.id(), "5m");
    assert!(first_line(&mut h).contains("\"held\""));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(h.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let (code, out) = wait_exit(&mut h, Duration::from_secs(20));
    assert_eq!((code, out.contains("\"signal\"")), (0, true), "{out}");
    t.wait_progress();
}

#[test]
fn debug_hold_never_outlives_max_hold() {
    let t = Ticker::start(&[PathBuf::from("/sys/fs/cgroup/freezer")]);
    // stdin stays open and no signal comes: only the timer can end this hold.
    let mut h = hold(t.child.id(), "1s");
    let line = first_line(&mut h);
    assert!(line.contains("\"held\""), "first line: {line:?}");
    let (code, out) = wait_exit(&mut h, Duration::from_secs(20));
    assert_eq!(code, 0);
    assert!(out.contains("max-hold"), "{out}");
    t.wait_progress();
    drop(h.stdin.take());
}

#[test]
fn debug_hold_refuses_its_own_and_the_root_cgroup() {
    // The test process sits in the freezer root: that is the root cgroup.
    let mut h = hold(std::process::id(), "1s");
    let (code, out) = wait_exit(&mut h, Duration::from_secs(20));
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("root cgroup"), "{out}");
    // A process sharing the helper's cgroup is the helper's own cgroup. The helper is in
    // the ticker's cgroup from its first instruction (a shell moves itself there, then
    // execs it): moved there later, it could freeze the cgroup first and itself with it.
    let t = Ticker::start(&[PathBuf::from("/sys/fs/cgroup/freezer")]);
    let mut h = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec {} hold --pid {} --max-hold 1s",
            t.cgroups[0].display(),
            env!("CARGO_BIN_EXE_vtsnap-node"),
            t.child.id()
        ))
        .stdout(Stdio::piped())
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out) = wait_exit(&mut h, Duration::from_secs(20));
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("own cgroup"), "{out}");
    t.wait_progress();
}

/// A write + fsync in another thread; reports when it completes.
fn write_in_background(dir: &Path) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    let p = dir.join("probe-write");
    std::thread::spawn(move || {
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(b"x").unwrap();
        f.sync_all().unwrap();
        let _ = tx.send(());
    });
    rx
}

/// Thaws on drop, so a failed assertion never leaves a frozen file system behind.
struct ThawGuard<'a>(&'a Path);

impl Drop for ThawGuard<'_> {
    fn drop(&mut self) {
        let _ = fsfreeze::thaw(self.0);
    }
}

#[test]
fn fifreeze_blocks_writes_until_fithaw() {
    let vol = BtrfsVolume::create(512 << 20);
    let _g = ThawGuard(vol.path());
    fsfreeze::freeze(vol.path(), Path::new("/")).unwrap();
    fsfreeze::freeze(vol.path(), Path::new("/")).unwrap(); // already frozen: still fine
    let done = write_in_background(vol.path());
    assert!(
        done.recv_timeout(Duration::from_millis(500)).is_err(),
        "a write completed on a frozen file system"
    );
    fsfreeze::thaw(vol.path()).unwrap();
    done.recv_timeout(Duration::from_secs(20))
        .expect("the write did not complete after the thaw");
    fsfreeze::thaw(vol.path()).unwrap(); // not frozen: still fine
}

#[test]
fn debug_fsfreeze_thaws_at_max_hold() {
    let vol = BtrfsVolume::create(512 << 20);
    let _g = ThawGuard(vol.path());
    let max_hold = Duration::from_secs(1);
    // Before the freeze: the thaw comes no sooner than `max_hold` after this.
    let spawned = Instant::now();
    let mut h = node_bin()
        .args(["fsfreeze", "--host-root", "/", "--mount"])
        .arg(vol.path())
        .args(["--max-hold", "1s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(first_line(&mut h).contains("\"frozen\""));
    let done = write_in_background(vol.path());
    // A write that completes before max-hold can have passed went through the freeze. (On a
    // loaded machine that time may be gone before the write began: nothing to tell then.)
    if let Some(frozen_still) = max_hold.checked_sub(spawned.elapsed()) {
        assert!(
            done.recv_timeout(frozen_still).is_err(),
            "a write completed on a frozen file system"
        );
    }
    let (code, out) = wait_exit(&mut h, Duration::from_secs(20));
    assert_eq!(code, 0);
    assert!(out.contains("max-hold"), "{out}");
    done.recv_timeout(Duration::from_secs(20))
        .expect("the watchdog did not thaw");
    drop(h.stdin.take());
}

#[test]
fn fsfreeze_refuses_what_it_must_not_freeze() {
    // Checked without any ioctl: the root file system and plain directories.
    assert!(matches!(
        fsfreeze::check_mount(Path::new("/"), Path::new("/")),
        Err(FsFreezeError::RootFilesystem { .. })
    ));
    let d = tempfile::tempdir().unwrap();
    assert!(matches!(
        fsfreeze::check_mount(d.path(), Path::new("/")),
        Err(FsFreezeError::NotAMountPoint { .. } | FsFreezeError::RootFilesystem { .. })
    ));
    // In the DaemonSet `/` is the container's overlay: the node's root is PID 1's.
    assert_eq!(fsfreeze::NODE_ROOT, "/proc/1/root");
    // A real mount on the file system of the node's root (here: a directory of the mount
    // named as the root) is refused, and so is one whose node root cannot be read.
    let vol = BtrfsVolume::create(256 << 20);
    let node_root = vol.path().join("node-root");
    std::fs::create_dir_all(&node_root).unwrap();
    assert!(fsfreeze::check_mount(vol.path(), Path::new("/")).is_ok());
    assert!(matches!(
        fsfreeze::check_mount(vol.path(), &node_root),
        Err(FsFreezeError::RootFilesystem { .. })
    ));
    assert!(matches!(
        fsfreeze::check_mount(vol.path(), &d.path().join("missing")),
        Err(FsFreezeError::RootUnknown { .. })
    ));
    assert!(matches!(
        fsfreeze::freeze(vol.path(), &node_root),
        Err(FsFreezeError::RootFilesystem { .. })
    ));
    assert!(matches!(
        fsfreeze::check_mount(&d.path().join("missing"), Path::new("/")),
        Err(FsFreezeError::NotFound { .. })
    ));
    let out = node_bin()
        .args(["fsfreeze", "--mount"])
        .arg(d.path())
        .args(["--max-hold", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
}

fn tablet_volume(vol: &BtrfsVolume) -> PathBuf {
    let root = vol.subvolume("pvc").join("vtdataroot");
    std::fs::create_dir(&root).unwrap();
    TabletLayout::mariadb(101).write(&root).unwrap();
    root
}

#[test]
fn probe_accepts_a_single_volume_tablet() {
    let vol = BtrfsVolume::create(512 << 20);
    let root = tablet_volume(&vol);
    let l = probe::probe(&root, TabletUid::new(101)).unwrap();
    let keys: Vec<&str> = l.paths.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "datadir",
            "innodb_data_home_dir",
            "innodb_log_group_home_dir",
            "log_bin",
            "relay_log"
        ]
    );
    assert!(!l.restore_in_progress);
    let out = node_bin()
        .args(["probe", "--vtdataroot"])
        .arg(&root)
        .args(["--tablet-uid", "101"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Bind-mounts another file system into the volume; unmounts on drop.
struct Bind(PathBuf);

impl Drop for Bind {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn probe_refuses_innodb_on_another_loop_filesystem() {
    let vol = BtrfsVolume::create(512 << 20);
    let other = BtrfsVolume::create(256 << 20);
    let root = tablet_volume(&vol);
    let t = root.join("vt_0000000101");
    let mnt = root.join("other-disk");
    std::fs::create_dir(&mnt).unwrap();
    assert!(
        Command::new("mount")
            .arg("--bind")
            .arg(other.path())
            .arg(&mnt)
            .status()
            .unwrap()
            .success()
    );
    let _b = Bind(mnt.clone());
    std::fs::remove_dir_all(t.join("innodb")).unwrap();
    std::fs::create_dir_all(mnt.join("innodb/data")).unwrap();
    std::fs::create_dir_all(mnt.join("innodb/logs")).unwrap();
    std::os::unix::fs::symlink("/vt/vtdataroot/other-disk/innodb", t.join("innodb")).unwrap();
    let e = probe::probe(&root, TabletUid::new(101)).unwrap_err();
    assert!(
        matches!(e, ProbeError::OtherFilesystem { ref key, .. } if key == "innodb_data_home_dir"),
        "{e}"
    );
    let out = node_bin()
        .args(["probe", "--vtdataroot"])
        .arg(&root)
        .args(["--tablet-uid", "101"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn probe_refuses_a_datadir_outside_the_mount() {
    let vol = BtrfsVolume::create(512 << 20);
    let root = tablet_volume(&vol);
    let cnf = root.join("vt_0000000101/my.cnf");
    let text = std::fs::read_to_string(&cnf).unwrap().replace(
        "datadir = /vt/vtdataroot/vt_0000000101/data",
        "datadir = /var/lib/mysql",
    );
    std::fs::write(&cnf, text).unwrap();
    let e = probe::probe(&root, TabletUid::new(101)).unwrap_err();
    assert!(
        matches!(e, ProbeError::OffVolume { ref key, .. } if key == "datadir"),
        "{e}"
    );
    // A symlink that leaves the volume is refused too.
    let vol2 = BtrfsVolume::create(512 << 20);
    let root2 = tablet_volume(&vol2);
    let t = root2.join("vt_0000000101");
    std::fs::remove_dir_all(t.join("bin-logs")).unwrap();
    std::os::unix::fs::symlink("/var/log/binlogs", t.join("bin-logs")).unwrap();
    assert!(matches!(
        probe::probe(&root2, TabletUid::new(101)),
        Err(ProbeError::Volume(_))
    ));
}
