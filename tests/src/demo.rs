//! The lab's end-to-end flow (`make demo`, and the CI test in a short configuration): under
//! write load, a cold and an online snapshot through the real `vtsnap-snapshot` run; a new
//! replica from each through `vtsnap-restore`; catch-up and checksums against the primary;
//! then `vtsnap-gc`.

use std::collections::BTreeMap;
use std::time::Duration;
use vtsnap_core::shard::ShardName;

use serde::Serialize;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::snapshot::{DrillRecord, DrillResult};
use vtsnap_gc::act::GcOptions;
use vtsnap_snapshot::run::{RunOptions, StepTiming, Summary, run};

use crate::provision::{self, ProvisionTimes, wait_for_gtid};
use crate::shard::{Lab, checksums, inserts_load, until};

/// The demo's write load: enough to keep every step honest, little enough that a new
/// replica (one applier thread) catches up quickly on two cores.
pub const LOAD_PER_SECOND: u32 = 200;

/// One snapshot and the replica provisioned from it.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotReport {
    pub mode: &'static str,
    pub snapshot: String,
    pub target: String,
    pub fence_window_ms: u64,
    pub cut_latency_ms: u64,
    pub ready_latency_ms: u64,
    /// The target's mysqlctld `Shutdown` and release `Start` (cold only).
    pub mysqld_shutdown_ms: Option<u64>,
    pub mysqld_start_ms: Option<u64>,
    /// The lab's fake vtctld: the time its calls to the tablets' servers took during the
    /// run (each a client through `podman exec`, a cost a real vttablet does not have).
    pub fake_vtctld_ms: u64,
    /// Each step of the run and how long it took (the job's `step_timings`).
    pub step_timings: Vec<StepTiming>,
    /// The whole `vtsnap-snapshot run`, start to exit (it exits once the snapshot is ready).
    pub run_ms: u64,
    /// The snapshot holds no `mysql.pid`: mysqld was down at the cut (cold) — or, for an
    /// online snapshot, false by design (a running server's crash image).
    pub image_without_running_mysqld: bool,
    /// The supervisor's `Start` calls made while this snapshot ran: did each restart mysqld?
    pub supervisor_starts: Vec<bool>,
    /// The GTID position recorded on the snapshot (exact for cold, a lower bound online).
    pub recorded_gtid: String,
    /// `gtid_binlog_pos` the new replica found in its restored data, before replicating.
    pub restored_gtid: String,
    pub new_tablet: u32,
    pub times: ProvisionTimes,
    pub checksum_match: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    pub cold: SnapshotReport,
    pub online: SnapshotReport,
    pub primary_checksums: Vec<String>,
    pub gc_exit_code: u8,
    pub snapshots_kept: Vec<String>,
    pub snapshots_deleted: Vec<String>,
    /// btrfs snapshots left after GC (the CSI driver removes deleted ones).
    pub volumes_left: Vec<String>,
    /// The API server's version, on a real control plane.
    pub kube_version: Option<String>,
    /// The restore drill of each snapshot, as recorded on it (`vtsnap.io/drill`).
    pub drills: BTreeMap<&'static str, DrillRecord>,
}

impl DemoReport {
    /// The final JSON line of `make demo`.
    pub fn summary(&self) -> Value {
        let both = |f: &dyn Fn(&SnapshotReport) -> Value| json!({"cold": f(&self.cold), "online": f(&self.online)});
        let mut line = json!({
            "fence_window_ms": both(&|s| json!(s.fence_window_ms)),
            "cut_latency_ms": both(&|s| json!(s.cut_latency_ms)),
            "provisioning_ms": both(&|s| json!(s.times.provisioning_ms())),
            "catch_up_ms": both(&|s| json!(s.times.catch_up_ms)),
            "checksum_match": self.cold.checksum_match && self.online.checksum_match,
            "snapshots_kept": self.snapshots_kept,
            "snapshots_deleted": self.snapshots_deleted,
            "drill": self.drills.iter().map(|(mode, d)| (mode.to_string(), json!({
                "result": d.result.as_str(),
                "rto_ms": d.rto.map(|r| r.total_ms()),
                "rto": d.rto,
                "reason": d.reason,
            }))).collect::<serde_json::Map<String, Value>>(),
        });
        if let Some(v) = &self.kube_version {
            line["kube_version"] = json!(v);
        }
        line
    }
}

