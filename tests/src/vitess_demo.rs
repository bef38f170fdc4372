//! `make demo` on real Vitess: under write load, a cold and an online snapshot through the
//! real `vtsnap-snapshot run`; a new tablet from each, its volume a clone of the snapshot
//! moved to its UID by `vtsnap-restore`, served by vttablet and caught up by GTID (VTOrc
//! starts its replication); checksums against the primary; a restore drill of each
//! snapshot on MySQL 9.7; then `vtsnap-gc`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::shard::ShardName;
use vtsnap_core::snapshot::{DrillRecord, GtidFlavor, Rto, VolumeSnapshot};
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::messages::replicationdata::STATE_RUNNING;
use vtsnap_drill::check::{self, CheckReport};
use vtsnap_drill::decide::verdict::Verdict;
use vtsnap_drill::observe::server::ProbeOptions;
use vtsnap_gc::act::GcOptions;
use vtsnap_snapshot::run::{StepTiming, run};
use vtsnap_testkit::vitess::{Access, Bind, Container, DATABASE, IMAGE, Placement, give_to_vitess};

use crate::demo::run_options;
use crate::vitess_lab::{Load, VitessLab, until};

/// One snapshot and the tablet provisioned from it.
#[derive(Debug, Clone, Serialize)]
pub struct VitessSnapshotReport {
    pub mode: &'static str,
    pub snapshot: String,
    pub target: String,
    pub fence_window_ms: u64,
    pub cut_latency_ms: u64,
    pub ready_latency_ms: u64,
    pub step_timings: Vec<StepTiming>,
    /// Writes the primary committed while the run was fenced and cutting.
    pub writes_during_run: u64,
    /// The GTID position recorded on the snapshot (exact for cold, a lower bound online).
    pub recorded_gtid: String,
    /// `gtid_executed` of the new tablet's mysqld on its restored data, before anything
    /// replicated into it.
    pub restored_gtid: String,
    pub new_tablet: String,
    /// From the new tablet's mysqld answering to it serving as a replicating REPLICA.
    pub replicating_ms: u64,
    pub server_uuid_new: bool,
    pub checksum_match: bool,
    /// The restore drill of the snapshot, as its record says.
    pub drill: DrillRecord,
}

#[derive(Debug, Clone, Serialize)]
pub struct VitessDemoReport {
    pub vitess: &'static str,
    pub mysql: String,
    pub cold: VitessSnapshotReport,
    pub online: VitessSnapshotReport,
    pub primary_checksum: String,
    pub gc_exit_code: u8,
    pub snapshots_kept: Vec<String>,
    pub snapshots_deleted: Vec<String>,
}

impl VitessDemoReport {
    /// The final JSON line of `make demo`.
    pub fn summary(&self) -> Value {
        json!({
            "vitess": self.vitess,
            "mysql": self.mysql,
            "checksum_match": self.cold.checksum_match && self.online.checksum_match,
            "cold_gtid_exact": self.cold.recorded_gtid == self.cold.restored_gtid,
            "fence_window_ms": {"cold": self.cold.fence_window_ms, "online": self.online.fence_window_ms},
            "cut_latency_ms": {"cold": self.cold.cut_latency_ms, "online": self.online.cut_latency_ms},
            "writes_during_run": {"cold": self.cold.writes_during_run, "online": self.online.writes_during_run},
            "replicating_ms": {"cold": self.cold.replicating_ms, "online": self.online.replicating_ms},
            "drills_passed": self.cold.drill.result == vtsnap_core::snapshot::DrillResult::Passed
                && self.online.drill.result == vtsnap_core::snapshot::DrillResult::Passed,
            "gc_exit_code": self.gc_exit_code,
            "snapshots_kept": self.snapshots_kept,
            "snapshots_deleted": self.snapshots_deleted,
        })
    }

