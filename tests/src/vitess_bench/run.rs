//! One run of `make bench-vitess` on the lab's real shard: the replica vtsnap picks
//! backed up three ways (cold snapshot, online snapshot, the builtin engine's `Backup`),
//! then a new replica provisioned three ways (from the online snapshot, by
//! `--restore-from-backup`, by `--restore-with-clone --clone-from-primary`), each timed
//! from a dropped page cache until it serves as a REPLICA holding everything the primary
//! had when it began.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::config::Config;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::shard::ShardName;
use vtsnap_core::vtctld::TabletType;
use vtsnap_snapshot::run::{Summary, run};
use vtsnap_testkit::vitess::{KEYSPACE, NewTablet, Placement, SHARD, TabletRole};

use super::measure::{Disk, DiskBytes, TypeSampler, mysqld_restart};
use super::record::{Backup, ColdWindow, MysqlctldDirect, Phase, Provisioned, Step, VitessRun};
use crate::bench::{drop_page_cache, du_bytes};
use crate::demo::run_options;
use crate::vitess_lab::VitessLab;
use vtsnap_node::mysqlctl::{MysqlCtl, start_unless_running};

/// How long one provisioning may take before the run fails, naming it.
const PROVISION_LIMIT: Duration = Duration::from_secs(3600);

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What a run needs besides the lab.
#[derive(Debug)]
pub struct RunContext<'a> {
    pub disk: &'a Disk,
    /// Every phase began from a dropped page cache (false once this machine refused).
    pub cold_caches: &'a mut bool,
    /// UIDs of this run's new tablets: `base + 1..=3`.
    pub uid_base: u32,
    /// The GTID set of the seeded data.
    pub seeded: &'a str,
}

impl RunContext<'_> {
    fn drop_caches(&mut self) {
        *self.cold_caches &= drop_page_cache();
    }
}

pub async fn one_run(lab: &mut VitessLab, cx: &mut RunContext<'_>, run_no: usize) -> VitessRun {
    let mut r = VitessRun::default();
    let tl = lab.timeline.clone();

    cx.drop_caches();
    let since = Timestamp::now();
    let (s, cold) = snapshot(lab, cx.disk, Mode::Cold).await;
    let target = s.target.clone().unwrap_or_default();
    let log = std::fs::read_to_string(lab.tablet_by_alias(&target).tablet_dir().join("error.log"))
        .unwrap_or_default();
    let restart = mysqld_restart(&log, since).unwrap_or_else(|| {
        panic!("no mysqld shutdown and start of {target} in its error log since {since}")
    });
    r.cold = cold;
    r.cold_window = ColdWindow {
        window_ms: s.fence_window_ms.unwrap_or(0),
        steps: s.step_timings.iter().map(Step::from).collect(),
        mysqld_shutdown_ms: restart.shutdown_ms,
        mysqld_start_ms: restart.start_ms,
    };
    tl.mark(format!(
        "bench {run_no}: cold snapshot of {target}: out of service {} ms, window {} ms = mysqld \
         shutdown {} + start {} + cut {} + vtsnap and its RPCs {} ms",
        r.cold.out_of_service_ms,
        r.cold_window.window_ms,
        restart.shutdown_ms,
        restart.start_ms,
        r.cold_window.step_ms("snapshot cut"),
        r.cold_window.overhead_ms()
    ));

    cx.drop_caches();
    // It may pick the other replica: the most caught-up one wins.
    let (online, online_backup) = snapshot(lab, cx.disk, Mode::Online).await;
    r.online = online_backup;
    tl.mark(format!(
        "bench {run_no}: online snapshot: out of service {} ms, total {} ms",
        r.online.out_of_service_ms, r.online.total_ms
    ));

    cx.drop_caches();
    r.builtin = builtin_backup(lab, cx.disk, &target).await;
    r.builtin_backup_bytes = du_bytes(&lab.shard.shared_dir().join("backups"));
    tl.mark(format!(
        "bench {run_no}: builtin Backup of {target}: out of service {} ms, total {} ms, {} MiB stored",
        r.builtin.out_of_service_ms,
        r.builtin.total_ms,
        r.builtin_backup_bytes >> 20
    ));

    let snapshot_name = online.snapshot.clone().unwrap_or_default();
    cx.drop_caches();
    (r.vtsnap, r.mysqlctld) = from_snapshot(lab, cx, &snapshot_name, cx.uid_base + 1).await;
    tl.mark(format!(
        "bench {run_no}: mysqlctld directly: Shutdown {} ms (mysqld's own {}), Start until mysqld answers {} ms (mysqld's own {})",
        r.mysqlctld.shutdown_call_ms,
        r.mysqlctld.mysqld_shutdown_ms,
        r.mysqlctld.start_call_ms,
        r.mysqlctld.mysqld_start_ms
    ));
    mark_provisioned(lab, run_no, "from the online snapshot", &r.vtsnap);
    cx.drop_caches();
    r.restore = empty_tablet(lab, cx, cx.uid_base + 2, NewTablet::FromBackup).await;
    mark_provisioned(lab, run_no, "--restore-from-backup", &r.restore);
    cx.drop_caches();
    r.clone = empty_tablet(lab, cx, cx.uid_base + 3, NewTablet::CloneFromPrimary).await;
    mark_provisioned(lab, run_no, "--restore-with-clone", &r.clone);
    remove_backups(lab);
    r
}

