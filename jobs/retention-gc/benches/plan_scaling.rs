//! GC planning cost at 1k, 10k and 100k snapshots (across n/10 shards), from a
//! `kubectl get -o json` dump and from the (fake) API through a real kube client. Each size
//! runs in a child process, so CPU time and peak RSS are its own. Prints a Markdown table;
//! checks the shape, not the clock: 10× the snapshots must cost less than 20× the CPU
//! (O(n log n)).
//!
//! `cargo bench -p vtsnap-gc --bench plan_scaling [-- --quick]`

// A measurement program: a failed unwrap ends it with a message, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, ExitCode};

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_gc::decide::plan;
use vtsnap_gc::observe::Inventory;

const NOW: i64 = 1_800_000_000;

fn objects(n: usize) -> Vec<Value> {
    let items: Vec<Value> = (0..n)
        .map(|i| {
            let shard = format!("{:04x}-x", i % (n / 10).max(1));
            let created = Timestamp::from_second(NOW - i64::try_from(i).unwrap() * 60).unwrap().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                "metadata": {"name": format!("s{i:07}"), "namespace": "vitess", "creationTimestamp": created, "resourceVersion": "1",
                    "labels": {"app.kubernetes.io/managed-by": "vtsnap", "vtsnap.io/cluster": "example", "vtsnap.io/keyspace": "commerce",
                        "vtsnap.io/shard": shard, "vtsnap.io/phase": "ready"}},
                "spec": {"source": {"persistentVolumeClaimName": "pvc"}},
                "status": {"boundVolumeSnapshotContentName": "c", "creationTime": created, "readyToUse": true}})
        })
        .collect();
    items
}

fn config() -> Config {
    Config::from_yaml(
        "clusters:\n- name: example\n  namespace: vitess\n  retention: {maxCount: 7}\n",
    )
    .unwrap()
}

/// `(user+system CPU seconds, peak RSS in MiB)` of this process. The peak is `VmHWM`:
/// `ru_maxrss` survives fork+exec on Linux and would report the parent's peak.
fn usage() -> (f64, f64) {
    let r = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).unwrap();
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hwm_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    (t(r.user_time()) + t(r.system_time()), hwm_kib / 1024.0)
}

/// One measurement, in this (child) process: prints `cpu_seconds peak_rss_mib deleted`.
fn one(n: usize, source: &str) {
    let now = Timestamp::from_second(NOW).unwrap();
    if source == "dump" {
        // The parent wrote the dump: this process only reads and plans, as `vtsnap-gc plan` does.
        let path = std::env::var("VTSNAP_BENCH_DUMP").unwrap();
        let (cpu_a, _) = usage();
        let text = std::fs::read(&path).unwrap();
        let inv = Inventory::from_dump_text(&text, now).unwrap();
        drop(text);
        let p = plan(&config(), &inv, now, None);
        let (cpu_b, rss) = usage();
        println!("{} {} {}", cpu_b - cpu_a, rss, p.delete.len());
        return;
    }
    // Through a real kube client; the fake API server's own copy of the objects lives in
    // this process too, so the RSS here overstates what vtsnap-gc needs.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let kube = vtsnap_testkit::fake_kube::FakeKube::new();
        for it in objects(n) {
            kube.put_json("snapshot.storage.k8s.io", "volumesnapshots", it);
        }
        let (cpu_a, base) = usage();
        let opts = vtsnap_gc::act::GcOptions {
            dry_run: true,
            only_cluster: None,
            node_timeout: std::time::Duration::from_secs(1),
        };
        let r = vtsnap_gc::act::run(&config(), &opts, kube.client()).await;
        let (cpu_b, rss) = usage();
        // The fake server's copy is the baseline: report what the GC added on top of it.
        println!(
            "{} {} {}",
            cpu_b - cpu_a,
            rss - base,
            r.run.plan.delete.len()
        );
    });
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--one") {
        one(args[i + 1].parse().unwrap(), &args[i + 2]);
        return ExitCode::SUCCESS;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    println!("| snapshots | shards | source | CPU | peak RSS | deleted |");
    println!("|---|---|---|---|---|---|");
    let mut cpu = std::collections::BTreeMap::new();
    let dir = tempfile::tempdir().unwrap();
    for source in ["dump", "api"] {
        for &n in sizes {
            let dump = dir.path().join(format!("dump-{n}.json"));
            if source == "dump" {
                std::fs::write(
                    &dump,
                    serde_json::to_vec(&json!({"kind": "List", "items": objects(n)})).unwrap(),
                )
                .unwrap();
            }
            let out = Command::new(&args[0])
                .args(["--one", &n.to_string(), source])
                .env("VTSNAP_BENCH_DUMP", &dump)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let line = String::from_utf8_lossy(&out.stdout);
            let f: Vec<f64> = line
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            println!(
                "| {n} | {} | {source} | {:.3} s | {:.0} MiB | {} |",
                n / 10,
                f[0],
                f[1],
                f[2]
            );
            cpu.insert((source, n), f[0]);
        }
    }
    let mut ok = true;
    for source in ["dump", "api"] {
        let (a, b) = (cpu[&(source, 1_000)].max(0.001), cpu[&(source, 10_000)]);
        let ratio = b / a;
        println!("scaling ({source}): 10k / 1k = {ratio:.1} (limit 20)");
        ok &= ratio <= 20.0;
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
