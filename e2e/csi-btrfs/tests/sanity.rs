//! csi-sanity, the CSI spec's conformance suite (github.com/kubernetes-csi/csi-test,
//! `cmd/csi-sanity`, built from its Go module into target/tools/ by `make tools`), against
//! the driver binary on a real btrfs. Needs root, `mkfs.btrfs`, `btrfs`, `losetup`.
//!
//! Specs for capabilities the driver does not advertise are skipped by csi-sanity itself;
//! any other skip, a failure, or a key spec not passing fails this test, with the list.

// Test helpers outside #[test] functions: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{LoopBtrfs, TargetDir};
use tokio::io::AsyncBufReadExt;

/// How long the whole suite may take (it takes seconds).
const LIMIT: Duration = Duration::from_secs(600);

/// Specs that must pass, not be skipped: they cover what the driver offers (a change
/// in what it advertises would otherwise turn them into silent skips).
const MUST_PASS: [&str; 9] = [
    "Node Service should work",
    "Node Service should be idempotent",
    "Node Service NodeUnpublishVolume should remove target path",
    "Node Service NodePublishVolume with single node multi writer capability should fail when volume with single node single writer access mode is already mounted at a different target path",
    "Node Service NodeGetInfo should return appropriate values",
    "Controller Service [Controller Server] ValidateVolumeCapabilities should return appropriate values (no optional values added)",
    "Controller Service [Controller Server] ValidateVolumeCapabilities should fail when the requested volume does not exist",
    "Controller Service [Controller Server] CreateVolume should create volume from an existing source snapshot",
    "ListSnapshots [Controller Server] should return next token when a limited number of entries are requested",
];

fn csi_sanity() -> PathBuf {
    let path = std::env::var_os("VTSNAP_TEST_CSI_SANITY")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/csi-sanity")
        });
    assert!(
        path.is_file(),
        "{} is missing: run `make tools` (it builds csi-sanity from its Go module)",
        path.display()
    );
    path
}

/// The line "Ran N of M Specs in …" and "… -- P Passed | F Failed | X Pending | S Skipped".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Summary {
    ran: u32,
    of: u32,
    passed: u32,
    failed: u32,
    pending: u32,
    skipped: u32,
}

fn summary(out: &str) -> Option<Summary> {
    let ran_line = out
        .lines()
        .find(|l| l.starts_with("Ran ") && l.contains(" Specs"))?;
    let mut w = ran_line.split_whitespace();
    let ran = w.nth(1)?.parse().ok()?;
    let of = w.nth(1)?.parse().ok()?;
    let counts = out.lines().find(|l| l.contains(" Passed | "))?;
    let count = |word: &str| -> Option<u32> {
        let before = counts.split(&format!(" {word}")).next()?;
        before.split_whitespace().last()?.parse().ok()
    };
    Some(Summary {
        ran,
        of,
        passed: count("Passed")?,
        failed: count("Failed")?,
        pending: count("Pending")?,
        skipped: count("Skipped")?,
    })
}

/// Each spec of ginkgo's JSON report: its full name, state, and failure or skip message.
fn specs(report: &Path) -> Vec<(String, String, String)> {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    let mut out = Vec::new();
    for suite in json.as_array().unwrap() {
        for spec in suite["SpecReports"].as_array().unwrap() {
            if spec["LeafNodeType"] != "It" {
                continue;
            }
            let mut name: Vec<&str> = spec["ContainerHierarchyTexts"]
                .as_array()
                .map(|a| a.iter().filter_map(|t| t.as_str()).collect())
                .unwrap_or_default();
            name.push(spec["LeafNodeText"].as_str().unwrap_or_default());
            let state = spec["State"].as_str().unwrap_or_default().to_owned();
            let message = spec["Failure"]["Message"]
                .as_str()
                .unwrap_or_default()
                .trim()
                .to_owned();
            out.push((name.join(" "), state, message));
        }
    }
    out
}

/// A skip csi-sanity makes because the driver does not offer the capability, or for a
/// spec upstream marks pending; anything else is a configuration gap of this test.
fn skipped_for_a_capability(state: &str, message: &str) -> bool {
    state == "pending"
        || (state == "skipped"
            && (message.ends_with("not supported") || message.ends_with("not provided")))
}