fn mark_provisioned(lab: &VitessLab, run_no: usize, how: &str, p: &Provisioned) {
    let phases: Vec<String> = p
        .phases
        .iter()
        .map(|x| format!("{} {} ms", x.phase, x.ms))
        .collect();
    lab.timeline.mark(format!(
        "bench {run_no}: a replica {how} in {} ms ({}); read {} MiB, wrote {} MiB",
        p.total_ms(),
        phases.join(", "),
        p.read_bytes >> 20,
        p.written_bytes >> 20
    ));
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Cold,
    Online,
}

/// `vtsnap-snapshot run`, with the type sampler and the disk's counters around it.
async fn snapshot(lab: &VitessLab, disk: &Disk, mode: Mode) -> (Summary, Backup) {
    let extra = match mode {
        Mode::Cold => "",
        Mode::Online => "  snapshot: {mode: online}\n",
    };
    let cfg = Config::from_yaml(&lab.config(extra)).unwrap_or_else(|e| panic!("config: {e}"));
    let sampler = TypeSampler::start(lab.shard.client());
    let bytes = disk.now();
    let started = Instant::now();
    let s = run(
        &cfg,
        &ShardName::new("example", KEYSPACE, SHARD),
        &run_options(),
        lab.cp.client(),
    )
    .await;
    let total_ms = ms(started.elapsed());
    let io = disk.now().since(bytes);
    assert_eq!(
        s.exit_code,
        0,
        "{mode:?} snapshot failed: {}",
        serde_json::to_string(&s).unwrap_or_default()
    );
    let target = s.target.clone().unwrap_or_default();
    let out = sampler.stop(&target).await;
    (
        s,
        Backup {
            out_of_service_ms: ms(out),
            total_ms,
            read_bytes: io.read,
            written_bytes: io.written,
        },
    )
}

/// `vtctldclient Backup <target>`: the builtin engine to the file backup storage.
async fn builtin_backup(lab: &VitessLab, disk: &Disk, target: &str) -> Backup {
    let sampler = TypeSampler::start(lab.shard.client());
    let bytes = disk.now();
    let started = Instant::now();
    lab.shard.ctl(&["Backup", target]).await;
    let total_ms = ms(started.elapsed());
    let io = disk.now().since(bytes);
    let out = sampler.stop(target).await;
    assert!(
        out > Duration::ZERO,
        "vtctld never showed {target} out of REPLICA during its builtin backup"
    );
    Backup {
        out_of_service_ms: ms(out),
        total_ms,
        read_bytes: io.read,
        written_bytes: io.written,
    }
}

