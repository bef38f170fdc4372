//! `FakeSnapshotter`: the CSI snapshot controller's side of VolumeSnapshots on
//! [`FakeKube`], because no CSI driver can run here. A new VolumeSnapshot is *cut* (bound
//! content and `creationTime` set) after `cut_after` polls and becomes `readyToUse` after
//! `ready_after` more; `status.error` can be injected for a number of polls (then it
//! clears, as the real controller's retries do) or for ever. An `on_cut` hook lets the lab
//! take a real (btrfs) snapshot at the cut.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_kube::FakeKube;

const GROUP: &str = "snapshot.storage.k8s.io";
const PLURAL: &str = "volumesnapshots";

type Hook = Arc<dyn Fn(&Value) + Send + Sync>;

/// How the controller treats snapshots.
#[derive(Clone)]
pub struct Behaviour {
    /// Polls before the cut.
    pub cut_after: u32,
    /// Polls from the cut to `readyToUse` (`None`: never ready).
    pub ready_after: Option<u32>,
    /// `status.error` for this many polls before anything else, then cleared.
    pub error_polls: u32,
    /// `status.error` for ever (never cut).
    pub error_forever: bool,
    pub restore_size: String,
    pub on_cut: Option<Hook>,
}

impl std::fmt::Debug for Behaviour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Behaviour")
            .field("cut_after", &self.cut_after)
            .field("ready_after", &self.ready_after)
            .field("error_polls", &self.error_polls)
            .field("error_forever", &self.error_forever)
            .finish()
    }
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            cut_after: 1,
            ready_after: Some(2),
            error_polls: 0,
            error_forever: false,
            restore_size: "10Gi".into(),
            on_cut: None,
        }
    }
}

#[derive(Debug, Default)]
struct Progress {
    polls: u32,
    cut_at: Option<u32>,
}

/// The running controller; stops when dropped.
#[derive(Debug)]
pub struct FakeSnapshotter {
    behaviour: Arc<Mutex<Behaviour>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeSnapshotter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl FakeSnapshotter {
    /// Starts polling `kube` every `every`.
    pub fn start(kube: &FakeKube, behaviour: Behaviour, every: Duration) -> Self {
        let behaviour = Arc::new(Mutex::new(behaviour));
        let b = behaviour.clone();
        let kube = kube.clone();
        let task = tokio::spawn(async move {
            let mut progress: BTreeMap<String, Progress> = BTreeMap::new();
            loop {
                let current = b.lock().map(|g| g.clone()).unwrap_or_default();
                for snap in kube.list_json(GROUP, PLURAL) {
                    step(&kube, &current, &mut progress, snap);
                }
                tokio::time::sleep(every).await;
            }
        });
        Self { behaviour, task }
    }

    /// Changes the behaviour for snapshots from now on.
    pub fn set(&self, f: impl FnOnce(&mut Behaviour)) {
        if let Ok(mut g) = self.behaviour.lock() {
            f(&mut g);
        }
    }
}

fn step(
    kube: &FakeKube,
    b: &Behaviour,
    progress: &mut BTreeMap<String, Progress>,
    mut snap: Value,
) {
    let ns = snap
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let name = snap
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if snap.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let p = progress.entry(format!("{ns}/{name}")).or_default();
    p.polls += 1;
    let ready = snap
        .pointer("/status/readyToUse")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if ready {
        return;
    }
    let mut changed = false;
    if b.error_forever || p.polls <= b.error_polls {
        if snap.pointer("/status/error").is_none() {
            snap["status"]["error"] = json!({"message": "injected snapshot error", "time": now()});
            changed = true;
        }
    } else {
        if snap.pointer("/status/error").is_some() {
            if let Some(s) = snap.get_mut("status").and_then(Value::as_object_mut) {
                s.remove("error");
            }
            changed = true;
        }
        match p.cut_at {
            None if p.polls > b.error_polls + b.cut_after => {
                if let Some(h) = &b.on_cut {
                    h(&snap);
                }
                snap["status"]["boundVolumeSnapshotContentName"] =
                    json!(format!("snapcontent-{name}"));
                snap["status"]["creationTime"] = json!(now());
                snap["status"]["readyToUse"] = json!(false);
                snap["status"]["restoreSize"] = json!(b.restore_size);
                p.cut_at = Some(p.polls);
                changed = true;
            }
            Some(at) if b.ready_after.is_some_and(|r| p.polls >= at + r) => {
                snap["status"]["readyToUse"] = json!(true);
                changed = true;
            }
            _ => {}
        }
    }
    if changed {
        kube.set_status(GROUP, PLURAL, &ns, &name, snap["status"].clone());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn create(kube: &FakeKube, name: &str) {
        kube.put_json(GROUP, PLURAL, json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": name, "namespace": "ns"}, "spec": {"source": {"persistentVolumeClaimName": "pvc"}}}));
    }

    fn status(kube: &FakeKube, name: &str) -> Value {
        kube.get_json(GROUP, PLURAL, "ns", name).unwrap()["status"].clone()
    }

    async fn until(what: &str, f: impl Fn() -> bool) {
        for _ in 0..500 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting until {what}");
    }

    #[tokio::test]
    async fn cuts_then_readies_and_calls_the_hook_at_the_cut() {
        let kube = FakeKube::new();
        let cuts = Arc::new(AtomicU32::new(0));
        let c = cuts.clone();
        let b = Behaviour {
            on_cut: Some(Arc::new(move |_| {
                c.fetch_add(1, Ordering::SeqCst);
            })),
            ..Behaviour::default()
        };
        let _s = FakeSnapshotter::start(&kube, b, Duration::from_millis(10));
        create(&kube, "s1");
        until("cut", || status(&kube, "s1").get("creationTime").is_some()).await;
        until("ready", || status(&kube, "s1")["readyToUse"] == true).await;
        assert_eq!(status(&kube, "s1")["restoreSize"], "10Gi");
        assert_eq!(cuts.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_transient_error_clears_and_a_permanent_one_stays() {
        let kube = FakeKube::new();
        let s = FakeSnapshotter::start(
            &kube,
            Behaviour {
                error_polls: 3,
                ..Behaviour::default()
            },
            Duration::from_millis(10),
        );
        create(&kube, "s1");
        until("error", || status(&kube, "s1").get("error").is_some()).await;
        until("ready after the error", || {
            status(&kube, "s1")["readyToUse"] == true
        })
        .await;
        assert!(status(&kube, "s1").get("error").is_none());
        s.set(|b| b.error_forever = true);
        create(&kube, "s2");
        until("error", || status(&kube, "s2").get("error").is_some()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            status(&kube, "s2").get("creationTime").is_none(),
            "never cut while in error"
        );
    }

    #[tokio::test]
    async fn a_snapshot_can_stay_unready() {
        let kube = FakeKube::new();
        let _s = FakeSnapshotter::start(
            &kube,
            Behaviour {
                ready_after: None,
                ..Behaviour::default()
            },
            Duration::from_millis(10),
        );
        create(&kube, "s1");
        until("cut", || status(&kube, "s1").get("creationTime").is_some()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(status(&kube, "s1")["readyToUse"], false);
    }
}
