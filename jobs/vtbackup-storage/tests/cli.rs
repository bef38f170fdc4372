//! The binary on hostile input: a device, a pipe that never ends, a cluster that is not
//! configured, object text with terminal control characters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};

const CONFIG: &str = "clusters:\n- name: example\n  namespace: vitess\n";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vtsnap-vtbackup-storage"))
}

fn plan(dir: &Path, objects: &Path, extra: &[&str]) -> Output {
    let config = dir.join("config.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    bin()
        .arg("plan")
        .arg("--config")
        .arg(&config)
        .arg("--objects")
        .arg(objects)
        .args(extra)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A dump of one shard's hashless initial backup: a Pending Pod and a PVC whose spec has a
/// key holding terminal escapes.
fn dump() -> Value {
    let s = operator_shard();
    let mut pod = s.vtbackup_init_pod();
    pod["metadata"]["uid"] = json!("uid-pod");
    pod["status"] = json!({"phase": "Pending"});
    let mut pvc = s.vtbackup_init_pvc(&pvc_template("100Gi"));
    pvc["metadata"]["uid"] = json!("uid-pvc");
    pvc["spec"]["x\u{1b}[2J\u{7}"] = json!(1);
    let mut cluster = s.unsharded_vitess_cluster(&pvc_template("100Gi"));
    cluster["kind"] = json!("VitessCluster");
    json!({"apiVersion": "v1", "kind": "List", "items": [pod, pvc, cluster,
        {"kind": "StorageClass", "metadata": {"name": "standard"}}]})
}

#[test]
fn a_device_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let o = plan(dir.path(), Path::new("/dev/zero"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("character device"), "{}", stderr(&o));
}

#[test]
fn a_pipe_that_never_ends_is_read_up_to_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            let block = [b' '; 1 << 16];
            // Ends with a broken pipe once the reader has given up.
            while f.write_all(&block).is_ok() {}
        })
    };
    let o = plan(dir.path(), &fifo, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is larger than 536870912 bytes, the most a dump may have"),
        "{}",
        stderr(&o)
    );
    writer.join().unwrap();
}

#[test]
fn a_cluster_not_in_the_config_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("dump.json");
    std::fs::write(&objects, dump().to_string()).unwrap();
    let o = plan(dir.path(), &objects, &["--cluster", "nope"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cluster \"nope\" is not in the config"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
    // The configured one plans.
    let o = plan(dir.path(), &objects, &["--cluster", "example"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // `run` refuses it before reaching for any cluster.
    let config = dir.path().join("config.yaml");
    let o = bin()
        .args(["run", "--dry-run", "--cluster", "nope", "--config"])
        .arg(&config)
        .env("KUBECONFIG", dir.path().join("no-such-kubeconfig"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("\"nope\""), "{}", stderr(&o));
}

#[test]
fn control_characters_from_objects_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("dump.json");
    std::fs::write(&objects, dump().to_string()).unwrap();
    let o = plan(dir.path(), &objects, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("x\\u{1b}[2J\\u{7}"), "{out}");
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    assert_eq!(out.lines().count(), 2, "{out}");
}