pub fn run_options() -> RunOptions {
    RunOptions {
        holder: "vtsnap-lab".into(),
        lease_duration: Duration::from_secs(15),
        node_timeout: Duration::from_secs(300),
        poll: Duration::from_millis(50),
        ..RunOptions::default()
    }
}

/// Runs `vtsnap-snapshot run` once; panics with its summary if it did not succeed.
pub async fn take_snapshot(lab: &Lab, online: bool) -> Summary {
    let extra = if online {
        "  snapshot: {mode: online}\n"
    } else {
        ""
    };
    let cfg = Config::from_yaml(&lab.config(extra)).unwrap_or_else(|e| panic!("lab config: {e}"));
    let mode = if online { "online" } else { "cold" };
    lab.timeline
        .mark(format!("snapshot: vtsnap-snapshot run ({mode})"));
    let s = run(
        &cfg,
        &ShardName::new("example", "commerce", "-"),
        &run_options(),
        lab.cp.client(),
    )
    .await;
    assert_eq!(
        s.exit_code,
        0,
        "{mode} snapshot failed: {}",
        serde_json::to_string(&s).unwrap_or_default()
    );
    lab.timeline.mark(format!(
        "snapshot: {} of {} done (steps: {}); fence window {} ms, cut latency {} ms, ready after {} ms",
        s.snapshot.as_deref().unwrap_or("?"),
        s.target.as_deref().unwrap_or("?"),
        s.steps.join(" → "),
        s.fence_window_ms.unwrap_or(0),
        s.cut_latency_ms.unwrap_or(0),
        s.ready_latency_ms.unwrap_or(0),
    ));
    s
}

/// Takes one snapshot and reports on it (before any replica is made from it).
pub async fn snapshot_report(lab: &Lab, online: bool, new_tablet: u32) -> SnapshotReport {
    // What each tablet's mysqlctld had recorded before: only this run's records count.
    let before: BTreeMap<usize, (usize, usize)> = lab
        .tablets
        .iter()
        .map(|(n, t)| (*n, (t.ctl.supervisor_starts().len(), t.ctl.timings().len())))
        .collect();
    let backend_before = lab.backend.timings().len();
    let started = std::time::Instant::now();
    let s = take_snapshot(lab, online).await;
    let fake_vtctld: std::time::Duration = lab.backend.timings()[backend_before..].iter().sum();
    let run_ms = provision::ms(started.elapsed());
    let name = s.snapshot.clone().unwrap_or_default();
    let target = s.target.clone().unwrap_or_default();
    let (n, tablet) = lab.tablet_by_alias(&target);
    let (starts_before, timings_before) = before[&n];
    // The run returns after the release, so the release's Start is recorded by now.
    let timings = tablet.ctl.timings()[timings_before..].to_vec();
    let took = |what: &str| {
        timings
            .iter()
            .find(|(w, _)| *w == what)
            .map(|(_, d)| provision::ms(*d))
    };
    let image = lab
        .cp
        .snapshot_images()
        .await
        .remove(&name)
        .unwrap_or_else(|| panic!("no btrfs snapshot for {name}"));
    let pid = image
        .join("vtdataroot")
        .join(tablet.alias.uid.tablet_dir_name())
        .join("mysql.pid");
    SnapshotReport {
        mode: if online { "online" } else { "cold" },
        snapshot: name,
        target,
        fence_window_ms: s.fence_window_ms.unwrap_or(0),
        cut_latency_ms: s.cut_latency_ms.unwrap_or(0),
        ready_latency_ms: s.ready_latency_ms.unwrap_or(0),
        mysqld_shutdown_ms: took("Shutdown"),
        mysqld_start_ms: took("Start"),
        fake_vtctld_ms: provision::ms(fake_vtctld),
        step_timings: s.step_timings.clone(),
        run_ms,
        image_without_running_mysqld: !pid.exists(),
        supervisor_starts: tablet.ctl.supervisor_starts()[starts_before..].to_vec(),
        recorded_gtid: s
            .gtid
            .as_deref()
            .unwrap_or_default()
            .trim_start_matches("MariaDB/")
            .to_owned(),
        restored_gtid: String::new(),
        new_tablet,
        times: ProvisionTimes::default(),
        checksum_match: false,
    }
}

