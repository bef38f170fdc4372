//! vtsnap's tests against a real Kubernetes API server live in `tests/`; this library is
//! empty. They read the kubeconfig from `VTSNAP_TEST_KUBECONFIG` (`make test-real` starts
//! the local control plane and sets it) and each test works in a namespace of its own.

use std::path::{Path, PathBuf};

/// The real kubectl, built by `make tools`.
pub fn kubectl() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/kubectl")
}

/// `kubectl vtsnap ARGS` as its users run it: the real kubectl finds the plugin binary on
/// `PATH` (built beside the tests by `scripts/test-real.sh`: `cargo build -p
/// kubectl-vtsnap`); the kubeconfig goes by env, as kubectl takes no flag before a
/// plugin's name.
pub fn kubectl_vtsnap(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    let bin_dir = std::env::current_exe()
        .ok()
        .as_deref()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    assert!(
        bin_dir.join("kubectl-vtsnap").exists(),
        "{} has no kubectl-vtsnap: cargo build -p kubectl-vtsnap",
        bin_dir.display()
    );
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new(kubectl())
        .args(args)
        .env("PATH", &path)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", kubectl().display()))
}
