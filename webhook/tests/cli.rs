//! `vtsnap-admission review` as a child process: the response the server would send, from
//! a dump, the shard states and a review; and its usage errors.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use vtsnap_testkit::operator_objects::{operator_shard, pvc_template};

const NOW: &str = "2026-12-01T12:00:00Z";

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vtsnap-admission"))
}

struct Files {
    _dir: tempfile::TempDir,
    config: PathBuf,
    objects: PathBuf,
    shards: PathBuf,
    request: PathBuf,
}

fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("config.yaml"),
        "clusters:\n- name: example\n  namespace: vitess\n  restore: {enabled: true}\n",
    )
    .unwrap();
    let s = operator_shard();
    let cut = "2026-12-01T10:00:00Z".parse().unwrap();
    let older = "2026-11-30T22:00:00Z".parse().unwrap();
    let objects = write(
        d,
        "dump.json",
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            s.snapshot("s-older", older).object(),
            s.snapshot("s-newest", cut).object(),
        ]}),
    );
    let shards = write(
        d,
        "shards.json",
        &json!([{"key": {"namespace": "vitess", "cluster": "example", "keyspace": "commerce", "shard": "-"},
                 "primary": "zone1-0000000101",
                 "tablets": [{"alias": "zone1-0000000101", "version": "8.0.36"}],
                 "refreshed_at": "2026-12-01T11:59:30Z", "error": null}]),
    );
    let pvc = s.tablet("replica", 4).pvc(&pvc_template("100Gi"));
    let request = write(
        d,
        "review.json",
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": "u-7", "kind": {"group": "", "version": "v1", "kind": "PersistentVolumeClaim"},
                            "operation": "CREATE", "namespace": "vitess", "object": pvc}}),
    );
    Files {
        config: d.join("config.yaml"),
        _dir: dir,
        objects,
        shards,
        request,
    }
}

#[test]
fn review_prints_the_response_the_server_would_send() {
    let f = files();
    let out = bin()
        .args(["review", "--now", NOW, "--config"])
        .arg(&f.config)
        .arg("--objects")
        .arg(&f.objects)
        .arg("--shards")
        .arg(&f.shards)
        .arg("--request")
        .arg(&f.request)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["response"]["uid"], "u-7");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(r["response"]["patch"].as_str().unwrap())
        .unwrap();
    let ops: Value = serde_json::from_slice(&patch).unwrap();
    assert_eq!(ops[1]["path"], "/spec/dataSourceRef");
    assert_eq!(ops[1]["value"]["name"], "s-newest");
    assert!(
        stderr.contains("decision: restored-from-snapshot: s-newest"),
        "{stderr}"
    );

    // Without the shard states nothing is known of the shard's MySQL: left alone.
    let out = bin()
        .args(["review", "--now", NOW, "--config"])
        .arg(&f.config)
        .arg("--objects")
        .arg(&f.objects)
        .arg("--request")
        .arg(&f.request)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["response"].get("patch").is_none());
    assert!(String::from_utf8_lossy(&out.stderr).contains("shard-state-unknown"));
}