/// A replica the vtsnap way: a PVC from `snapshot` (the CSI driver's clone),
/// `vtsnap-restore` to `uid`, its mysqld (crash recovery of an online snapshot), its
/// vttablet, VTOrc starting replication, catch-up. Then, before the tablet goes,
/// mysqlctld's `Shutdown` and `Start` called on it directly.
async fn from_snapshot(
    lab: &mut VitessLab,
    cx: &RunContext<'_>,
    snapshot: &str,
    uid: u32,
) -> (Provisioned, MysqlctldDirect) {
    let primary = lab.shard.primary().gtid_executed().await;
    let bytes = cx.disk.now();
    let mut phases = Vec::new();
    let mut t = Instant::now();
    let mut lap = |phases: &mut Vec<Phase>, name: &str| {
        phases.push(Phase {
            phase: name.into(),
            ms: ms(t.elapsed()),
        });
        t = Instant::now();
    };
    let volume = lab.cp.restore_pvc(&format!("bench-{uid}"), snapshot).await;
    lap(&mut phases, "PVC from the snapshot");
    vtsnap_restore::run(&vtsnap_restore::Options {
        vtdataroot: volume.join("vtdataroot"),
        tablet_uid: TabletUid::new(uid),
        server_id: None,
        dry_run: false,
    })
    .unwrap_or_else(|e| panic!("vtsnap-restore to {uid}: {e}"));
    lap(&mut phases, "vtsnap-restore");
    let sockets = lab.vol.path().join(format!("sockets-{uid}"));
    lab.shard
        .add_mysqld_at(
            uid,
            &Placement {
                volume: volume.clone(),
                socket_dir: sockets,
            },
        )
        .await;
    lap(&mut phases, "mysqld start");
    lab.shard.serve(uid);
    let want = Wanted {
        seeded: cx.seeded,
        primary: &primary,
    };
    serving_and_caught_up(lab, uid, want, &mut phases, (t, None)).await;
    let io = cx.disk.now().since(bytes);
    let direct = mysqlctld_direct(lab, uid).await;
    retire(lab, uid, &volume).await;
    (provisioned(phases, io), direct)
}

/// mysqlctld's `Shutdown` then `Start` on tablet `uid`, through the node helper's own
/// client calls but nothing else of vtsnap, with mysqld's own times from its error log.
async fn mysqlctld_direct(lab: &VitessLab, uid: u32) -> MysqlctldDirect {
    let t = lab.shard.tablet_by_uid(uid);
    let limit = Duration::from_secs(300);
    let ctl =
        MysqlCtl::new(&t.mysqlctl_socket()).unwrap_or_else(|e| panic!("mysqlctld of {uid}: {e}"));
    let since = Timestamp::now();
    let sent = Instant::now();
    ctl.shutdown(limit)
        .await
        .unwrap_or_else(|e| panic!("Shutdown of {uid}: {e}"));
    let shutdown_call_ms = ms(sent.elapsed());
    let sent = Instant::now();
    start_unless_running(
        &t.mysqlctl_socket(),
        &t.socket_dir.join("mysql.sock"),
        limit,
    )
    .await
    .unwrap_or_else(|e| panic!("Start of {uid}: {e}"));
    let start_call_ms = ms(sent.elapsed());
    let log = std::fs::read_to_string(t.tablet_dir().join("error.log")).unwrap_or_default();
    let own = mysqld_restart(&log, since)
        .unwrap_or_else(|| panic!("no mysqld restart of {uid} in its error log since {since}"));
    MysqlctldDirect {
        shutdown_call_ms,
        start_call_ms,
        mysqld_shutdown_ms: own.shutdown_ms,
        mysqld_start_ms: own.start_ms,
    }
}

/// A replica Vitess's way: a new tablet on an empty volume (mysqlctld initializes its
/// mysqld), whose vttablet restores the builtin backup or clones the primary.
async fn empty_tablet(
    lab: &mut VitessLab,
    cx: &RunContext<'_>,
    uid: u32,
    how: NewTablet,
) -> Provisioned {
    let primary = lab.shard.primary().gtid_executed().await;
    let bytes = cx.disk.now();
    let mut phases = Vec::new();
    let t = Instant::now();
    let volume = lab.shard.opts.volumes.join(uid.to_string());
    lab.shard.add_empty_tablet(uid, how).await;
    phases.push(Phase {
        phase: "mysqld init".into(),
        ms: ms(t.elapsed()),
    });
    let data = match how {
        NewTablet::FromBackup => "restore",
        NewTablet::CloneFromPrimary => "CLONE",
        NewTablet::StartEmpty => "start",
    };
    let want = Wanted {
        seeded: cx.seeded,
        primary: &primary,
    };
    serving_and_caught_up(lab, uid, want, &mut phases, (Instant::now(), Some(data))).await;
    let io = cx.disk.now().since(bytes);
    retire(lab, uid, &volume).await;
    provisioned(phases, io)
}

