//! The real helm (built from its Go module into `target/tools/` by `make tools`) against
//! the test's API server: install the repo's chart and uninstall it when the test ends.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The repo's chart.
pub fn chart() -> PathBuf {
    root().join("charts/vtsnap")
}

/// helm from target/tools/ (`make tools`), or `VTSNAP_TEST_HELM`.
pub fn helm() -> Command {
    let path = std::env::var_os("VTSNAP_TEST_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/tools/helm"));
    assert!(
        path.exists(),
        "{} is missing: run `make tools` (it builds helm from its Go module)",
        path.display()
    );
    Command::new(path)
}

/// An installed release; `helm uninstall` when dropped (the cluster-scoped objects are
/// the release's).
#[derive(Debug)]
pub struct Release {
    pub name: String,
    pub namespace: String,
    kubeconfig: PathBuf,
    _values: tempfile::TempDir,
}

impl Release {
    /// `helm install NAME charts/vtsnap -n NAMESPACE -f <values>`; panics with helm's
    /// output when it fails.
    pub fn install(name: &str, namespace: &str, values: &Value, kubeconfig: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("values.yaml");
        std::fs::write(&file, serde_json::to_vec(values).unwrap()).unwrap();
        let release = Self {
            name: name.into(),
            namespace: namespace.into(),
            kubeconfig: kubeconfig.to_path_buf(),
            _values: dir,
        };
        let out = helm()
            .args(["install", name])
            .arg(chart())
            .args(["-n", namespace, "-f"])
            .arg(&file)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "helm install: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        release
    }

    /// `helm upgrade NAME charts/vtsnap -n NAMESPACE -f <values>` with new values (the
    /// whole set, not a merge); panics with helm's output when it fails.
    pub fn upgrade(&self, values: &Value) {
        let file = self._values.path().join("values-upgrade.yaml");
        std::fs::write(&file, serde_json::to_vec(values).unwrap()).unwrap();
        let out = helm()
            .args(["upgrade", &self.name])
            .arg(chart())
            .args(["-n", &self.namespace, "-f"])
            .arg(&file)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "helm upgrade: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The release's rendered manifest (`helm get manifest`).
    pub fn manifest(&self) -> String {
        let out = helm()
            .args(["get", "manifest", &self.name, "-n", &self.namespace])
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .output()
            .unwrap();
        assert!(out.status.success(), "helm get manifest failed");
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        let _ = helm()
            .args([
                "uninstall",
                &self.name,
                "--wait=false",
                "-n",
                &self.namespace,
            ])
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .output();
    }
}
