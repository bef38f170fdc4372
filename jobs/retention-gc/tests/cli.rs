//! Boolean settings take the usual spellings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn dry_run_from_the_env_takes_the_usual_spellings() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing.yaml");
    let gc = |v: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_vtsnap-gc"))
            .args(["run", "--config"])
            .arg(&missing)
            .env("VTSNAP_DRY_RUN", v)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for v in ["1", "TRUE", "yes", "0", "false"] {
        let (code, stderr) = gc(v);
        // Past the flags: stopped by the missing config, not by the setting.
        assert_eq!(code, Some(2), "{v}");
        assert!(stderr.contains("cannot read"), "{v}: {stderr}");
    }
    let (code, stderr) = gc("maybe");
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--dry-run"), "{stderr}");
}

/// A `--cluster` the config does not name is a usage error, before any cluster is
/// reached: a filter that matches nothing would otherwise report a clean run that looked
/// at nothing.
#[test]
fn an_unknown_cluster_is_refused_before_the_api_is_reached() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("config.yaml");
    std::fs::write(
        &config,
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: auto\n",
    )
    .unwrap();
    let objects = d.path().join("dump.json");
    std::fs::write(&objects, r#"{"apiVersion":"v1","kind":"List","items":[]}"#).unwrap();
    for args in [
        vec!["run", "--cluster", "nope", "--config"],
        vec![
            "plan",
            "--objects",
            objects.to_str().unwrap(),
            "--cluster",
            "nope",
            "--config",
        ],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_vtsnap-gc"))
            .args(&args)
            .arg(&config)
            // no API server: reaching for one would fail differently (exit 1)
            .env("KUBECONFIG", d.path().join("none"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cluster \"nope\" is not in the config"),
            "{args:?}: {stderr}"
        );
    }
}
