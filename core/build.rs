//! `VTSNAP_VERSION` for every binary's `--version`: the release and, when the build is
//! given one, the commit (`VTSNAP_GIT_COMMIT`, set by `make images`).
fn main() {
    println!("cargo:rerun-if-env-changed=VTSNAP_GIT_COMMIT");
    let commit = std::env::var("VTSNAP_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-'))
        .unwrap_or_else(|| "unknown".to_owned());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=VTSNAP_VERSION={version} (commit {commit})");
}
