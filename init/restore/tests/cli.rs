//! The command line as an init container meets it: the JSON line on usage errors, boolean
//! settings in the usual spellings, and no colour codes in piped logs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use serde_json::Value;

fn restore(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vtsnap-restore"));
    cmd.args(args)
        .env_remove("VTSNAP_DRY_RUN")
        .env_remove("VTSNAP_TABLET_UID")
        .env_remove("VTSNAP_LOG_FORMAT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn last_json_line(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout:?}"))
}

#[test]
fn a_usage_error_ends_with_the_json_line() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_str().unwrap();
    for args in [
        &["--vtdataroot", root][..],
        &["--vtdataroot", root, "--tablet-uid", "x"],
        &["--vtdataroot", root, "--tablet-uid", "101", "--bogus"],
    ] {
        let out = restore(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let j = last_json_line(&out);
        assert_eq!(j["action"], "failed", "{args:?}");
        assert_eq!(j["error"]["code"], "usage");
        assert!(!j["error"]["message"].as_str().unwrap().is_empty());
    }
    assert!(
        d.path().read_dir().unwrap().next().is_none(),
        "nothing touched"
    );
}

#[test]
fn dry_run_takes_the_usual_spellings_from_the_env() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_str().unwrap();
    for (v, want) in [
        ("1", true),
        ("TRUE", true),
        ("yes", true),
        ("0", false),
        ("False", false),
    ] {
        let out = restore(
            &["--vtdataroot", root, "--tablet-uid", "101"],
            &[("VTSNAP_DRY_RUN", v)],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{v}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(last_json_line(&out)["dry_run"], want, "{v}");
    }
    let out = restore(
        &["--vtdataroot", root, "--tablet-uid", "101"],
        &[("VTSNAP_DRY_RUN", "maybe")],
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn text_logs_into_a_pipe_carry_no_colour_codes() {
    let d = tempfile::tempdir().unwrap();
    let out = restore(
        &[
            "--vtdataroot",
            d.path().to_str().unwrap(),
            "--tablet-uid",
            "101",
            "--log-format",
            "text",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("restore finished"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}