#[tokio::test]
async fn csi_sanity_passes_against_the_driver() {
    let sanity = csi_sanity();
    let fs = LoopBtrfs::new();
    let work = TargetDir::new();
    let socket = work.join("csi.sock");

    let mut driver = tokio::process::Command::new(env!("CARGO_BIN_EXE_vtsnap-csi-btrfs"))
        .arg("--endpoint")
        .arg(format!("unix://{}", socket.display()))
        .arg("--root")
        .arg(fs.root())
        .args(["--node-id", "sanity-node", "--log-format", "text"])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Its log, kept for the failure message; the "serving" line is the readiness signal.
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let (ready_tx, ready) = tokio::sync::oneshot::channel::<()>();
    let mut lines = tokio::io::BufReader::new(driver.stderr.take().unwrap()).lines();
    let keep = Arc::clone(&log);
    tokio::spawn(async move {
        let mut ready_tx = Some(ready_tx);
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("serving CSI")
                && let Some(tx) = ready_tx.take()
            {
                let _ = tx.send(());
            }
            keep.lock().unwrap().push(l);
        }
    });
    tokio::time::timeout(Duration::from_secs(30), ready)
        .await
        .expect("the driver did not start in 30 s")
        .unwrap_or_else(|_| panic!("the driver ended: {:?}", log.lock().unwrap()));

    let report = work.join("report.json");
    let started = Instant::now();
    let out = tokio::time::timeout(
        LIMIT,
        tokio::process::Command::new(&sanity)
            .arg(format!("--csi.endpoint=unix://{}", socket.display()))
            // Created by csi-sanity; the plugin creates `<mountdir>/target` in it.
            .arg(format!("--csi.mountdir={}", work.join("mount").display()))
            .arg(format!(
                "--csi.stagingdir={}",
                work.join("staging").display()
            ))
            .arg("--ginkgo.no-color")
            .arg(format!("--ginkgo.json-report={}", report.display()))
            .current_dir(work.path())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("csi-sanity did not finish in time")
    .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let specs = if report.exists() {
        specs(&report)
    } else {
        Vec::new()
    };

    let not_passed: Vec<String> = specs
        .iter()
        .filter(|(_, state, _)| state != "passed")
        .map(|(name, state, message)| {
            let first = message.lines().next().unwrap_or_default();
            format!("  {state}: {name}: {first}")
        })
        .collect();
    let tail: Vec<&str> = stdout.lines().rev().take(60).collect();
    let driver_tail: Vec<String> = log.lock().unwrap().iter().rev().take(30).cloned().collect();
    let context = format!(
        "csi-sanity {} in {took:.1?}\n\nnot passed:\n{}\n\nits output (last lines, newest first):\n{}\n\nstderr:\n{stderr}\n\nthe driver's log (newest first):\n{}",
        out.status,
        not_passed.join("\n"),
        tail.join("\n"),
        driver_tail.join("\n")
    );
    let s =
        summary(&stdout).unwrap_or_else(|| panic!("no summary in csi-sanity's output\n{context}"));
    eprintln!(
        "csi-sanity: ran {} of {} specs in {took:.1?}: {} passed, {} failed, {} pending, {} skipped\n{}",
        s.ran,
        s.of,
        s.passed,
        s.failed,
        s.pending,
        s.skipped,
        not_passed.join("\n")
    );

    assert!(out.status.success(), "{s:?}\n{context}");
    assert_eq!(s.failed, 0, "{s:?}\n{context}");
    assert!(s.ran > 0 && s.passed == s.ran, "{s:?}\n{context}");
    assert_eq!(
        specs.len(),
        usize::try_from(s.of).unwrap(),
        "the JSON report lists every spec\n{context}"
    );
    let odd: Vec<&String> = specs
        .iter()
        .filter(|(_, state, message)| {
            state != "passed" && !skipped_for_a_capability(state, message)
        })
        .map(|(name, _, _)| name)
        .collect();
    assert!(
        odd.is_empty(),
        "skipped for a reason other than an unadvertised capability: {odd:#?}\n{context}"
    );
    for name in MUST_PASS {
        assert!(
            specs
                .iter()
                .any(|(n, state, _)| n == name && state == "passed"),
            "{name:?} did not pass\n{context}"
        );
    }

    // csi-sanity cleans up after itself through the driver: nothing is left.
    for dir in ["volumes", "snapshots", "meta/volumes", "meta/snapshots"] {
        let left: Vec<_> = std::fs::read_dir(fs.root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{dir} still holds {left:?}");
    }
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !table.contains(work.path().to_str().unwrap()),
        "a publication outlived csi-sanity:\n{table}"
    );

    let pid = nix::unistd::Pid::from_raw(i32::try_from(driver.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), driver.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn the_summary_is_read_from_ginkgos_lines() {
    let out = "Will run 102 of 103 specs\n••S\n\nRan 46 of 103 Specs in 1.760 seconds\n\
               SUCCESS! -- 46 Passed | 0 Failed | 1 Pending | 56 Skipped\n";
    assert_eq!(
        summary(out),
        Some(Summary {
            ran: 46,
            of: 103,
            passed: 46,
            failed: 0,
            pending: 1,
            skipped: 56
        })
    );
    let failed =
        "Ran 3 of 9 Specs in 1 seconds\nFAIL! -- 1 Passed | 2 Failed | 0 Pending | 6 Skipped\n";
    assert_eq!(summary(failed).map(|s| s.failed), Some(2));
    assert_eq!(summary("no summary"), None);
}
