//! docs/design.md §8's start-up and footprint targets, measured on the release binaries:
//! - each program's start to its first API request (target ≤ 100 ms): the process is
//!   spawned with a kubeconfig pointing at the test kit's in-memory API server (a fake,
//!   over real HTTP on loopback), and the first request it makes is timestamped there;
//! - `vtsnap-node run`'s resident memory once idle, its lease watch established
//!   (target ≤ 20 MiB).
//!
//! Prints Markdown tables; asserts nothing about the clock (the machines are shared).
//! The binaries come from `VTSNAP_BIN_DIR`, else `target/release` (`make bench-startup`
//! builds them first).
//!
//! `cargo bench -p vtsnap-lab --bench startup [-- --quick]`

// A measurement program: a failed unwrap ends it with a message, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::https::TestCert;

fn bin_dir() -> PathBuf {
    std::env::var_os("VTSNAP_BIN_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release"),
        PathBuf::from,
    )
}

fn kubeconfig(dir: &Path, url: &str) -> PathBuf {
    let p = dir.join("kubeconfig");
    std::fs::write(
        &p,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n\
             clusters: [{{name: fake, cluster: {{server: \"{url}\"}}}}]\n\
             users: [{{name: nobody, user: {{}}}}]\n\
             contexts: [{{name: fake, context: {{cluster: fake, user: nobody}}}}]\n"
        ),
    )
    .unwrap();
    p
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Resident and peak memory of a process, from `/proc/<pid>/status`, in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 3 } else { 15 };
    let bins = bin_dir();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "clusters:\n- name: example\n  namespace: vitess\n").unwrap();
    let (cert, key) = TestCert::new(&["localhost"]).write(dir.path());
    let state = dir.path().join("state");
    let kubelet = dir.path().join("kubelet");
    let cfg = config.to_string_lossy().into_owned();
    let (cert, key) = (
        cert.to_string_lossy().into_owned(),
        key.to_string_lossy().into_owned(),
    );
    let (state, kubelet) = (
        state.to_string_lossy().into_owned(),
        kubelet.to_string_lossy().into_owned(),
    );
    let programs: Vec<(&str, Vec<&str>)> = vec![
        (
            "vtsnap-snapshot",
            vec![
                "run",
                "--config",
                &cfg,
                "--cluster",
                "example",
                "--keyspace",
                "commerce",
                "--shard",
                "-",
            ],
        ),
        ("vtsnap-gc", vec!["run", "--config", &cfg]),
        ("vtsnap-vtbackup-storage", vec!["run", "--config", &cfg]),
        (
            "vtsnap-admission",
            vec![
                "serve",
                "--config",
                &cfg,
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                &cert,
                "--tls-key",
                &key,
                "--restore-image",
                "vtsnap/vtsnap-restore:0.1.0",
            ],
        ),
        (
            "vtsnap-node",
            vec![
                "run",
                "--node-name",
                "node-a",
                "--state-dir",
                &state,
                "--kubelet-dir",
                &kubelet,
                "--listen",
                "127.0.0.1:0",
            ],
        ),
    ];

    println!("| program | runs | start → first API request p50 | p90 | max |");
    println!("|---|---:|---:|---:|---:|");
    for (name, args) in &programs {
        let exe = bins.join(name);
        assert!(
            exe.is_file(),
            "{} is not built (make bench-startup builds it)",
            exe.display()
        );
        let mut took = Vec::new();
        for _ in 0..runs {
            let kube = FakeKube::new();
            let first: Arc<Mutex<Option<Instant>>> = Arc::default();
            let f = first.clone();
            kube.observe(
                |_| true,
                move |_, _| {
                    f.lock().unwrap().get_or_insert_with(Instant::now);
                },
            );
            let front = kube.serve_http().await;
            let kc = kubeconfig(dir.path(), &front.url());
            let spawned = Instant::now();
            let _child = Killed(
                Command::new(&exe)
                    .args(args)
                    .env("KUBECONFIG", &kc)
                    .env_remove("KUBERNETES_SERVICE_HOST")
                    .env("VTSNAP_LOG", "warn")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
            let limit = spawned + Duration::from_secs(10);
            let at = loop {
                if let Some(t) = *first.lock().unwrap() {
                    break t;
                }
                assert!(
                    Instant::now() < limit,
                    "{name} made no API request within 10 s"
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            };
            took.push(at - spawned);
        }
        took.sort();
        println!(
            "| `{name}` | {runs} | {} | {} | {} |",
            ms(percentile(&took, 0.5)),
            ms(percentile(&took, 0.9)),
            ms(took[took.len() - 1])
        );
    }

    // The node helper idle: its watch established, nothing to do.
    let kube = FakeKube::new();
    let front = kube.serve_http().await;
    let kc = kubeconfig(dir.path(), &front.url());
    let (_, node_args) = programs.last().unwrap();
    let child = Killed(
        Command::new(bins.join("vtsnap-node"))
            .args(node_args)
            .env("KUBECONFIG", &kc)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("VTSNAP_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let idle = if quick { 2 } else { 10 };
    tokio::time::sleep(Duration::from_secs(idle)).await;
    let (rss, peak) = rss_kib(child.0.id());
    println!();
    println!("| `vtsnap-node run`, idle {idle} s | resident | peak resident |");
    println!("|---|---:|---:|");
    println!(
        "| watch established, no leases | {:.1} MiB | {:.1} MiB |",
        rss as f64 / 1024.0,
        peak as f64 / 1024.0
    );
}
