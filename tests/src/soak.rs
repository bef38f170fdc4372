//! Crash-consistency soak (`make soak-lab`): online snapshots, again and again, of a
//! replica applying multi-statement transactions (money moved between accounts, each move
//! also written to a ledger, one GTID per transaction). Each snapshot is provisioned as a
//! new tablet and, before it replicates anything, must show:
//! - InnoDB recovered (mysqld started on the crash image and `CHECK TABLE` finds every
//!   table sound);
//! - the money is all there (no half transaction survived);
//! - `gtid_binlog_pos` agrees with the data: the ledger holds exactly the transactions the
//!   binlog says were committed, with no gap;
//!
//! then catch up with the primary and match its checksums.

use std::time::{Duration, Instant};

use serde::Serialize;
use vtsnap_core::naming::TabletUid;

use crate::demo::take_snapshot;
use crate::provision::{self, ProvisionTimes, wait_for_gtid};
use crate::shard::{DATABASE, Lab, checksums};

pub const ACCOUNTS: u64 = 100;
pub const OPENING_BALANCE: u64 = 1_000;

#[derive(Debug, Clone, Serialize)]
pub struct SoakRound {
    pub round: usize,
    pub snapshot: String,
    pub restored_gtid: String,
    pub ledger_rows: u64,
    /// Transactions the restored binlog holds since the load began.
    pub binlog_transactions: u64,
    pub total_balance: u64,
    pub recovered: bool,
    pub money_conserved: bool,
    pub gtid_consistent: bool,
    pub checksum_match: bool,
    pub times: ProvisionTimes,
}

impl SoakRound {
    pub fn ok(&self) -> bool {
        self.recovered && self.money_conserved && self.gtid_consistent && self.checksum_match
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub rounds: Vec<SoakRound>,
}

impl SoakReport {
    pub fn all_ok(&self) -> bool {
        self.rounds.iter().all(SoakRound::ok)
    }

