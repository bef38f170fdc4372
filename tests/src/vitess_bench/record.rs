//! The raw record of `make bench-vitess`: what each run measured, written as JSON into
//! docs/benchmarks.md and read back from there to render the page again.

use serde::{Deserialize, Serialize};
use vtsnap_snapshot::run::StepTiming;

use crate::bench::median;

/// One step of `vtsnap-snapshot run` and its time (its `step_timings`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Step {
    pub step: String,
    pub ms: u64,
}

impl From<&StepTiming> for Step {
    fn from(s: &StepTiming) -> Self {
        Self {
            step: s.step.clone(),
            ms: s.ms,
        }
    }
}

/// One way of backing up the replica.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Backup {
    /// The replica's time not of type REPLICA (vtctld's record, sampled every 50 ms):
    /// DRAINED in vtsnap's cold fence, BACKUP under the builtin engine.
    pub out_of_service_ms: u64,
    /// From the command's start to its end (for vtsnap: the snapshot ready to use).
    pub total_ms: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
}

/// The cold snapshot's fence window, step by step, with mysqld's own part of it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ColdWindow {
    pub window_ms: u64,
    pub steps: Vec<Step>,
    /// From mysqld's error log: the shutdown request to "Shutdown complete", and the
    /// server's start to "ready for connections".
    pub mysqld_shutdown_ms: u64,
    pub mysqld_start_ms: u64,
}

/// The cold run's steps in the breakdown table (column, step-name prefix), in order.
/// Fence and probe come before the window; the rest are inside it.
pub const WINDOW_STEPS: [(&str, &str); 10] = [
    ("drain", "tablet DRAINED"),
    ("stop replication", "replication stopped"),
    ("position", "position recorded"),
    ("shutdown", "mysqld stopped"),
    ("hold", "mysqld held"),
    ("create", "VolumeSnapshot"),
    ("cut", "snapshot cut"),
    ("release (start)", "node released"),
    ("replication, type", "tablet put back"),
    ("unfence", "fence deleted"),
];

impl ColdWindow {
    /// The time of the steps whose names start with `prefix`.
    pub fn step_ms(&self, prefix: &str) -> u64 {
        self.steps
            .iter()
            .filter(|s| s.step.starts_with(prefix))
            .map(|s| s.ms)
            .sum()
    }

    /// The window less mysqld's own shutdown and start and less the driver's cut: what
    /// vtsnap and the RPCs it makes add.
    pub fn overhead_ms(&self) -> u64 {
        self.window_ms.saturating_sub(
            self.mysqld_shutdown_ms + self.mysqld_start_ms + self.step_ms("snapshot cut"),
        )
    }

    /// Each window step's time less what of it is mysqld's own or the driver's.
    pub fn overhead_by_step(&self) -> Vec<(&'static str, u64)> {
        WINDOW_STEPS
            .iter()
            .map(|(column, prefix)| {
                let own = match *prefix {
                    "mysqld stopped" => self.mysqld_shutdown_ms,
                    "node released" => self.mysqld_start_ms,
                    "snapshot cut" => self.step_ms(prefix),
                    _ => 0,
                };
                (*column, self.step_ms(prefix).saturating_sub(own))
            })
            .collect()
    }
}

/// mysqlctld's `Shutdown` and `Start` called directly (no vtsnap between), on a
/// replica: what Vitess's own path (mysqlctld, `mysqladmin`, `mysqld_safe`, their polls)
/// adds to mysqld's own shutdown and start.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MysqlctldDirect {
    /// The `Shutdown{wait_for_mysqld}` call, sent to replied.
    pub shutdown_call_ms: u64,
    /// The `Start` call sent to mysqld answering on its socket (as the node helper waits).
    pub start_call_ms: u64,
    /// mysqld's own, from its error log, for the same restart.
    pub mysqld_shutdown_ms: u64,
    pub mysqld_start_ms: u64,
}

impl MysqlctldDirect {
    /// What mysqlctld's shutdown path adds to mysqld's own.
    pub fn shutdown_excess_ms(&self) -> u64 {
        self.shutdown_call_ms
            .saturating_sub(self.mysqld_shutdown_ms)
    }

    /// What mysqlctld's start path (with `mysqld_safe`) adds to mysqld's own.
    pub fn start_excess_ms(&self) -> u64 {
        self.start_call_ms.saturating_sub(self.mysqld_start_ms)
    }
}

/// One phase of provisioning a replica.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Phase {
    pub phase: String,
    pub ms: u64,
}

/// A new replica, from nothing to serving and caught up with the primary.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Provisioned {
    pub phases: Vec<Phase>,
    pub read_bytes: u64,
    pub written_bytes: u64,
}

impl Provisioned {
    pub fn total_ms(&self) -> u64 {
        self.phases.iter().map(|p| p.ms).sum()
    }
}

/// One run at one size: the three backups, then the three provisionings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VitessRun {
    pub cold: Backup,
    pub cold_window: ColdWindow,
    pub online: Backup,
    pub builtin: Backup,
    /// The builtin backup's size in the file backup storage (compressed).
    pub builtin_backup_bytes: u64,
    pub vtsnap: Provisioned,
    pub restore: Provisioned,
    pub clone: Provisioned,
    /// Measured on the replica provisioned from the snapshot, before it is removed.
    pub mysqlctld: MysqlctldDirect,
}

impl VitessRun {
    /// Builtin backup's time out of service over the cold snapshot's.
    pub fn backup_ratio(&self) -> f64 {
        ratio(self.builtin.out_of_service_ms, self.cold.out_of_service_ms)
    }

