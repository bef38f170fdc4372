//! `kubectl vtsnap` against the running install (the plugin's library, as its binary
//! calls it): `doctor` passes a healthy install and names each fault seeded into it,
//! `status` shows the shard protected, `backup --online --wait` takes a snapshot through
//! the CronJob's own Job, and `explain` gives the GC's word on it. Seeded faults: a
//! primary that keeps its binlogs too briefly, a replica that is not crash-safe (both on
//! the tablets' MySQL), a VolumeSnapshotClass that retains, a Role without `watch`, a
//! `restricted` namespace, a webhook Service without endpoints.

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::rbac::v1::Role;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kubectl_vtsnap::act::{ShardArg, backup};
use kubectl_vtsnap::decide::doctor::{self, Check, Level};
use kubectl_vtsnap::decide::status;
use kubectl_vtsnap::{explain, observe};
use serde_json::json;
use vtsnap_core::config::Mode;
use vtsnap_core::naming::TabletAlias;
use vtsnap_testkit::pod_backend::PodBackend;
use vtsnap_testkit::real_kube::{RealKube, resource};

/// The tablets' MySQL (through `kubectl exec`), to seed faults at the MySQL level.
pub struct Mysql<'a> {
    pub db: &'a PodBackend,
    pub primary: &'a TabletAlias,
    pub replica: &'a TabletAlias,
}

/// The doctor's lines for `install_ns`; none may be lost between runs.
async fn doctor_lines(kube: &RealKube, install_ns: &str) -> Vec<Check> {
    let world = observe::doctor_world(&kube.client(), Some(install_ns), Timestamp::now()).await;
    doctor::checks(&world)
}

fn line<'a>(checks: &'a [Check], id: &str, level: Level) -> Option<&'a Check> {
    checks.iter().find(|c| c.check == id && c.level == level)
}

