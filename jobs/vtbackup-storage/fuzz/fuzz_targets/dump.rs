//! The offline plan on an arbitrary dump: no panic; whatever the dump, a running Pod is
//! never to be deleted, a PVC is never to be deleted beside a Pod that stays, and nothing
//! is deleted on a shard whose objects could not be read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_core::config::Config;
use vtsnap_vtbackup_storage::decide::{Action, Kind, Reason};
use vtsnap_vtbackup_storage::run::plan_from_dump;

const CONFIG: &str = "clusters:\n- name: example\n  namespace: vitess\n  vtbackup: {useEmptyDirForInitialBackup: true}\n";

fuzz_target!(|data: &[u8]| {
    let Ok(list) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(config) = Config::from_yaml(CONFIG) else {
        return;
    };
    let Ok(plan) = plan_from_dump(&config, &list, None) else {
        return;
    };
    for s in &plan.shards {
        let pod = s.objects.iter().find(|o| o.kind == Kind::Pod);
        let pvc = s.objects.iter().find(|o| o.kind == Kind::PersistentVolumeClaim);
        if let Some(p) = pod {
            assert!(!(p.reason == Reason::RunningBackupPreserved && p.action != Action::Keep), "{s:?}");
            if p.action != Action::DeletePod {
                assert!(pvc.is_none_or(|c| c.action != Action::DeletePvc), "a PVC deleted beside a Pod that stays: {s:?}");
            }
        }
        let unreadable = s.objects.iter().any(|o| matches!(o.reason, Reason::PodUnreadable | Reason::PvcUnreadable | Reason::DesiredUnknown));
        if unreadable {
            assert!(s.objects.iter().all(|o| !matches!(o.action, Action::DeletePod | Action::DeletePvc)), "{s:?}");
        }
    }
});
