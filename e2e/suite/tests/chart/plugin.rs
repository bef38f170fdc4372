//! `kubectl vtsnap` as its users run it, through the real kubectl, on the chart's install
//! (real_chart.rs): status, doctor and the admission certificate's expiry.

use base64::Engine as _;
use serde_json::{Value, json};
use vtsnap_testkit::real_kube::RealKube;

/// The plugin as its users run it: the `kubectl-vtsnap` binary on PATH, found by the real
/// kubectl as `kubectl vtsnap`. On this install (its webhook's and node helper's Pods kept
/// off the one Node) doctor exits 1 naming exactly those two faults.
pub fn plugin_through_kubectl(kube: &RealKube, install_ns: &str) {
    let run = |args: &[&str]| plugin_output(kube, args);
    let doctor_args = [
        "vtsnap",
        "doctor",
        "--install-namespace",
        install_ns,
        "-o",
        "json",
    ];
    let out = run(&doctor_args);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    let failed: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["level"] == "fail")
        .collect();
    // Both true of this install: its webhook and node helper Pods are kept off the Node
    // that the tablet Pods are bound to.
    let named: Vec<(&str, &str)> = failed
        .iter()
        .map(|c| (c["check"].as_str().unwrap(), c["message"].as_str().unwrap()))
        .collect();
    assert_eq!(named.len(), 2, "{report:#}");
    assert!(
        named[0].0 == "webhook" && named[0].1.contains("no ready endpoint"),
        "{report:#}"
    );
    assert!(
        named[1].0 == "node-helper" && named[1].1.contains("vtsnap-local-node"),
        "{report:#}"
    );
    let rbac_passes = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["check"] == "rbac" && c["level"] == "pass")
        .count();
    assert_eq!(
        rbac_passes, 9,
        "one line per program (drills, the archive and its recovery are on): {report:#}"
    );
    // The reconciler ran above: the one shard has its CronJob.
    assert!(
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["check"] == "schedules" && c["level"] == "pass"),
        "{report:#}"
    );
    let cert_line = |report: &Value| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == "webhook-cert")
            .cloned()
            .unwrap_or_else(|| panic!("no webhook-cert line: {report:#}"))
    };
    assert_eq!(cert_line(&report)["level"], "pass", "{report:#}");
    // The serving certificate replaced by one that expires in 10 days: a warning of its
    // own, not hidden behind the webhook's missing endpoints.
    let doctor = |run: &dyn Fn(&[&str]) -> std::process::Output| {
        serde_json::from_slice::<Value>(&run(&doctor_args).stdout).unwrap()
    };
    let secrets: Value =
        serde_json::from_slice(&run(&["get", "secrets", "-n", install_ns, "-o", "json"]).stdout)
            .unwrap();
    let secret = secrets["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-admission-tls"))
        })
        .unwrap_or_else(|| panic!("no admission Secret: {secrets:#}"));
    let secret_name = secret["metadata"]["name"].as_str().unwrap();
    let original = secret["data"]["tls.crt"].as_str().unwrap().to_owned();
    let patch_crt = |b64: &str| {
        let patch = json!({"data": {"tls.crt": b64}}).to_string();
        let out = run(&[
            "patch",
            "secret",
            secret_name,
            "-n",
            install_ns,
            "--type",
            "merge",
            "-p",
            &patch,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    patch_crt(&base64::engine::general_purpose::STANDARD.encode(expiring_in_days(10)));
    let line = cert_line(&doctor(&run));
    assert!(
        line["level"] == "warn" && line["message"].as_str().unwrap().contains("within 30 days"),
        "{line:#}"
    );
    patch_crt(&original);
    assert_eq!(cert_line(&doctor(&run))["level"], "pass");

    // A PVC with far more Events than a screen: every page is read, the newest 20 shown.
    events_of_one_pvc(&run, install_ns, 600);
    let out = run(&[
        "vtsnap",
        "explain",
        "pvc",
        "explain-me",
        "-n",
        install_ns,
        "-o",
        "json",
    ]);
    let e: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&out.stderr)));
    let events: Vec<&str> = e["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // The PV controller may add its own (newer) Events about the unbound claim; of the
    // seeded ones, the newest are shown, oldest first, and the rest are counted.
    let seeded: Vec<&str> = events
        .iter()
        .copied()
        .filter(|m| m.starts_with("Seeded: "))
        .collect();
    let others = (events.len() - seeded.len()) as u64;
    let want: Vec<String> = (600 - seeded.len()..600)
        .map(|i| format!("Seeded: event {i}"))
        .collect();
    assert_eq!(events.len(), 20, "{e:#}");
    assert_eq!(seeded, want, "{e:#}");
    assert_eq!(
        e["older_events"].as_u64(),
        Some(600 - seeded.len() as u64),
        "{e:#}"
    );
    assert!(others < 20, "{e:#}");

    // A usage error exits 2 and names what is wrong.
    let out = run(&["vtsnap", "backup", "example/commerce"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("CLUSTER/KEYSPACE/SHARD"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed serving certificate (for the admission Service's names) whose
/// `notAfter` is `days` from now.
fn expiring_in_days(days: i64) -> String {
    use k8s_openapi::jiff::{SignedDuration, Timestamp, tz::TimeZone};
    let date = |t: Timestamp| {
        let d = t.to_zoned(TimeZone::UTC).date();
        rcgen::date_time_ymd(
            i32::from(d.year()),
            u8::try_from(d.month()).unwrap(),
            u8::try_from(d.day()).unwrap(),
        )
    };
    let now = Timestamp::now();
    let mut params =
        rcgen::CertificateParams::new(vec!["vtsnap-admission.svc".to_owned()]).unwrap();
    params.not_before = date(now - SignedDuration::from_hours(48));
    params.not_after = date(now + SignedDuration::from_hours(24 * days));
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

/// A PVC `explain-me` in `namespace` (of a StorageClass no one serves, so nothing acts on
/// it) and `n` Events about it, `event 0` the oldest.
fn events_of_one_pvc(run: &dyn Fn(&[&str]) -> std::process::Output, namespace: &str, n: u32) {
    let mut items = vec![json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "explain-me", "namespace": namespace},
        "spec": {"storageClassName": "served-by-no-one", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})];
    for i in 0..n {
        let at = format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60);
        items.push(json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("explain-me.{i:04}"), "namespace": namespace},
            "involvedObject": {"kind": "PersistentVolumeClaim", "name": "explain-me",
                               "namespace": namespace},
            "reason": "Seeded", "message": format!("event {i}"), "type": "Normal",
            "firstTimestamp": at, "lastTimestamp": at}));
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.json");
    std::fs::write(&file, list).unwrap();
    let out = run(&["create", "-f", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A GTID set as MySQL prints one: the recovery's target.
const SET: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5";

/// `kubectl vtsnap recover` as its users run it: a Job of the chart's recovery template in
/// the install's namespace, as the `pitr-recover` account, `vtsnap-pitr run`'s args naming
/// the shard (its namespace from the config) and the target. No node runs it here
/// (real_pods.rs runs recoveries); the Job is deleted again. A target after now is refused
/// before anything is made.
pub fn recover_through_kubectl(kube: &RealKube, install_ns: &str, shard_ns: &str) -> Value {
    let run = |args: &[&str]| plugin_output(kube, args);
    let common = [
        "vtsnap",
        "recover",
        "example/commerce/-",
        "--install-namespace",
        install_ns,
    ];
    let future = run(&[&common[..], &["--to-time", "2999-01-01T00:00:00Z"]].concat());
    assert_eq!(future.status.code(), Some(2), "{future:?}");
    assert!(
        String::from_utf8_lossy(&future.stderr).contains("after now"),
        "{future:?}"
    );
    let out = run(&[
        &common[..],
        &["--to-gtid", SET, "--after", "cut", "-o", "json"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(made["result"], "created", "{made}");
    let job = made["job"].as_str().unwrap().to_owned();
    let got = std::process::Command::new(kubectl_path())
        .args(["-n", install_ns, "get", "job", &job, "-o", "json"])
        .env("KUBECONFIG", kube.kubeconfig())
        .output()
        .unwrap();
    let job_json: Value = serde_json::from_slice(&got.stdout).unwrap();
    let deleted = std::process::Command::new(kubectl_path())
        .args(["-n", install_ns, "delete", "job", &job, "--wait=false"])
        .env("KUBECONFIG", kube.kubeconfig())
        .output()
        .unwrap();
    assert!(deleted.status.success(), "{deleted:?}");
    let pod = &job_json["spec"]["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "run", "{args:?}");
    let tail = [
        "--cluster",
        "example",
        "--cluster-namespace",
        shard_ns,
        "--keyspace",
        "commerce",
        "--shard=-",
        "--to-gtid",
        SET,
        "--after",
        "cut",
    ];
    assert_eq!(args[args.len() - tail.len()..], tail, "{args:?}");
    assert!(args.contains(&"--archive-volume"), "{args:?}");
    assert!(job_json["metadata"].get("ownerReferences").is_none());
    pod.clone()
}

fn kubectl_path() -> std::path::PathBuf {
    vtsnap_e2e::kubectl()
}

fn plugin_output(kube: &RealKube, args: &[&str]) -> std::process::Output {
    vtsnap_e2e::kubectl_vtsnap(kube.kubeconfig(), args)
}
