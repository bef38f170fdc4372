//! A restore drill in the lab: what the drill Pod does, with the lab's pieces standing in
//! for the Pod (docs/design.md §5.9). The PVC is a real clone of the snapshot (the CSI
//! driver), `vtsnap-restore` moves it to the drill's UID, mysqld starts from the restored
//! `my.cnf` with no network and no grant tables, and the real checker (`vtsnap-drill
//! check`'s library) judges it through the socket. [`damaged_cold_snapshot`] makes a
//! snapshot of damaged data for a drill to catch: the damage is done to the source
//! tablet's files, never to the drill's copy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vtsnap_core::coverage::Exactness;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::snapshot::{DrillRecord, GtidFlavor, Rto, VolumeSnapshot};
use vtsnap_drill::check::{self, CheckReport};
use vtsnap_drill::decide::verdict::Expectation;
use vtsnap_drill::observe::server::ProbeOptions;
use vtsnap_testkit::mariadb::MariaDb;

use crate::demo::take_snapshot;
use crate::provision::{Restored, clone_and_restore};
use crate::resources;
use crate::shard::Lab;

/// What a drill's mysqld runs with, whatever its `my.cnf` says: no TCP listener, no
/// replication, no grant tables (only the Pod's containers share the socket).
pub const DRILL_SERVER_ARGS: &str = "--skip-networking --skip-slave-start --skip-grant-tables";

/// A drill's outcome in the lab.
#[derive(Debug)]
pub struct LabDrill {
    pub report: CheckReport,
    pub rto: Rto,
    /// The record the drill Job would write on the snapshot.
    pub record: DrillRecord,
    /// The drill's server (removed when dropped).
    pub server: MariaDb,
}

/// The snapshot as the API server has it now.
pub async fn read_snapshot(lab: &Lab, name: &str) -> VolumeSnapshot {
    let api = vtsnap_core::reconcile::apis::volume_snapshots(&lab.cp.client(), lab.cp.namespace());
    let obj = api.get(name).await.unwrap();
    VolumeSnapshot::read(&serde_json::to_value(obj).unwrap()).unwrap()
}

/// The drill's expectation of a snapshot: its exact position (cold) or lower bound.
pub fn expectation(s: &VolumeSnapshot) -> Expectation {
    match (&s.gtid_executed, &s.gtid_lower_bound) {
        (Some(p), _) => Expectation::parse(p, Exactness::Exact).unwrap(),
        (None, Some(p)) => Expectation::parse(p, Exactness::LowerBound).unwrap(),
        (None, None) => panic!("{} records no position", s.name),
    }
}

/// A cold snapshot whose source was damaged before the cut, and what was damaged.
#[derive(Debug)]
pub struct DamagedSnapshot {
    pub snapshot: String,
    /// The snapshot's target, the tablet whose data was damaged.
    pub target: String,
    /// The tablespace file truncated, on the target's own volume.
    pub file: PathBuf,
    /// The target's mysqld had no `mysql.pid` when its file was truncated: it was down.
    pub mysqld_was_down: bool,
}

/// What the hook at the cut did: the file truncated and whether mysqld was down, or why
/// it could not.
type AtCut = Result<(PathBuf, bool), String>;