    /// Every check of the demo held.
    pub fn ok(&self) -> bool {
        let one = |s: &VitessSnapshotReport| {
            s.checksum_match
                && s.server_uuid_new
                && s.drill.result == vtsnap_core::snapshot::DrillResult::Passed
        };
        one(&self.cold)
            && one(&self.online)
            && self.cold.recorded_gtid == self.cold.restored_gtid
            && self.gc_exit_code == 0
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn gtid_set(s: &str) -> String {
    s.trim_start_matches("MySQL56/").replace(['\n', ' '], "")
}

/// Runs `vtsnap-snapshot run` once; panics with its summary if it did not succeed.
async fn snapshot(
    lab: &VitessLab,
    load: &Load,
    online: bool,
) -> (vtsnap_snapshot::run::Summary, u64) {
    let extra = if online {
        "  snapshot: {mode: online}\n"
    } else {
        ""
    };
    let cfg = Config::from_yaml(&lab.config(extra)).unwrap_or_else(|e| panic!("config: {e}"));
    let mode = if online { "online" } else { "cold" };
    lab.timeline
        .mark(format!("snapshot: vtsnap-snapshot run ({mode})"));
    let before = load.rows.load(std::sync::atomic::Ordering::SeqCst);
    let s = run(
        &cfg,
        &ShardName::new("example", "commerce", "-"),
        &run_options(),
        lab.cp.client(),
    )
    .await;
    let during = load.rows.load(std::sync::atomic::Ordering::SeqCst) - before;
    assert_eq!(
        s.exit_code,
        0,
        "{mode} snapshot failed: {}",
        serde_json::to_string(&s).unwrap_or_default()
    );
    lab.timeline.mark(format!(
        "snapshot: {} of {} done ({}); fence window {} ms, {during} writes on the primary meanwhile",
        s.snapshot.as_deref().unwrap_or("?"),
        s.target.as_deref().unwrap_or("?"),
        s.steps.join(" → "),
        s.fence_window_ms.unwrap_or(0),
    ));
    (s, during)
}

/// A new tablet from snapshot `name`: a PVC restored from it (the CSI driver's clone),
/// `vtsnap-restore` to `uid`, its mysqld (the restored GTID read before anything
/// replicates), then its vttablet.
async fn provision(lab: &mut VitessLab, name: &str, uid: u32) -> (String, String, Instant) {
    let volume = lab.cp.restore_pvc(&format!("restored-{uid}"), name).await;
    let out = vtsnap_restore::run(&vtsnap_restore::Options {
        vtdataroot: volume.join("vtdataroot"),
        tablet_uid: TabletUid::new(uid),
        server_id: None,
        dry_run: false,
    })
    .unwrap_or_else(|e| panic!("vtsnap-restore to {uid}: {e}"));
    let sockets = lab.vol.path().join(format!("sockets-{uid}"));
    let t = lab
        .shard
        .add_mysqld_at(
            uid,
            &Placement {
                volume,
                socket_dir: sockets,
            },
        )
        .await;
    let restored = t.gtid_executed().await;
    let uuid = t.must_sql("SELECT @@server_uuid").await;
    let answered = Instant::now();
    let alias = t.alias.to_string();
    lab.shard.serve(uid);
    lab.timeline.mark(format!(
        "provision: tablet {alias} from {name} (vtsnap-restore: {}), its mysqld up at {}",
        out.action.as_str(),
        gtid_set(&restored)
    ));
    (restored, uuid, answered)
}

async fn replicating(lab: &VitessLab, alias: &str) -> bool {
    let t = lab.tablet_by_alias(alias);
    let c = lab.shard.client();
    let typed = c
        .get_tablet(&t.alias)
        .await
        .is_ok_and(|x| x.r#type == TabletType::Replica as i32);
    typed
        && c.get_full_status(&t.alias)
            .await
            .ok()
            .and_then(|f| f.replication_status)
            .is_some_and(|s| s.io_state == STATE_RUNNING && s.sql_state == STATE_RUNNING)
}

async fn checksum(lab: &VitessLab, alias: &str) -> String {
    let out = lab
        .tablet_by_alias(alias)
        .must_sql(&format!("CHECKSUM TABLE {DATABASE}.t"))
        .await;
    out.split('\t').nth(1).unwrap_or_default().to_owned()
}

/// The whole story; returns its report (the caller prints the JSON line).
pub async fn run_vitess_demo(lab: &mut VitessLab) -> VitessDemoReport {
    let mysql = lab.shard.primary().must_sql("SELECT @@version").await;
    let load = Load::start(&lab.shard);
    load.until_more(20).await;
    lab.timeline.mark("load: inserts on the primary, all along");

    let mut reports = Vec::new();
    for (online, uid) in [(false, 2_000_000_001_u32), (true, 2_000_000_002)] {
        let (s, during) = snapshot(lab, &load, online).await;
        let name = s.snapshot.clone().unwrap_or_default();
        let source = lab
            .tablet_by_alias(s.target.as_deref().unwrap_or_default())
            .must_sql("SELECT @@server_uuid")
            .await;
        let (restored, uuid, answered) = provision(lab, &name, uid).await;
        let alias = format!("zone1-{uid:010}");
        until(&format!("{alias} replicates as a REPLICA"), async || {
            replicating(lab, &alias).await
        })
        .await;
        let replicating_ms = ms(answered.elapsed());
        lab.timeline.mark(format!(
            "provision: {alias} serving and replicating after {replicating_ms} ms (VTOrc started it)"
        ));
        let name_for_drill = s.snapshot.clone().unwrap_or_default();
        let (_, record) = drill(lab, &name_for_drill, TabletUid::new(999_999_990 + uid % 10)).await;
        reports.push((
            s,
            during,
            restored,
            uuid != source,
            alias,
            replicating_ms,
            record,
        ));
        load.until_more(10).await;
    }
    let rows = load.stop().await;
    let primary_gtid = lab.shard.primary().gtid_executed().await;
    for (_, _, _, _, alias, _, _) in &reports {
        until(&format!("{alias} caught up by GTID"), async || {
            lab.tablet_by_alias(alias).gtid_executed().await == primary_gtid
        })
        .await;
    }
    let primary_checksum = checksum(lab, &lab.shard.primary().alias.to_string()).await;
    lab.timeline.mark(format!(
        "load stopped after {rows} inserts; both new tablets caught up to {}",
        gtid_set(&primary_gtid)
    ));

    let mut out = BTreeMap::new();
    for (s, during, restored, uuid_new, alias, replicating_ms, drill) in reports {
        let sum = checksum(lab, &alias).await;
        let mode = if s.mode == Some(vtsnap_core::config::Mode::Online) {
            "online"
        } else {
            "cold"
        };
        out.insert(
            mode,
            VitessSnapshotReport {
                mode,
                snapshot: s.snapshot.clone().unwrap_or_default(),
                target: s.target.clone().unwrap_or_default(),
                fence_window_ms: s.fence_window_ms.unwrap_or(0),
                cut_latency_ms: s.cut_latency_ms.unwrap_or(0),
                ready_latency_ms: s.ready_latency_ms.unwrap_or(0),
                step_timings: s.step_timings.clone(),
                writes_during_run: during,
                recorded_gtid: gtid_set(s.gtid.as_deref().unwrap_or_default()),
                restored_gtid: gtid_set(&restored),
                new_tablet: alias,
                replicating_ms,
                server_uuid_new: uuid_new,
                checksum_match: sum == primary_checksum,
                drill,
            },
        );
    }

    let cfg = Config::from_yaml(&lab.config("  retention: {maxCount: 1}\n"))
        .unwrap_or_else(|e| panic!("config: {e}"));
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
    VitessDemoReport {
        vitess: "v0.24.4",
        mysql,
        cold: out
            .remove("cold")
            .unwrap_or_else(|| panic!("no cold report")),
        online: out
            .remove("online")
            .unwrap_or_else(|| panic!("no online report")),
        primary_checksum,
        gc_exit_code: gc.exit_code,
        snapshots_kept: kept,
        snapshots_deleted: deleted,
    }
}

/// A restore drill of `snapshot` as the drill Pod does it (docs/design.md §5.9), on MySQL
/// 9.7: a PVC restored from it, `vtsnap-restore` to `uid`, mysqld from the Vitess image on
/// the restored `my.cnf` with no network, no replication and no grant tables, and the real
/// checker through the socket. Returns the checker's verdict and the record a drill Job
/// would write.
pub async fn drill(lab: &VitessLab, snapshot: &str, uid: TabletUid) -> (CheckReport, DrillRecord) {
    drill_with(lab, snapshot, uid, |_| {}).await
}

/// [`drill`], with `before_start` given the drill's tablet directory
/// (`<volume>/vtdataroot/vt_<uid>`, the clone as `vtsnap-restore` left it) before mysqld
/// starts on it: a test damages the drill's copy there, never the snapshot or its source.
pub async fn drill_with(
    lab: &VitessLab,
    snapshot: &str,
    uid: TabletUid,
    before_start: impl FnOnce(&Path),
) -> (CheckReport, DrillRecord) {
    let api = vtsnap_core::reconcile::apis::volume_snapshots(&lab.cp.client(), lab.cp.namespace());
    let obj = api
        .get(snapshot)
        .await
        .unwrap_or_else(|e| panic!("get {snapshot}: {e}"));
    let s = VolumeSnapshot::read(&serde_json::to_value(obj).unwrap_or_default())
        .unwrap_or_else(|e| panic!("read {snapshot}: {e}"));
    let expect = crate::drill::expectation(&s);
    let started = Instant::now();
    let volume = lab
        .cp
        .restore_pvc(&format!("drill-{}-{}", uid.get(), snapshot.len()), snapshot)
        .await;
    let pvc_bound_ms = ms(started.elapsed());
    let restoring = Instant::now();
    vtsnap_restore::run(&vtsnap_restore::Options {
        vtdataroot: volume.join("vtdataroot"),
        tablet_uid: uid,
        server_id: None,
        dry_run: false,
    })
    .unwrap_or_else(|e| panic!("vtsnap-restore for the drill of {snapshot}: {e}"));
    let restore_ms = ms(restoring.elapsed());
    before_start(&volume.join("vtdataroot").join(uid.tablet_dir_name()));
    let socket_dir = volume.join("socket");
    give_to_vitess(&socket_dir);
    let opts = ProbeOptions {
        socket: socket_dir.join("mysql.sock"),
        user: "root".into(),
        ready_timeout: Duration::from_secs(300),
        table_budget: Duration::from_secs(120),
        sample_seed: 0,
        flavor: GtidFlavor::Mysql56,
    };
    // The checker starts beside mysqld, as the Pod's two containers do.
    let checker = tokio::spawn(async move { check::check(&opts, &expect).await });
    let cnf = format!("/vt/vtdataroot/{}/my.cnf", uid.tablet_dir_name());
    let server = Container::run(
        &format!("vtsnap-vt-{}-drill-{}", std::process::id(), uid.get()),
        IMAGE,
        &[
            Bind {
                host: volume.join("vtdataroot"),
                at: "/vt/vtdataroot",
                access: Access::ReadWrite,
            },
            Bind {
                host: socket_dir.clone(),
                at: "/vt/socket",
                access: Access::ReadWrite,
            },
        ],
        &[],
        &[
            "mysqld".into(),
            format!("--defaults-file={cnf}"),
            "--socket=/vt/socket/mysql.sock".into(),
            "--skip-networking".into(),
            "--skip-replica-start".into(),
            "--skip-grant-tables".into(),
        ],
    );
    crate::resources::container(server.name());
    // The checker's report, or mysqld's exit before it (as the drill Job ends on its
    // mysqld container's exit: jobs/drill/src/outcome.rs), whichever comes first.
    let mut checker = checker;
    let report = loop {
        tokio::select! {
            r = &mut checker => break r.unwrap_or_else(|e| panic!("the drill's checker: {e}")),
            () = tokio::time::sleep(Duration::from_millis(250)) => {
                if !server.running() {
                    checker.abort();
                    let why = format!("mysqld exited before the check was done: {}", server.logs(5));
                    break CheckReport { verdict: Verdict::not_ready(&why), mysqld_ready_ms: None };
                }
            }
        }
    };
    let rto = Rto {
        pvc_bound_ms,
        restore_ms,
        mysqld_ready_ms: report.mysqld_ready_ms.unwrap_or(0),
    };
    let of = s
        .drill_of()
        .unwrap_or_else(|| panic!("{snapshot} has no UID or cut for its record to name"));
    let now = k8s_openapi::jiff::Timestamp::now();
    let record = if report.verdict.passed {
        DrillRecord::passed(&of, now, rto, None)
    } else {
        DrillRecord::failed(
            &of,
            now,
            report.verdict.reason.as_deref().unwrap_or(""),
            Some(rto),
            None,
        )
    };
    lab.timeline.mark(format!(
        "drill: {snapshot} as {} on MySQL 9.7: {} (PVC bound {pvc_bound_ms} ms, restore {restore_ms} ms, mysqld ready {} ms)",
        uid.tablet_dir_name(),
        record.render(),
        rto.mysqld_ready_ms
    ));
    drop(server);
    (report, record)
}