/// Runs the plugin against the story's install (`restored`: the tablet PVC the webhook
/// restored from `snapshot`); returns the ad-hoc online snapshot.
pub async fn plugin_checks(
    kube: &RealKube,
    install_ns: &str,
    tablets_ns: &str,
    restored: (&str, &str),
    mysql: Mysql<'_>,
) -> String {
    let client = kube.client();
    // A healthy install: no check fails.
    let checks = doctor_lines(kube, install_ns).await;
    assert!(!doctor::any_failed(&checks), "{checks:#?}");
    for id in [
        "install",
        "config",
        "snapshot-crds",
        "snapshot-controller",
        "rbac",
        "webhook",
        "node-helper",
        "binlog-expiry",
        "crash-safety",
        "webhook-cert",
        "schedules",
    ] {
        assert!(
            line(&checks, id, Level::Pass).is_some(),
            "{id}: {checks:#?}"
        );
    }
    // This install restores node-locally, but the lab's CSI driver makes volumes that any
    // node may use (its PVs have no node affinity): read from the real PVs, a warning.
    let topology = line(&checks, "topology", Level::Warn).unwrap_or_else(|| panic!("{checks:#?}"));
    assert!(
        topology.message.contains("are not pinned to a node"),
        "{topology:?}"
    );

    // status: the shard is protected.
    let (install, text) = observe::find_install(&client, Some(install_ns))
        .await
        .unwrap()
        .unwrap();
    let config = observe::parse_config(&text).unwrap();
    let seen = observe::status_seen(&client, &install, &config)
        .await
        .unwrap();
    let st = status::status(&config, &seen, Timestamp::now());
    assert_eq!(st.shards.len(), 1, "{st:#?}");
    assert!(st.shards[0].problems.is_empty(), "{st:#?}");
    assert!(st.nodes.iter().all(|n| n.helper_ready), "{st:#?}");

    // backup --online --wait: a Job from the CronJob, followed to its end.
    let shard: ShardArg = "example/commerce/-".parse().unwrap();
    let out = backup(
        &client,
        &install,
        &shard,
        Some(Mode::Online),
        Some(std::time::Duration::from_secs(300)),
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        (out.result, out.exit_code),
        ("succeeded", Some(0)),
        "{out:?}"
    );
    let taken = out
        .snapshot
        .clone()
        .unwrap_or_else(|| panic!("no snapshot in {out:?}"));
    assert!(!out.steps.is_empty(), "{out:?}");

    // explain: the GC keeps it (the newest ready one).
    let e = explain::snapshot(&client, &config, tablets_ns, &taken)
        .await
        .unwrap();
    assert_eq!(e.decision, "keep", "{e:?}");
    // explain pvc: the webhook's recorded decision on the restored tablet.
    let (pvc, snapshot) = restored;
    let e = explain::pvc(&client, tablets_ns, pvc).await.unwrap();
    assert_eq!(e.restored_from.as_deref(), Some(snapshot), "{e:?}");
    assert!(e.reason.is_some(), "{e:?}");
    assert_eq!(e.phase.as_deref(), Some("Bound"), "{e:?}");

    // Seeded faults, one at a time, each the right line.
    // The primary keeps its binlogs a day: less than restore.maxSnapshotAge (72 h).
    let kept = mysql
        .db
        .value(mysql.primary, "SELECT @@global.binlog_expire_logs_seconds")
        .await;
    mysql
        .db
        .query(
            mysql.primary,
            "SET GLOBAL binlog_expire_logs_seconds = 86400",
        )
        .await
        .unwrap();
    let checks = doctor_lines(kube, install_ns).await;
    let fail = line(&checks, "binlog-expiry", Level::Fail).unwrap_or_else(|| panic!("{checks:#?}"));
    assert!(fail.message.contains("keeps binlogs 24.0h"), "{fail:?}");
    mysql
        .db
        .query(
            mysql.primary,
            &format!("SET GLOBAL binlog_expire_logs_seconds = {kept}"),
        )
        .await
        .unwrap();
    // A replica of this online shard stops syncing its binlog: not crash-safe.
    mysql
        .db
        .query(mysql.replica, "SET GLOBAL sync_binlog = 0")
        .await
        .unwrap();
    let checks = doctor_lines(kube, install_ns).await;
    let fail = line(&checks, "crash-safety", Level::Fail).unwrap_or_else(|| panic!("{checks:#?}"));
    assert!(
        fail.message
            .contains(&format!("{}: sync_binlog=0 (needs 1)", mysql.replica)),
        "{fail:?}"
    );
    mysql
        .db
        .query(mysql.replica, "SET GLOBAL sync_binlog = 1")
        .await
        .unwrap();
    assert!(
        !doctor::any_failed(&doctor_lines(kube, install_ns).await),
        "put back, the install passes again"
    );
    // The tablets' VolumeSnapshotClass keeps its storage after a delete (Retain).
    let classes: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "snapshot.storage.k8s.io",
            "v1",
            "VolumeSnapshotClass",
            "volumesnapshotclasses",
        ),
    );
    let class_names: Vec<String> = classes
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(!class_names.is_empty());
    let policy = |p: &str| json!({"deletionPolicy": p});
    for c in &class_names {
        classes
            .patch(c, &PatchParams::default(), &Patch::Merge(&policy("Retain")))
            .await
            .unwrap();
    }
    let checks = doctor_lines(kube, install_ns).await;
    let warn =
        line(&checks, "snapshot-class", Level::Warn).unwrap_or_else(|| panic!("{checks:#?}"));
    assert!(warn.message.contains("deletionPolicy Retain"), "{warn:?}");
    for c in &class_names {
        classes
            .patch(c, &PatchParams::default(), &Patch::Merge(&policy("Delete")))
            .await
            .unwrap();
    }
    assert!(
        line(
            &doctor_lines(kube, install_ns).await,
            "snapshot-class",
            Level::Pass
        )
        .is_some(),
        "put back, the class passes again"
    );

    // The snapshot job's Role loses `watch` on leases: it would poll.
    let roles: Api<Role> = Api::namespaced(client.clone(), tablets_ns);
    let name = format!("{}-snapshot", install.fullname);
    let mut role = roles.get(&name).await.unwrap();
    let whole_role = role.clone();
    for r in role.rules.iter_mut().flatten() {
        if r.resources.iter().flatten().any(|x| x == "leases") {
            r.verbs.retain(|v| v != "watch");
        }
    }
    roles
        .replace(&name, &PostParams::default(), &role)
        .await
        .unwrap();
    let checks = doctor_lines(kube, install_ns).await;
    let fail = line(&checks, "rbac", Level::Fail).unwrap_or_else(|| panic!("{checks:#?}"));
    assert!(
        fail.message
            .starts_with("snapshot may not watch coordination.k8s.io/leases")
            && fail.message.contains("polling"),
        "{fail:?}"
    );
    assert!(doctor::any_failed(&checks));

    // The install's namespace enforces Pod Security `restricted`.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let psa = json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}});
    namespaces
        .patch(install_ns, &PatchParams::default(), &Patch::Merge(&psa))
        .await
        .unwrap();
    let checks = doctor_lines(kube, install_ns).await;
    assert!(
        line(&checks, "pod-security", Level::Fail).is_some(),
        "{checks:#?}"
    );

    // The webhook's Service selects no Pod: no ready endpoint.
    let services: Api<Service> = Api::namespaced(client.clone(), install_ns);
    let svc = format!("{}-admission", install.fullname);
    let nothing = json!({"spec": {"selector": {"vtsnap.io/test": "selects-nothing"}}});
    services
        .patch(&svc, &PatchParams::default(), &Patch::Merge(&nothing))
        .await
        .unwrap();
    // Waits (on a watch) for the endpoint controller to empty the Service's slice.
    let slices = resource("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices");
    let slice = kube
        .list(&slices, install_ns)
        .await
        .into_iter()
        .find(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == json!(svc))
        .unwrap_or_else(|| panic!("no EndpointSlice of {svc}"));
    let slice_name = slice["metadata"]["name"].as_str().unwrap().to_owned();
    kube.wait_for(
        &slices,
        install_ns,
        &slice_name,
        "no endpoint",
        std::time::Duration::from_secs(120),
        |v| v["endpoints"].as_array().is_none_or(Vec::is_empty),
    )
    .await;
    let checks = doctor_lines(kube, install_ns).await;
    let fail = line(&checks, "webhook", Level::Fail).unwrap_or_else(|| panic!("{checks:#?}"));
    assert!(fail.message.contains("no ready endpoint"), "{fail:?}");

    // Each fault put back (the story goes on): the Role, the namespace, the Service.
    let mut role = roles.get(&name).await.unwrap();
    role.rules = whole_role.rules;
    roles
        .replace(&name, &PostParams::default(), &role)
        .await
        .unwrap();
    let no_psa = json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": null}}});
    namespaces
        .patch(install_ns, &PatchParams::default(), &Patch::Merge(&no_psa))
        .await
        .unwrap();
    services
        .patch(
            &svc,
            &PatchParams::default(),
            // the merge patch above added its key to the selector: remove it
            &Patch::Merge(&json!({"spec": {"selector": {"vtsnap.io/test": null}}})),
        )
        .await
        .unwrap();
    kube.wait_for(
        &slices,
        install_ns,
        &slice_name,
        "a ready endpoint again",
        std::time::Duration::from_secs(120),
        |v| {
            v["endpoints"]
                .as_array()
                .is_some_and(|es| es.iter().any(|e| e["conditions"]["ready"] == json!(true)))
        },
    )
    .await;
    assert!(
        !doctor::any_failed(&doctor_lines(kube, install_ns).await),
        "put back, the install passes again"
    );
    taken
}