    /// Provisioning from the builtin backup over provisioning from a snapshot.
    pub fn restore_ratio(&self) -> f64 {
        ratio(self.restore.total_ms(), self.vtsnap.total_ms())
    }

    /// The cold window's overhead less what mysqlctld's own shutdown and start paths add
    /// (measured directly in the same run): vtsnap's hand-offs, vtctld's and vttablet's
    /// RPCs, the hold and the VolumeSnapshot's creation.
    pub fn vtsnap_own_ms(&self) -> u64 {
        self.cold_window
            .overhead_ms()
            .saturating_sub(self.mysqlctld.shutdown_excess_ms() + self.mysqlctld.start_excess_ms())
    }

    /// Provisioning by CLONE over provisioning from a snapshot.
    pub fn clone_ratio(&self) -> f64 {
        ratio(self.clone.total_ms(), self.vtsnap.total_ms())
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    a as f64 / b.max(1) as f64
}

/// Every run at one size.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SizeRecord {
    pub requested_gib: f64,
    pub rows: u64,
    /// The generated table's file on the replica.
    pub table_mib: u64,
    /// Seeding the data and waiting for the replicas.
    pub seed_s: f64,
    /// Every timed phase began with the page cache dropped.
    pub cold_caches: bool,
    /// Inserts of the write load that failed and were tried again.
    #[serde(default)]
    pub load_failures: u64,
    /// Times the primary's mysqld died and `mysqld_safe` restarted it.
    #[serde(default)]
    pub primary_restarts: u64,
    pub runs: Vec<VitessRun>,
}

/// A size that was not measured, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SkippedSize {
    pub requested_gib: f64,
    pub needed_gib: f64,
    pub free_gib: f64,
}

/// The whole benchmark.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BenchRecord {
    pub machine: String,
    pub vitess: String,
    pub mysql: String,
    pub runs_per_size: usize,
    /// VTOrc's `--topo-information-refresh-duration`.
    #[serde(default)]
    pub vtorc_refresh_ms: u64,
    pub sizes: Vec<SizeRecord>,
    pub skipped: Vec<SkippedSize>,
    pub total_s: f64,
}

impl SizeRecord {
    /// Median over runs of `f`.
    pub fn median(&self, f: impl Fn(&VitessRun) -> f64) -> f64 {
        median(self.runs.iter().map(f).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(step: &str, ms: u64) -> Step {
        Step {
            step: step.into(),
            ms,
        }
    }

    fn window() -> ColdWindow {
        ColdWindow {
            window_ms: 2000,
            steps: vec![
                step("fence acquired", 3),
                step("tablet DRAINED", 20),
                step("replication stopped", 30),
                step("mysqld stopped", 500),
                step("VolumeSnapshot a-b created", 5),
                step("snapshot cut", 60),
                step("node released", 1300),
                step("tablet put back", 85),
            ],
            mysqld_shutdown_ms: 450,
            mysqld_start_ms: 1250,
        }
    }

    #[test]
    fn the_overhead_is_the_window_less_mysqld_and_the_cut() {
        assert_eq!(window().overhead_ms(), 2000 - 450 - 1250 - 60);
        let by_step = window().overhead_by_step();
        let get = |c: &str| by_step.iter().find(|(k, _)| *k == c).unwrap().1;
        assert_eq!(get("shutdown"), 50);
        assert_eq!(get("release (start)"), 50);
        assert_eq!(get("cut"), 0);
        assert_eq!(get("drain"), 20);
        assert_eq!(get("create"), 5);
        assert_eq!(get("hold"), 0);
    }

    #[test]
    fn ratios_are_peer_over_vtsnap_and_never_divide_by_zero() {
        let p = |ms| Provisioned {
            phases: vec![Phase {
                phase: "x".into(),
                ms,
            }],
            ..Provisioned::default()
        };
        let r = VitessRun {
            cold: Backup {
                out_of_service_ms: 0,
                ..Backup::default()
            },
            builtin: Backup {
                out_of_service_ms: 900,
                ..Backup::default()
            },
            vtsnap: p(10),
            restore: p(50),
            clone: p(25),
            ..VitessRun::default()
        };
        assert!((r.backup_ratio() - 900.0).abs() < 1e-9);
        assert!((r.restore_ratio() - 5.0).abs() < 1e-9);
        assert!((r.clone_ratio() - 2.5).abs() < 1e-9);
    }

    #[test]
    fn vtsnaps_own_part_is_the_overhead_less_mysqlctlds_excess() {
        let r = VitessRun {
            cold_window: window(),
            mysqlctld: MysqlctldDirect {
                shutdown_call_ms: 480,
                start_call_ms: 1290,
                mysqld_shutdown_ms: 450,
                mysqld_start_ms: 1250,
            },
            ..VitessRun::default()
        };
        assert_eq!(r.mysqlctld.shutdown_excess_ms(), 30);
        assert_eq!(r.mysqlctld.start_excess_ms(), 40);
        assert_eq!(r.vtsnap_own_ms(), 240 - 30 - 40);
    }

    #[test]
    fn the_record_reads_back_what_it_wrote() {
        let rec = BenchRecord {
            machine: "m".into(),
            sizes: vec![SizeRecord {
                requested_gib: 1.0,
                runs: vec![VitessRun {
                    cold_window: window(),
                    ..VitessRun::default()
                }],
                ..SizeRecord::default()
            }],
            ..BenchRecord::default()
        };
        let text = serde_json::to_string(&rec).unwrap();
        let back: BenchRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, rec);
    }
}