#[test]
fn bad_inputs_exit_2_naming_the_file() {
    let f = files();
    let not_a_review = write(
        f.objects.parent().unwrap(),
        "bad.json",
        &json!({"kind": "AdmissionReview"}),
    );
    let out = bin()
        .args(["review", "--config"])
        .arg(&f.config)
        .arg("--objects")
        .arg(&f.objects)
        .arg("--request")
        .arg(&not_a_review)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("bad.json: the server would answer 400: apiVersion is missing"),
        "{e}"
    );
    let out = bin()
        .args(["review", "--config"])
        .arg(&f.config)
        .arg("--objects")
        .arg(f.objects.parent().unwrap())
        .arg("--request")
        .arg(&f.request)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"));
    let out = bin()
        .args(["review", "--now", "soon", "--config"])
        .arg(&f.config)
        .arg("--objects")
        .arg(&f.objects)
        .arg("--request")
        .arg(&f.request)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--now"));
    // serve refuses a certificate it cannot load, before listening.
    let out = bin()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            "/nonexistent.crt",
            "--tls-key",
            "/nonexistent.key",
            "--config",
        ])
        .arg(&f.config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent.crt"));
    let help = bin().args(["review", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("Example:"));
}

/// Runs `cmd` to its end; a child still running after `limit` is killed and the test
/// fails (the bound only keeps a hung binary from hanging the suite).
fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn an_empty_or_broken_restore_image_is_a_usage_error_naming_the_flag() {
    let f = files();
    let review = |image: Option<&str>, env: Option<&str>| {
        let mut c = bin();
        c.args(["review", "--now", NOW, "--config"])
            .arg(&f.config)
            .arg("--objects")
            .arg(&f.objects)
            .arg("--request")
            .arg(&f.request)
            .env_remove("VTSNAP_RESTORE_IMAGE");
        if let Some(i) = image {
            c.args(["--restore-image", i]);
        }
        if let Some(e) = env {
            c.env("VTSNAP_RESTORE_IMAGE", e);
        }
        c.output().unwrap()
    };
    for (image, why) in [
        ("", "must not be empty"),
        (" vtsnap/vtsnap-restore:1", "whitespace"),
        ("vtsnap/vtsnap-restore:1\n", "whitespace"),
        ("vtsnap/VTSNAP-restore:1", "must be lowercase"),
    ] {
        let out = review(Some(image), None);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{image:?}: {e}");
        assert!(
            e.contains("--restore-image") && e.contains(why),
            "{image:?}: {e}"
        );
    }
    // From the environment, the same.
    let out = review(None, Some(""));
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--restore-image") && e.contains("must not be empty"),
        "{e}"
    );
    let out = review(
        Some("registry.example.com:5000/vtsnap/vtsnap-restore:0.1.0"),
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // serve refuses it before reading anything else.
    let out = bin()
        .args([
            "serve",
            "--restore-image",
            "",
            "--tls-cert",
            "/c",
            "--tls-key",
            "/k",
            "--config",
        ])
        .arg(&f.config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--restore-image"));
}

#[test]
fn serve_refuses_a_certificate_or_key_that_is_a_device_a_fifo_or_too_large() {
    let f = files();
    let dir = f.config.parent().unwrap();
    let fifo = dir.join("tls.key");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let huge = dir.join("huge.crt");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(vtsnap_admission::tls::MAX_PEM + 1)
        .unwrap();
    let cert = vtsnap_testkit::https::TestCert::new(&["127.0.0.1"]);
    std::fs::create_dir(dir.join("good")).unwrap();
    let (good_cert, good_key) = cert.write(&dir.join("good"));
    let cases: [(&Path, &Path, &str); 4] = [
        (
            Path::new("/dev/zero"),
            &good_key,
            "/dev/zero is not a regular file (a character device)",
        ),
        (
            &good_cert,
            Path::new("/dev/zero"),
            "/dev/zero is not a regular file (a character device)",
        ),
        (&good_cert, &fifo, "tls.key is not a regular file (a FIFO)"),
        (
            &huge,
            &good_key,
            "huge.crt is larger than 1048576 bytes, the most a PEM file may have",
        ),
    ];
    for (cert, key, want) in cases {
        let out = run_bounded(
            bin()
                .args(["serve", "--listen", "127.0.0.1:0", "--tls-cert"])
                .arg(cert)
                .arg("--tls-key")
                .arg(key)
                .arg("--config")
                .arg(&f.config),
            Duration::from_secs(60),
        );
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{e}");
        assert!(e.contains(want), "{e:?} lacks {want:?}");
    }
}

#[test]
fn the_connection_bounds_are_flags_with_env_names_and_refuse_zero() {
    let f = files();
    let serve = |args: &[&str], env: Option<(&str, &str)>| {
        let mut c = bin();
        c.args(["serve", "--tls-cert", "/c", "--tls-key", "/k", "--config"])
            .arg(&f.config)
            .args(args);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    for (args, env, flag) in [
        (&["--request-timeout", "0"][..], None, "--request-timeout"),
        (
            &[],
            Some(("VTSNAP_REQUEST_TIMEOUT", "0s")),
            "--request-timeout",
        ),
        (&["--handshake-timeout", "0"], None, "--handshake-timeout"),
        (
            &[],
            Some(("VTSNAP_HANDSHAKE_TIMEOUT", "soon")),
            "--handshake-timeout",
        ),
        (&["--idle-timeout", "0"], None, "--idle-timeout"),
        (&[], Some(("VTSNAP_IDLE_TIMEOUT", "-1s")), "--idle-timeout"),
        (&["--max-connections", "0"], None, "--max-connections"),
        (
            &[],
            Some(("VTSNAP_MAX_CONNECTIONS", "many")),
            "--max-connections",
        ),
    ] {
        let out = serve(args, env);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {e}");
        assert!(e.contains(flag), "{args:?} {env:?}: {e}");
    }
    let help = bin().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for env in [
        "VTSNAP_HANDSHAKE_TIMEOUT",
        "VTSNAP_REQUEST_TIMEOUT",
        "VTSNAP_IDLE_TIMEOUT",
        "VTSNAP_MAX_CONNECTIONS",
    ] {
        assert!(help.contains(env), "{env} not in {help}");
    }
}

#[test]
fn version_names_the_release_and_the_commit_slot() {
    let out = bin().arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let want = format!("vtsnap-admission {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&want), "{text}");
}
