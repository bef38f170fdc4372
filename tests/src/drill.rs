//! A restore drill in the lab: what the drill Pod does, with the lab's pieces standing in
//! for the Pod (docs/design.md §5.9). The PVC is a real clone of the snapshot (the CSI
//! driver), `vtsnap-restore` moves it to the drill's UID, mysqld starts from the restored
//! `my.cnf` with no network and no grant tables, and the real checker (`vtsnap-drill
//! check`'s library) judges it through the socket.

use std::path::Path;
use std::time::Duration;

use vtsnap_core::coverage::Exactness;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::snapshot::{DrillRecord, GtidFlavor, Rto, VolumeSnapshot};
use vtsnap_drill::check::{self, CheckReport, Expectation, ProbeOptions};
use vtsnap_testkit::mariadb::MariaDb;

use crate::provision::{Restored, clone_and_restore};
use crate::resources;
use crate::shard::Lab;

/// What a drill's mysqld runs with, whatever its `my.cnf` says: no TCP listener, no
/// replication, no grant tables (only the Pod's containers share the socket).
pub const DRILL_SERVER_ARGS: &str = "--skip-networking --skip-slave-start --skip-grant-tables";

/// Damage done to the restored copy before mysqld starts, standing in for a snapshot
/// taken of damaged data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    None,
    /// The tablespace file of `<schema>.<table>` cut to its first page.
    TruncatedTablespace {
        schema: &'static str,
        table: &'static str,
    },
}

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
    let api = vtsnap_core::snapshot::api(&lab.cp.client(), lab.cp.namespace());
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

fn damage(tablet_dir: &Path, d: Damage) {
    let Damage::TruncatedTablespace { schema, table } = d else {
        return;
    };
    let file = tablet_dir
        .join("data")
        .join(schema)
        .join(format!("{table}.ibd"));
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    // One 16 KiB page: the header says the file is longer than it is.
    f.set_len(16 * 1024).unwrap();
}

/// Drills `snapshot` as tablet `uid`: clone, restore, start, check. The PVC is left to
/// the lab's cleanup.
pub async fn drill(lab: &Lab, snapshot: &str, uid: TabletUid, d: Damage) -> LabDrill {
    let s = read_snapshot(lab, snapshot).await;
    let expect = expectation(&s);
    let pvc = format!("drill-{}-{}", uid.get(), snapshot.len());
    let Restored {
        volume,
        clone_ms: pvc_bound_ms,
        restore_ms,
        ..
    } = clone_and_restore(lab, &pvc, snapshot, uid).await;
    damage(&volume.join("vtdataroot").join(uid.tablet_dir_name()), d);
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
    let record = if report.verdict.passed {
        DrillRecord::passed(now, rto, None)
    } else {
        DrillRecord::failed(
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
