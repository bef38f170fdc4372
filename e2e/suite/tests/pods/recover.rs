//! Point-in-time recovery as real Pods (docs/pitr.md §8), for `real_pods.rs`: a table is
//! written, its checksum and the primary's GTID set noted, then dropped; `vtsnap-pitr
//! archive` has a replica's real vttablet store an incremental backup in the tablets'
//! shared backup storage; the shard is then recovered into a new PVC and a Pod that
//! kubelet runs (vtsnap-restore, fetch from the pitr image, mysqld and the replay from the
//! tablet's image): once by `vtsnap-pitr run` to the noted GTID set, cut into a
//! VolumeSnapshot, the archive read from an S3 bucket (moto on the host, the backups
//! copied there as Vitess's `s3` storage names them; the Pod's fetch container reaches it
//! at the node's address with a Secret's keys), and once as its users ask, `kubectl vtsnap recover` to the drop's
//! second: a Job of the chart's template runs `run` on the node as the `pitr-recover`
//! account, and the served Pod has the table back with the noted checksum.

use std::time::Duration;

use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::coverage::{GtidSet, Text};
use vtsnap_core::naming::{TabletAlias, TabletUid};
use vtsnap_core::pitr::chain::Target;
use vtsnap_core::pitr::run::After;
use vtsnap_core::pitr::run::RecoverOutcome;
use vtsnap_core::shard::{ShardName, ShardRef};
use vtsnap_core::snapshot::GtidFlavor;
use vtsnap_pitr::archive::ArchivePlace;
use vtsnap_pitr::decide::recovery::{ArchiveSource, Settings, defaults};
use vtsnap_pitr::recover::{RecoverLine, RecoverOptions, recover};
use vtsnap_pitr::report::ArchiveOutcome;
use vtsnap_pitr::run::{ArchiveOptions, Mode, archive};
use vtsnap_testkit::pod_backend::PodBackend;
use vtsnap_testkit::real_kube::{RealKube, snapshot_ready};
use vtsnap_testkit::s3::S3Server;
use vtsnap_testkit::vitess::pods::VitessPods;

use super::{LIMIT, caught_up, gtid_set, snapshots};

/// What the story tells of the two recoveries.
pub struct Recovered {
    pub to_gtid: RecoverLine,
    /// The run's line, as `kubectl vtsnap recover --wait` printed it.
    pub to_time: Value,
}

fn mysql_set(printed: &str) -> GtidSet {
    GtidSet::parse(GtidFlavor::Mysql56, &gtid_set(printed), Text::Server).unwrap()
}