    /// `vtsnap-restore`'s time over the rounds, under the write load: p50, p99 and max in
    /// milliseconds (nearest rank); None without rounds.
    pub fn restore_ms(&self) -> Option<RestoreTimes> {
        let mut v: Vec<u64> = self.rounds.iter().map(|r| r.times.restore_ms).collect();
        v.sort_unstable();
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        (!v.is_empty()).then(|| RestoreTimes {
            p50: rank(0.50),
            p99: rank(0.99),
            max: v[v.len() - 1],
            n: v.len(),
        })
    }
}

/// See [`SoakReport::restore_ms`].
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct RestoreTimes {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    pub n: usize,
}

/// The sequence number of the last GTID of `pos` (`0-101-42` → 42); one domain here.
fn seq_no(pos: &str) -> u64 {
    pos.split(',')
        .filter_map(|g| g.rsplit('-').next()?.trim().parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

fn num(s: &str) -> u64 {
    s.trim().parse().unwrap_or(0)
}

/// The transactional load, as a shell loop printing SQL.
fn transfers(from: u64) -> String {
    format!(
        "i={from}; while :; do a=$((i % {ACCOUNTS} + 1)); b=$(((i * 7 + 3) % {ACCOUNTS} + 1)); k=$((i % 9 + 1)); \
         echo \"BEGIN; UPDATE {DATABASE}.accounts SET balance = balance - $k WHERE id = $a; \
         UPDATE {DATABASE}.accounts SET balance = balance + $k WHERE id = $b; \
         INSERT INTO {DATABASE}.ledger (n, a, b, k) VALUES ($i, $a, $b, $k); COMMIT;\"; i=$((i+1)); done"
    )
}

/// Runs rounds until `duration` has passed (at least `min_rounds`, at most `max_rounds`).
pub async fn run_soak(
    lab: &Lab,
    duration: Duration,
    min_rounds: usize,
    max_rounds: usize,
) -> SoakReport {
    let primary = lab.primary();
    primary
        .query(&format!(
            "CREATE TABLE {DATABASE}.accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB; \
             CREATE TABLE {DATABASE}.ledger (n BIGINT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL, k INT NOT NULL) ENGINE=InnoDB; \
             INSERT INTO {DATABASE}.accounts WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {ACCOUNTS}) SELECT n, {OPENING_BALANCE} FROM s"
        ))
        .await;
    // Every GTID after this one is one transfer.
    let base = seq_no(&primary.value("SELECT @@gtid_binlog_pos").await);
    let mut next = 1u64;
    let start = Instant::now();
    let mut rounds = Vec::new();
    while rounds.len() < max_rounds && (rounds.len() < min_rounds || start.elapsed() < duration) {
        let round = rounds.len() + 1;
        primary.start_load_script(&transfers(next)).await;
        lab.timeline
            .mark(format!("soak {round}: transfers running on the primary"));
        let s = take_snapshot(lab, true).await;
        let name = s.snapshot.clone().unwrap_or_default();
        let uid = TabletUid::new(300 + u32::try_from(round).unwrap_or(0));
        let mut r = provision::clone_and_start(lab, &name, uid).await;
        let db = r.db.clone();
        let ledger_rows = num(&db
            .value(&format!("SELECT COUNT(*) FROM {DATABASE}.ledger"))
            .await);
        let max_n = num(&db
            .value(&format!(
                "SELECT COALESCE(MAX(n), 0) FROM {DATABASE}.ledger"
            ))
            .await);
        let total_balance = num(&db
            .value(&format!("SELECT SUM(balance) FROM {DATABASE}.accounts"))
            .await);
        let binlog_transactions = seq_no(&r.restored_gtid).saturating_sub(base);
        // mysqld started on the crash image; InnoDB must also find its tables sound.
        let check = db
            .query(&format!(
                "CHECK TABLE {DATABASE}.accounts, {DATABASE}.ledger, {DATABASE}.t"
            ))
            .await;
        let recovered = !check.is_empty()
            && check
                .iter()
                .filter(|row| row.get(2).is_some_and(|t| t == "status"))
                .all(|row| row.get(3).is_some_and(|m| m == "OK"))
            && check
                .iter()
                .all(|row| row.get(2).is_none_or(|t| t != "error"));
        provision::catch_up(lab, &mut r).await;
        primary.stop_load().await;
        next = num(&primary
            .value(&format!(
                "SELECT COALESCE(MAX(n), 0) FROM {DATABASE}.ledger"
            ))
            .await)
            + 1;
        let final_pos = primary.value("SELECT @@gtid_binlog_pos").await;
        wait_for_gtid(&db, &final_pos, Duration::from_secs(600)).await;
        let checksum_match = checksums(&db).await == checksums(&primary).await;
        let result = SoakRound {
            round,
            snapshot: name,
            restored_gtid: r.restored_gtid.clone(),
            ledger_rows,
            binlog_transactions,
            total_balance,
            recovered,
            money_conserved: total_balance == ACCOUNTS * OPENING_BALANCE,
            gtid_consistent: ledger_rows == binlog_transactions && max_n == ledger_rows,
            checksum_match,
            times: r.times,
        };
        lab.timeline.mark(format!(
            "soak {round}: restored at {} with {ledger_rows} transfers (binlog says {binlog_transactions}), \
             balance {total_balance}, checksums {} → {}",
            result.restored_gtid,
            if checksum_match { "match" } else { "DIFFER" },
            if result.ok() { "ok" } else { "FAILED" }
        ));
        rounds.push(result);
    }
    SoakReport { rounds }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(restore_ms: u64) -> SoakRound {
        SoakRound {
            round: 0,
            snapshot: String::new(),
            restored_gtid: String::new(),
            ledger_rows: 0,
            binlog_transactions: 0,
            total_balance: 0,
            recovered: true,
            money_conserved: true,
            gtid_consistent: true,
            checksum_match: true,
            times: ProvisionTimes {
                restore_ms,
                ..ProvisionTimes::default()
            },
        }
    }

    #[test]
    fn restore_percentiles_are_nearest_rank() {
        assert_eq!(SoakReport { rounds: vec![] }.restore_ms(), None);
        let rounds = (1..=200).rev().map(round).collect();
        let t = SoakReport { rounds }.restore_ms().unwrap();
        assert_eq!((t.p50, t.p99, t.max, t.n), (100, 198, 200, 200));
        let one = SoakReport {
            rounds: vec![round(7)],
        };
        assert_eq!(
            one.restore_ms().map(|t| (t.p50, t.p99, t.max)),
            Some((7, 7, 7))
        );
    }

    #[test]
    fn the_sequence_number_is_the_last_field() {
        assert_eq!(seq_no("0-2549885007-6187"), 6187);
        assert_eq!(seq_no(""), 0);
        assert_eq!(seq_no("0-1-5,1-2-9"), 9);
    }
}