/// Takes a cold snapshot (the real `vtsnap-snapshot run`) of a tablet whose
/// `<schema>.<table>` tablespace is truncated to its first page between the job's stop of
/// mysqld and the cut: the image holds damaged data as the tablet's disk did. The target
/// keeps the damage (its mysqld restarts on it at the release), so take this last.
pub async fn damaged_cold_snapshot(
    lab: &Lab,
    schema: &'static str,
    table: &'static str,
) -> DamagedSnapshot {
    // The hook runs in the CSI driver's task: it records, the test panics.
    let dirs: BTreeMap<String, String> = lab
        .tablets
        .values()
        .map(|t| (t.pod.clone(), t.alias.uid.tablet_dir_name()))
        .collect();
    let done: Arc<Mutex<Option<AtCut>>> = Arc::default();
    let (record, tl) = (done.clone(), lab.timeline.clone());
    lab.cp.before_next_cut(move |pvc, volume| {
        let r = match dirs.get(pvc) {
            Some(dir) => {
                let tablet = volume.join("vtdataroot").join(dir);
                let down = !tablet.join("mysql.pid").exists();
                truncate_tablespace(&tablet, schema, table).map(|f| (f, down))
            }
            None => Err(format!("PVC {pvc} is no lab tablet's")),
        };
        if let Ok((f, down)) = &r {
            tl.mark(format!(
                "damage: {} on PVC {pvc} truncated to one page before the cut (mysqld {})",
                f.display(),
                if *down { "down" } else { "RUNNING" }
            ));
        }
        *record.lock().unwrap() = Some(r);
    });
    let s = take_snapshot(lab, false).await;
    let (snapshot, target) = (s.snapshot.unwrap(), s.target.unwrap());
    let (file, mysqld_was_down) = done
        .lock()
        .unwrap()
        .take()
        .unwrap_or_else(|| panic!("{snapshot} was cut without the damage"))
        .unwrap_or_else(|e| panic!("damaging the source of {snapshot}: {e}"));
    let (_, t) = lab.tablet_by_alias(&target);
    assert!(
        file.starts_with(&t.mount),
        "{} is not on the volume of {target}, the target",
        file.display()
    );
    DamagedSnapshot {
        snapshot,
        target,
        file,
        mysqld_was_down,
    }
}

/// Truncates the tablespace file of `<schema>.<table>` under `tablet_dir` to its first
/// page; returns the file.
fn truncate_tablespace(tablet_dir: &Path, schema: &str, table: &str) -> Result<PathBuf, String> {
    let file = tablet_dir
        .join("data")
        .join(schema)
        .join(format!("{table}.ibd"));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    // One 16 KiB page: the header says the file is longer than it is.
    f.set_len(16 * 1024)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(file)
}

/// Drills `snapshot` as tablet `uid`: clone, restore, start, check. The PVC is left to
/// the lab's cleanup.
pub async fn drill(lab: &Lab, snapshot: &str, uid: TabletUid) -> LabDrill {
    let s = read_snapshot(lab, snapshot).await;
    let expect = expectation(&s);
    let pvc = format!("drill-{}-{}", uid.get(), snapshot.len());
    let Restored {
        volume,
        clone_ms: pvc_bound_ms,
        restore_ms,
        ..
    } = clone_and_restore(lab, &pvc, snapshot, uid).await;
    let socket_dir = volume.join("socket");
    std::fs::create_dir_all(&socket_dir).unwrap();
    let opts = ProbeOptions {
        socket: socket_dir.join("mysql.sock"),
        user: "root".into(),
        ready_timeout: Duration::from_secs(300),
        table_budget: Duration::from_secs(120),
        sample_seed: 0,
        flavor: GtidFlavor::Mariadb,
    };
    // The checker starts beside mysqld, as the Pod's two containers do.
    let checker = tokio::spawn(async move { check::check(&opts, &expect).await });
    let db = MariaDb::start_supervised_with(
        &volume.join("vtdataroot"),
        &socket_dir,
        uid,
        false,
        DRILL_SERVER_ARGS,
    )
    .await;
    resources::container(db.id());
    let report = checker.await.unwrap();
    let rto = Rto {
        pvc_bound_ms,
        restore_ms,
        mysqld_ready_ms: report.mysqld_ready_ms.unwrap_or(0),
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    let of = s
        .drill_of()
        .unwrap_or_else(|| panic!("{snapshot} has no UID or cut for its record to name"));
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
        "drill: {snapshot} as {}: {} (PVC bound {pvc_bound_ms} ms, restore {restore_ms} ms, mysqld ready {} ms)",
        uid.tablet_dir_name(),
        record.render(),
        rto.mysqld_ready_ms
    ));
    LabDrill {
        report,
        rto,
        record,
        server: db,
    }
}
