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