fn provisioned(phases: Vec<Phase>, io: DiskBytes) -> Provisioned {
    Provisioned {
        phases,
        read_bytes: io.read,
        written_bytes: io.written,
    }
}

/// What a new tablet must hold before it counts as provisioned.
#[derive(Debug, Clone, Copy)]
struct Wanted<'a> {
    /// The GTID set of the seeded data: held once the restore or CLONE is done.
    seeded: &'a str,
    /// The primary's GTID set when the provisioning began.
    primary: &'a str,
}

/// When `data` names the phase that brings the data (a restore, a CLONE), waits until
/// `uid` holds the seeded GTIDs (that phase); then until it is a REPLICA in vtctld's
/// record holding the primary's (phase "catch-up"). Both read from the tablet, never
/// from a type vttablet may publish before its restore begins.
async fn serving_and_caught_up(
    lab: &VitessLab,
    uid: u32,
    want: Wanted<'_>,
    phases: &mut Vec<Phase>,
    (from, data): (Instant, Option<&str>),
) {
    let alias = format!("zone1-{uid:010}");
    let parsed = alias.parse().unwrap_or_else(|e| panic!("{alias}: {e:?}"));
    let client = lab.shard.client();
    let holds = |set: &str| format!("SELECT GTID_SUBSET('{set}', @@global.gtid_executed)");
    let (seeded, primary) = (holds(want.seeded), holds(want.primary));
    let started = Instant::now();
    let mut from = from;
    if let Some(data) = data {
        loop {
            vttablet_running(lab, uid);
            let got = lab.shard.tablet_by_uid(uid).sql(&seeded).await;
            if got.as_deref() == Ok("1") {
                break;
            }
            assert!(
                started.elapsed() < PROVISION_LIMIT,
                "{alias} has no data after {PROVISION_LIMIT:?}: {got:?}\n{}",
                lab.shard.tablet_by_uid(uid).logs(30)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        phases.push(Phase {
            phase: data.into(),
            ms: ms(from.elapsed()),
        });
        from = Instant::now();
    }
    loop {
        vttablet_running(lab, uid);
        let ty = client.get_tablet(&parsed).await.map(|t| t.r#type).ok();
        let got = lab.shard.tablet_by_uid(uid).sql(&primary).await;
        if ty == Some(TabletType::Replica as i32) && got.as_deref() == Ok("1") {
            break;
        }
        assert!(
            started.elapsed() < PROVISION_LIMIT,
            "{alias} is not a REPLICA caught up to {} after {PROVISION_LIMIT:?} (type {ty:?}, {got:?}):\n{}",
            want.primary,
            lab.shard.tablet_by_uid(uid).logs(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    phases.push(Phase {
        phase: "serving, caught up".into(),
        ms: ms(from.elapsed()),
    });
}

/// Fails, with its logs, once the tablet's vttablet has exited: a restore or CLONE that
/// failed publishes the tablet as REPLICA and then exits (Vitess v0.24.4), so waiting on
/// it would wait for nothing.
fn vttablet_running(lab: &VitessLab, uid: u32) {
    let t = lab.shard.tablet_by_uid(uid);
    let running = t
        .container(TabletRole::Vttablet)
        .is_some_and(vtsnap_testkit::vitess::Container::running);
    assert!(running, "the vttablet of {uid} exited:\n{}", t.logs(40));
}

/// Removes a provisioned tablet and its volume, so the next one has the disk and the
/// cores to itself.
async fn retire(lab: &mut VitessLab, uid: u32, volume: &Path) {
    lab.shard.remove_tablet(uid).await;
    let deleted = std::process::Command::new("btrfs")
        .args(["-q", "subvolume", "delete"])
        .arg(volume)
        .output()
        .is_ok_and(|o| o.status.success());
    if !deleted {
        let _ = std::fs::remove_dir_all(volume);
    }
}

/// Empties the file backup storage (each run makes its own backup).
fn remove_backups(lab: &VitessLab) {
    let root = lab.shard.shared_dir().join("backups");
    if let Ok(entries) = std::fs::read_dir(&root) {
        for e in entries.flatten() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
