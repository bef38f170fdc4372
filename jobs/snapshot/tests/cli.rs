//! The command line as a CronJob meets it: `run` ends with its JSON line whatever stops it
//! before it starts, and boolean settings take the usual spellings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use serde_json::Value;

fn snapshot(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vtsnap-snapshot"));
    cmd.args(args)
        .env_remove("VTSNAP_DRY_RUN")
        .env_remove("VTSNAP_CONFIG")
        .env("VTSNAP_LOG_FORMAT", "json");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn last_json_line(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout:?}"))
}

#[test]
fn a_run_usage_error_ends_with_the_json_line() {
    for args in [
        &["run", "--bogus"][..],
        &["run", "--config", "c.yaml"],
        &[
            "run",
            "--config",
            "c.yaml",
            "--cluster",
            "a",
            "--keyspace",
            "k",
            "--shard",
            "-",
            "--mode",
            "hot",
        ],
    ] {
        let out = snapshot(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let j = last_json_line(&out);
        assert_eq!(j["outcome"], "usage", "{args:?}");
        assert_eq!(j["exit_code"], 2);
        assert_eq!(j["mode"], Value::Null);
        assert_eq!(j["error"]["code"], "usage");
        assert!(!j["error"]["message"].as_str().unwrap().is_empty());
        // clap's own message is still on stderr.
        assert!(String::from_utf8_lossy(&out.stderr).contains("error:"));
    }
    // Other subcommands promise no JSON line on a usage error.
    let out = snapshot(&["validate"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_run_with_a_bad_config_ends_with_the_json_line() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing.yaml");
    let out = snapshot(
        &[
            "run",
            "--config",
            missing.to_str().unwrap(),
            "--cluster",
            "a",
            "--keyspace",
            "k",
            "--shard",
            "-",
        ],
        &[("VTSNAP_DRY_RUN", "TRUE")],
    );
    assert_eq!(out.status.code(), Some(2));
    let j = last_json_line(&out);
    assert_eq!(j["outcome"], "usage");
    assert_eq!(j["error"]["code"], "bad-config");
    assert_eq!(j["dry_run"], true, "VTSNAP_DRY_RUN=TRUE");
}

#[test]
fn boolean_env_settings_take_the_usual_spellings() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing.yaml");
    let run = |v: &str| {
        let out = snapshot(
            &[
                "run",
                "--config",
                missing.to_str().unwrap(),
                "--cluster",
                "a",
                "--keyspace",
                "k",
                "--shard",
                "-",
            ],
            &[("VTSNAP_DRY_RUN", v)],
        );
        last_json_line(&out)
    };
    for (v, want) in [
        ("1", true),
        ("true", true),
        ("yes", true),
        ("0", false),
        ("false", false),
        ("No", false),
    ] {
        let j = run(v);
        assert_eq!(j["error"]["code"], "bad-config", "{v}: {j}");
        assert_eq!(j["dry_run"], want, "{v}");
    }
    // Anything else is a usage error, not silently false.
    let j = run("maybe");
    assert_eq!(j["error"]["code"], "usage");
}