/// The whole flow on a started lab.
pub async fn run_demo(lab: &Lab) -> DemoReport {
    let primary = lab.primary();
    primary
        .start_load_script(&inserts_load(LOAD_PER_SECOND))
        .await;
    lab.timeline.mark(format!(
        "load: up to {LOAD_PER_SECOND} single-row transactions a second on the primary, for the whole flow"
    ));

    let mut cold = snapshot_report(lab, false, 201).await;
    for started in &cold.supervisor_starts {
        lab.timeline.mark(format!(
            "supervisor: its Start after the cold Shutdown {}",
            if *started {
                "restarted mysqld"
            } else {
                "found mysqld held (frozen) and failed"
            }
        ));
    }
    let mut online = snapshot_report(lab, true, 202).await;

    let mut replicas = Vec::new();
    for r in [&mut cold, &mut online] {
        let n = provision::from_snapshot(lab, &r.snapshot, TabletUid::new(r.new_tablet)).await;
        r.times = n.times;
        r.restored_gtid = n.restored_gtid.clone();
        replicas.push(n);
    }

    primary.stop_load().await;
    let final_pos = primary.value("SELECT @@gtid_binlog_pos").await;
    lab.timeline
        .mark(format!("load: stopped; the primary is at {final_pos}"));
    let want = checksums(&primary).await;
    for (r, n) in [&mut cold, &mut online].into_iter().zip(&replicas) {
        wait_for_gtid(&n.db, &final_pos, Duration::from_secs(300)).await;
        let got = checksums(&n.db).await;
        r.checksum_match = got == want;
        lab.timeline.mark(format!(
            "check: tablet {} (from the {} snapshot) {} the primary: {}",
            r.new_tablet,
            r.mode,
            if r.checksum_match {
                "matches"
            } else {
                "DIFFERS from"
            },
            got.join(" ")
        ));
    }

    // Each snapshot proves it restores: a drill (a clone, vtsnap-restore to a drill UID,
    // mysqld with no network, the checker), recorded on the snapshot by vtsnap-drill's own
    // code.
    let mut drills = BTreeMap::new();
    for (r, uid) in [(&cold, 901), (&online, 902)] {
        let d = crate::drill::drill(lab, &r.snapshot, TabletUid::new(uid)).await;
        vtsnap_drill::act::write_record(
            &lab.cp.client(),
            lab.cp.namespace(),
            &r.snapshot,
            &d.record,
        )
        .await
        .unwrap_or_else(|e| panic!("recording the drill of {}: {e}", r.snapshot));
        drills.insert(r.mode, d.record);
    }

    // Retention: keep the newest ready snapshot only.
    let cfg = Config::from_yaml(&lab.config("  retention: {maxCount: 1}\n"))
        .unwrap_or_else(|e| panic!("lab config: {e}"));
    let images = lab.cp.snapshot_images().await;
    lab.timeline.mark("gc: vtsnap-gc with retention maxCount 1");
    let gc = vtsnap_gc::act::run(
        &cfg,
        &GcOptions {
            dry_run: false,
            only_cluster: None,
            node_timeout: Duration::from_secs(60),
        },
        lab.cp.client(),
    )
    .await;
    let kept: Vec<String> = gc.run.plan.keep.iter().map(|i| i.name.clone()).collect();
    // `vtsnap-gc` reports deletions as namespace/name.
    let deleted: Vec<String> = gc
        .run
        .deleted
        .iter()
        .map(|d| d.rsplit('/').next().unwrap_or(d).to_owned())
        .collect();
    lab.timeline.mark(format!(
        "gc: kept {kept:?}, deleted {deleted:?} (exit {})",
        gc.exit_code
    ));
    until(
        "the CSI driver removed the deleted snapshots",
        Duration::from_secs(60),
        || async {
            images
                .iter()
                .filter(|(n, _)| deleted.contains(n))
                .all(|(_, path)| !path.exists())
        },
    )
    .await;
    let volumes_left = images
        .into_iter()
        .filter(|(_, path)| path.exists())
        .map(|(n, _)| n)
        .collect();
    DemoReport {
        cold,
        online,
        primary_checksums: want,
        gc_exit_code: gc.exit_code,
        snapshots_kept: kept,
        snapshots_deleted: deleted,
        volumes_left,
        kube_version: lab.cp.kube_version().map(str::to_owned),
        drills,
    }
}

