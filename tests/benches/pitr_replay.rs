//! Recovery time against replayed binlog size (docs/pitr.md §7), on the real Vitess lab:
//! per size, a cold snapshot, that many MiB of row events written (1 KiB rows, random
//! bytes: they do not compress away), one incremental backup from the snapshot's set, and
//! a recovery to the primary's set — the snapshot restored and its mysqld up, the binlogs
//! fetched and checked, the script's replay and checks — each part timed.
//!
//! The shape it checks, never a wall-clock time: the replay's throughput at the larger
//! size is at least half of the smaller's (recovery time grows about linearly in what is
//! replayed, not faster). The restore's time is reported, not judged here (the restore's
//! own benchmark, `restore_scaling`, shows it flat in the data).
//!
//! `make bench-pitr` (root, Podman, the Vitess image: `make vitess-images`);
//! `VTSNAP_BENCH_PITR_MIB=a,b` changes the sizes. It prints one JSON line per size and
//! writes them to `target/bench-pitr.json`.

// A measurement program: a failed unwrap ends it with a message, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use vtsnap_core::coverage::Exactness;
use vtsnap_core::pitr::chain::{Base, Target};
use vtsnap_lab::vitess_cut::{cold_cut, shard_on_btrfs};
use vtsnap_lab::vitess_pitr::{Recovered, gtid, incremental_backup, observe, recover};
use vtsnap_testkit::vitess::{DATABASE, Orchestrator, VitessShard};

fn sizes() -> Vec<u64> {
    std::env::var("VTSNAP_BENCH_PITR_MIB").map_or_else(
        |_| vec![16, 64],
        |s| s.split(',').map(|x| x.trim().parse().unwrap()).collect(),
    )
}

/// About `mib` MiB of row events: 1,000 rows of 1 KiB per statement.
async fn write(shard: &VitessShard, first_id: u64, mib: u64) {
    for batch in 0..mib {
        let lo = first_id + batch * 1000;
        shard
            .primary()
            .must_sql(&format!(
                "INSERT INTO {DATABASE}.big (id, v) \
                 WITH RECURSIVE n(i) AS (SELECT {lo} UNION ALL SELECT i + 1 FROM n WHERE i < {}) \
                 SELECT i, RANDOM_BYTES(1024) FROM n",
                lo + 999
            ))
            .await;
    }
}

fn throughput(r: &Recovered) -> f64 {
    r.bytes as f64 / r.replay.as_secs_f64().max(1e-3)
}

async fn bench(sizes: &[u64]) -> Vec<(u64, Recovered)> {
    let (mut shard, vol) = shard_on_btrfs(Orchestrator::Off).await;
    shard
        .primary()
        .must_sql(&format!(
            "CREATE TABLE {DATABASE}.big (id BIGINT PRIMARY KEY, v VARBINARY(1024))"
        ))
        .await;
    let mut out = Vec::new();
    for (n, &mib) in sizes.iter().enumerate() {
        let name = format!("snap-{mib}");
        let base = Base {
            name: name.clone(),
            gtid: gtid(&cold_cut(&shard, &vol, 102, &name).await),
            exactness: Exactness::Exact,
            cut: Timestamp::now(),
        };
        write(&shard, (n as u64) * 1_000_000, mib).await;
        incremental_backup(&shard, &format!("MySQL56/{}", base.gtid)).await;
        let end = gtid(&shard.primary().gtid_executed().await);
        let increments = observe(&shard).await.increments;
        let r = recover(
            &mut shard,
            &vol,
            201 + n as u32,
            &base,
            &increments,
            &Target::Through(end.clone()),
        )
        .await;
        assert_eq!(r.after, end);
        out.push((mib, r));
    }
    out
}

fn main() {
    // `cargo bench` passes `--bench`, `cargo test` nothing; both run the same check.
    let sizes = sizes();
    assert_eq!(sizes.len(), 2, "two sizes, the smaller first: {sizes:?}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let results = rt.block_on(bench(&sizes));
    let mut lines = Vec::new();
    for (mib, r) in &results {
        let line = json!({
            "mib_written": mib,
            "bytes_replayed": r.bytes,
            "restore_ms": r.restore.as_millis() as u64,
            "fetch_ms": r.fetch.as_millis() as u64,
            "replay_ms": r.replay.as_millis() as u64,
            "rto_ms": (r.restore + r.fetch + r.replay).as_millis() as u64,
            "replay_mib_per_s": throughput(r) / (1 << 20) as f64,
        });
        println!("{line}");
        lines.push(line.to_string());
    }
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-pitr.json");
    std::fs::write(&target, lines.join("\n") + "\n").unwrap();
    let (small, large) = (&results[0].1, &results[1].1);
    assert!(
        large.bytes > small.bytes,
        "the larger size replays more: {} then {}",
        small.bytes,
        large.bytes
    );
    assert!(
        throughput(large) >= 0.5 * throughput(small),
        "replay throughput fell by more than half: {:.0} then {:.0} bytes/s",
        throughput(small),
        throughput(large)
    );
}
