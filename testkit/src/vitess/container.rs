//! One container of the Vitess image, run with the Podman CLI on the host network (the
//! daemons talk over 127.0.0.1 as they would inside one Pod network), removed when dropped.

use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

/// Names of the containers this process started and has not removed yet.
static STARTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A running container; dropping it removes it (`podman rm -f`).
#[derive(Debug)]
pub struct Container {
    name: String,
}

/// A bind mount: host path, container path, read-only or not.
#[derive(Debug, Clone)]
pub struct Bind {
    pub host: std::path::PathBuf,
    pub at: &'static str,
    pub access: Access,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadWrite,
    ReadOnly,
}

fn podman(args: &[String]) -> Output {
    Command::new("podman")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("podman {args:?}: {e}"))
}

impl Container {
    /// Starts `command` in a new container of `image` named `name`, as the image's user.
    pub fn run(
        name: &str,
        image: &str,
        binds: &[Bind],
        env: &[(&str, String)],
        command: &[String],
    ) -> Self {
        let mut args: Vec<String> = ["run", "-d", "--network", "host", "--name", name]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        args.push("--label".into());
        args.push(format!("vtsnap.io/test-pid={}", std::process::id()));
        for b in binds {
            let ro = if b.access == Access::ReadOnly {
                ":ro"
            } else {
                ""
            };
            args.push("-v".into());
            args.push(format!("{}:{}{ro}", b.host.display(), b.at));
        }
        for (k, v) in env {
            args.push("-e".into());
            args.push(format!("{k}={v}"));
        }
        args.push(image.into());
        args.extend(command.iter().cloned());
        let out = podman(&args);
        assert!(
            out.status.success(),
            "podman run {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        STARTED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(name.to_owned());
        Self {
            name: name.to_owned(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `command` in the container as its user; the whole output.
    pub async fn exec(&self, command: &[&str]) -> Output {
        let mut args = vec!["exec", "-i", self.name.as_str()];
        args.extend_from_slice(command);
        tokio::process::Command::new("podman")
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap_or_else(|e| panic!("podman exec {}: {e}", self.name))
    }

    /// Whether the container's main process is still running.
    pub fn running(&self) -> bool {
        let out = podman(&[
            "inspect".into(),
            "--format".into(),
            "{{.State.Running}}".into(),
            self.name.clone(),
        ]);
        String::from_utf8_lossy(&out.stdout).trim() == "true"
    }

    /// Its last `lines` lines of output (for failure messages).
    pub fn logs(&self, lines: usize) -> String {
        let out = podman(&[
            "logs".into(),
            "--tail".into(),
            lines.to_string(),
            self.name.clone(),
        ]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// Its full ID (what kubelet would put in the Pod's `containerID`).
    pub fn id(&self) -> String {
        let out = podman(&[
            "inspect".into(),
            "--format".into(),
            "{{.Id}}".into(),
            self.name.clone(),
        ]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The host PID of its main process (for the cgroup it runs in).
    pub fn pid(&self) -> Option<u32> {
        let out = podman(&[
            "inspect".into(),
            "--format".into(),
            "{{.State.Pid}}".into(),
            self.name.clone(),
        ]);
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .ok()
            .filter(|p| *p > 0)
    }

    /// SIGKILLs its main process (the container stops; it is removed when dropped).
    pub fn kill(&self) {
        podman(&["kill".into(), "-s".into(), "KILL".into(), self.name.clone()]);
    }

    /// The full IDs of the containers this process started and has not dropped.
    pub fn ids_started_by_this_process() -> Vec<String> {
        Self::started_by_this_process()
            .into_iter()
            .map(|name| {
                let out = podman(&["inspect".into(), "--format".into(), "{{.Id}}".into(), name]);
                String::from_utf8_lossy(&out.stdout).trim().to_owned()
            })
            .filter(|id| !id.is_empty())
            .collect()
    }

    /// Names of the containers this process started and has not dropped.
    pub fn started_by_this_process() -> Vec<String> {
        STARTED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        podman(&[
            "rm".into(),
            "-f".into(),
            "-t".into(),
            "0".into(),
            self.name.clone(),
        ]);
        STARTED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|n| n != &self.name);
    }
}