/// What a demo run must show, whatever its control plane (the lab's tests and the
/// real-API tier check the same): both replicas match the primary; the cold one starts at
/// exactly the recorded position and the online one at or after its lower bound; the
/// cold image is of a stopped mysqld because the hold defeated the supervisor's `Start`
/// inside a cut of `cut_delay`; the fence window covers the cut and is bounded; GC keeps
/// only the online snapshot and the driver removes the cold one's image. Panics with the
/// timeline `tl` on the first that fails.
pub fn assert_demo_held(r: &DemoReport, cut_delay: Duration, tl: &str) {
    assert!(r.cold.checksum_match, "cold replica differs\n{tl}");
    assert!(r.online.checksum_match, "online replica differs\n{tl}");

    // One GTID domain here: compare sequence numbers.
    assert!(!r.cold.recorded_gtid.is_empty(), "{tl}");
    assert_eq!(r.cold.restored_gtid, r.cold.recorded_gtid, "{tl}");
    let seq = |g: &str| {
        g.rsplit('-')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("not a MariaDB GTID: {g:?}\n{tl}"))
    };
    assert!(
        seq(&r.online.restored_gtid) >= seq(&r.online.recorded_gtid),
        "online: restored {} before the recorded lower bound {}\n{tl}",
        r.online.restored_gtid,
        r.online.recorded_gtid
    );

    assert!(
        r.cold.image_without_running_mysqld,
        "cold image has a running mysqld\n{tl}"
    );
    assert!(
        !r.cold.supervisor_starts.is_empty()
            && r.cold.supervisor_starts.iter().all(|started| !started),
        "the supervisor's Start should have failed while held: {:?}\n{tl}",
        r.cold.supervisor_starts
    );

    let shutdown = r.cold.mysqld_shutdown_ms.expect("Shutdown timing");
    let start = r.cold.mysqld_start_ms.expect("release Start timing");
    let cut = u64::try_from(cut_delay.as_millis()).unwrap_or(u64::MAX);
    let slack = 5_000;
    assert!(
        r.cold.fence_window_ms >= cut && r.cold.fence_window_ms <= shutdown + start + cut + slack,
        "fence window {} ms outside [{cut}, {shutdown} + {start} + {cut} + {slack}]\n{tl}",
        r.cold.fence_window_ms
    );
    assert_eq!(
        r.online.fence_window_ms, 0,
        "an online snapshot never fences"
    );

    for mode in ["cold", "online"] {
        let d = r
            .drills
            .get(mode)
            .unwrap_or_else(|| panic!("no drill of the {mode} snapshot\n{tl}"));
        assert_eq!(
            d.result,
            DrillResult::Passed,
            "the {mode} snapshot's drill: {d:?}\n{tl}"
        );
    }

    assert_eq!(r.gc_exit_code, 0, "{tl}");
    assert_eq!(r.snapshots_kept, vec![r.online.snapshot.clone()], "{tl}");
    assert_eq!(r.snapshots_deleted, vec![r.cold.snapshot.clone()], "{tl}");
    assert_eq!(r.volumes_left, vec![r.online.snapshot.clone()], "{tl}");

    let s = r.summary();
    for k in [
        "fence_window_ms",
        "cut_latency_ms",
        "provisioning_ms",
        "catch_up_ms",
        "checksum_match",
        "snapshots_kept",
        "snapshots_deleted",
        "drill",
    ] {
        assert!(s.get(k).is_some(), "summary lacks {k}: {s}");
    }
}