/// Drops a table after noting it, archives, and recovers it twice (see the module).
pub async fn recover_a_dropped_table(
    kube: &RealKube,
    (ns, install_ns): (&str, &str),
    vt: &VitessPods,
    db: &PodBackend,
    primary: &TabletAlias,
    replicas: &[&TabletAlias],
) -> Recovered {
    db.query(
        primary,
        "CREATE TABLE vt_commerce.pitr (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB; \
         INSERT INTO vt_commerce.pitr VALUES (1, 'kept'), (2, 'kept too'), (3, 'and this')",
    )
    .await
    .unwrap();
    let noted_sum = db.value(primary, "CHECKSUM TABLE vt_commerce.pitr").await;
    let noted_set = mysql_set(&db.value(primary, "SELECT @@global.gtid_executed").await);
    // The drop at the next whole second, in the same session: a time target of that
    // second excludes it and keeps every earlier write.
    let drop_at: i64 = db
        .value(
            primary,
            "DO SLEEP(1.05 - MOD(UNIX_TIMESTAMP(NOW(6)), 1)); SELECT UNIX_TIMESTAMP(); \
             DROP TABLE vt_commerce.pitr; INSERT INTO vt_commerce.t (v) VALUES ('after the drop')",
        )
        .await
        .parse()
        .unwrap();
    let gone = db
        .query(
            primary,
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'pitr'",
        )
        .await
        .unwrap();
    assert_eq!(gone, [vec!["0".to_owned()]], "the table was not dropped");
    for r in replicas {
        caught_up(db, primary, r).await;
    }

    let config = Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: {ns}\n  vtctld: \"{}\"\n  pitr: {{enabled: true}}\n",
        vt.vtctld_grpc
    ))
    .unwrap();
    let name = ShardName::new("example", "commerce", "-");
    let stored = archive(
        &kube.client(),
        &config,
        &name,
        &ArchiveOptions {
            archive: ArchivePlace::Folder(vt.backups().to_path_buf()),
            mode: Mode::Take,
            backup_limit: Duration::from_secs(300),
        },
    )
    .await;
    assert_eq!(
        stored.outcome,
        ArchiveOutcome::Stored,
        "{}",
        serde_json::to_string(&stored).unwrap()
    );

    let shard = ShardRef {
        namespace: ns.to_owned(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: "-".parse().unwrap(),
    };
    // The same backups in an S3 bucket, as Vitess's `s3` storage would keep them.
    let s3 = S3Server::start_on("0.0.0.0");
    s3.create_bucket("vitess-backups");
    s3.mirror("vitess-backups", "node", vt.backups());
    let node_ip = node_address(kube).await;
    kube.create(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "vitess-s3", "namespace": ns},
        "stringData": {
            "AWS_ENDPOINT": format!("http://{node_ip}:{}", s3.port),
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        },
    }))
    .await;
    let settings = |archive: ArchiveSource| Settings {
        restore_image: "localhost/vtsnap/vtsnap-restore:0.1.0".into(),
        pitr_image: "localhost/vtsnap/vtsnap-pitr:0.1.0".into(),
        recovery_uid: TabletUid::new(defaults::RECOVERY_UID),
        mysqld_command: "mysqld".into(),
        mysqld_resources: json!({"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}}),
        deadline_seconds: 600,
        ready_seconds: 180,
        archive,
        image_pull_secrets: Vec::new(),
    };
    let from_s3 = |target: Target, after: After| RecoverOptions {
        settings: settings(ArchiveSource::Store {
            url: "s3://vitess-backups/node".into(),
            secret: Some("vitess-s3".into()),
        }),
        archive: ArchivePlace::Url {
            url: "s3://vitess-backups/node".into(),
            settings: s3.client_settings(),
        },
        target,
        snapshot: None,
        after,
        owner: None,
        dry_run: false,
    };

    // To the noted set, cut: the snapshot names exactly that set; nothing else is left.
    let to_gtid = recover(
        &kube.client(),
        &shard,
        &from_s3(Target::Through(noted_set.clone()), After::Cut),
    )
    .await;
    let line = serde_json::to_string(&to_gtid).unwrap();
    assert_eq!(to_gtid.outcome, RecoverOutcome::Recovered, "{line}");
    assert!(to_gtid.left.is_empty(), "{line}");
    assert!(!to_gtid.increments.is_empty(), "{line}");
    let cut = to_gtid.snapshot.clone().unwrap();
    let taken = kube
        .wait_for(&snapshots(), ns, &cut, "readyToUse", LIMIT, snapshot_ready)
        .await;
    let recorded = taken["metadata"]["annotations"]["vtsnap.io/gtid-executed"]
        .as_str()
        .unwrap();
    assert_eq!(mysql_set(recorded), noted_set, "{taken}");
    assert_eq!(
        taken["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "vtsnap-pitr"
    );
    let pod = to_gtid.pod.clone().unwrap();
    kube.wait_gone(&super::pods(), ns, &pod, LIMIT).await;
    kube.wait_gone(&pvcs(), ns, &pod, LIMIT).await;

    // To the drop's second, served, as its users ask: the plugin's Job runs in the
    // release's namespace, so the recovery's objects name it rather than being owned.
    let at = k8s_openapi::jiff::Timestamp::from_second(drop_at).unwrap();
    let args = [
        "vtsnap",
        "recover",
        "example/commerce/-",
        "--to-time",
        &at.to_string(),
        "--wait",
        "--timeout",
        "10m",
        "--install-namespace",
        install_ns,
        "-o",
        "json",
    ];
    let out = vtsnap_e2e::kubectl_vtsnap(kube.kubeconfig(), &args);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{printed}");
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let to_time = made["run"].clone();
    assert_eq!(made["result"], "succeeded", "{printed}");
    assert_eq!(to_time["outcome"], "recovered", "{printed}");
    let rpo = to_time["rpoSeconds"].as_i64().unwrap();
    assert!((0..=60).contains(&rpo), "{printed}");
    let served = to_time["pod"].as_str().unwrap().to_owned();
    assert!(
        made["cleanup"]
            .as_str()
            .is_some_and(|c| c.contains(&format!("-n {ns} {served}"))),
        "{printed}"
    );
    let pod = kube.get(&super::pods(), ns, &served).await.unwrap();
    assert!(pod["metadata"]["ownerReferences"].is_null(), "{pod}");
    assert_eq!(
        pod["metadata"]["annotations"]["vtsnap.io/owner-job"],
        format!("{install_ns}/{}", made["job"].as_str().unwrap())
    );
    let line = printed;
    let alias = TabletAlias::new("zone1", defaults::RECOVERY_UID);
    db.insert(&alias, ns, &served);
    assert_eq!(
        db.value(&alias, "CHECKSUM TABLE vt_commerce.pitr").await,
        noted_sum,
        "{line}"
    );
    let after = mysql_set(&db.value(&alias, "SELECT @@global.gtid_executed").await);
    assert!(noted_set.is_subset_of(&after), "{after} lacks {noted_set}");
    // The served Pod and its PVC are the user's to delete.
    let dp = DeleteParams::background();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(kube.client(), ns);
    pods.delete(&served, &dp).await.unwrap();
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(kube.client(), ns);
    claims.delete(&served, &dp).await.unwrap();
    kube.wait_gone(&super::pods(), ns, &served, LIMIT).await;
    kube.wait_gone(&pvcs(), ns, &served, LIMIT).await;
    // The cut is the user's too; this story's later parts count the shard's snapshots.
    let cuts = vtsnap_core::reconcile::apis::volume_snapshots(&kube.client(), ns);
    cuts.delete(&cut, &dp).await.unwrap();
    kube.wait_gone(&snapshots(), ns, &cut, LIMIT).await;
    Recovered { to_gtid, to_time }
}

/// The node's address, where Pods reach the host's listeners.
async fn node_address(kube: &RealKube) -> String {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(kube.client());
    let list = nodes.list(&Default::default()).await.unwrap();
    list.items
        .iter()
        .flat_map(|n| n.status.iter().flat_map(|s| s.addresses.iter().flatten()))
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
        .expect("the node has an InternalIP")
}

fn pvcs() -> kube::core::ApiResource {
    vtsnap_testkit::real_kube::resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
}

impl Recovered {
    /// The story's line.
    pub fn story(&self) -> String {
        format!(
            "PITR: a dropped table recovered as Pods from {} and {} increment(s): to its GTID \
             set from S3, cut into {}; to its second by kubectl vtsnap recover's Job, served (RPO {} \
             s, RTO {} ms)",
            self.to_time["base"].as_str().unwrap_or("?"),
            self.to_time["increments"].as_array().map_or(0, Vec::len),
            self.to_gtid.snapshot.as_deref().unwrap_or("?"),
            self.to_time["rpoSeconds"].as_i64().unwrap_or(-1),
            self.to_time["rtoMs"].as_u64().unwrap_or(0),
        )
    }
}

/// The line as the story prints it.
pub fn summary(r: &RecoverLine) -> Value {
    json!({"base": r.base, "increments": r.increments.len(), "rpo_seconds": r.rpo_seconds,
           "rto_ms": r.rto_ms, "snapshot": r.snapshot})
}

/// A printed line (the plugin's) as the story prints it.
pub fn summary_of_line(r: &Value) -> Value {
    json!({"base": r["base"], "increments": r["increments"].as_array().map_or(0, Vec::len),
           "rpo_seconds": r["rpoSeconds"], "rto_ms": r["rtoMs"], "snapshot": r["snapshot"]})
}
