//! Restore drills as real Pods (docs/design.md §5.9), for `real_pods.rs`: each snapshot
//! is restored into a throwaway PVC and Pod that kubelet runs from vtsnap's images
//! (`vtsnap-restore` as the init container, the checker) and the tablet's own mysqld
//! image (here the Vitess image's MySQL 9.7), with no network listener; the checker's
//! report comes back through the container's termination message and is recorded on the
//! snapshot.

use serde_json::json;
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardName;
use vtsnap_core::snapshot::{DrillResult, VolumeSnapshot};
use vtsnap_drill::decide::objects::{Owner, Settings};
use vtsnap_drill::report::{Outcome, Summary};
use vtsnap_drill::run::{RunOptions, run};
use vtsnap_testkit::real_kube::{RealKube, resource};

use super::{pods, snapshots};

/// Drills each of `names` (snapshots of `example/commerce/-` in `ns`) in turn, as the
/// chart's drill Job would: run by a Job of the test's in `jobs_ns` (the release's
/// namespace). Returns each summary.
pub async fn drill_each(
    kube: &RealKube,
    (ns, jobs_ns): (&str, &str),
    vtctld: &str,
    names: &[&str],
) -> Vec<Summary> {
    let job = kube
        .create(json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "drill-owner", "namespace": jobs_ns},
            "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "never-pulled"}]}}}}))
        .await;
    let owner = Owner {
        name: "drill-owner".into(),
        uid: job["metadata"]["uid"].as_str().unwrap().into(),
        namespace: Some(jobs_ns.into()),
    };
    let config = Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: {ns}\n  vtctld: \"{vtctld}\"\n  restore: {{enabled: true, nodeLocal: true}}\n"
    ))
    .unwrap();
    let mut out = Vec::new();
    for name in names {
        let opts = RunOptions {
            settings: Settings {
                mysqld_resources: json!({"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}}),
                deadline_seconds: 300,
                table_budget: "60s".into(),
                ready_timeout: "120s".into(),
                ..Settings::with_images(
                    "localhost/vtsnap/vtsnap-restore:0.1.0",
                    "localhost/vtsnap/vtsnap-drill:0.1.0",
                )
            },
            owner: Some(owner.clone()),
            snapshot: Some((*name).to_owned()),
            plan_only: false,
        };
        let s = run(
            &kube.client(),
            &config,
            &ShardName::new("example", "commerce", "-"),
            &opts,
        )
        .await;
        assert_eq!(
            s.outcome,
            Outcome::Passed,
            "the drill of {name} did not pass: {}",
            serde_json::to_string(&s).unwrap()
        );
        let rto = s.drill.as_ref().unwrap().rto.unwrap();
        assert!(
            rto.pvc_bound_ms > 0 && rto.mysqld_ready_ms > 0,
            "{name}: {rto:?}"
        );
        // Recorded on the snapshot, and everything it made is gone.
        let snap = kube.get(&snapshots(), ns, name).await.unwrap();
        let read = VolumeSnapshot::read(&snap).unwrap();
        assert_eq!(
            read.counted_drill(k8s_openapi::jiff::Timestamp::now())
                .map(|d| d.result),
            Some(DrillResult::Passed),
            "{snap}"
        );
        assert!(s.left.is_empty(), "{s:?}");
        for kind in [
            pods(),
            resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
        ] {
            let left: Vec<String> = kube
                .list(&kind, ns)
                .await
                .into_iter()
                .filter(|o| {
                    o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "vtsnap-drill"
                })
                .map(|o| o["metadata"]["name"].to_string())
                .collect();
            assert!(left.is_empty(), "{name}: drill objects left: {left:?}");
        }
        out.push(s);
    }
    out
}
