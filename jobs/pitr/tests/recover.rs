//! `vtsnap-pitr run` against the in-memory API with a FAKE kubelet (the node tier runs the
//! real one, `e2e/suite/tests/pods/recover.rs`): the recovery's PVC and Pod are made,
//! the replay's report read, the volume cut or served; a run killed just before each of
//! its writes leaves only what its Job owns (and the cut, once made, which is the user's).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};
use vtsnap_core::coverage::{GtidSet, Text};
use vtsnap_core::naming::TabletUid;
use vtsnap_core::pitr::chain::Target;
use vtsnap_core::pitr::run::After;
use vtsnap_core::pitr::run::{RecoverOutcome, RunVerdict};
use vtsnap_core::restore_pod::JobOwner;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::{GROUP, GtidFlavor, PLURAL};
use vtsnap_pitr::archive::ArchivePlace;
use vtsnap_pitr::decide::recovery::{ArchiveSource, REPLAY_CONTAINER, Settings, defaults};
use vtsnap_pitr::recover::{RecoverOptions, recover};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;
use vtsnap_testkit::operator_objects::operator_shard;

const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
const INCREMENT: &str = "2026-12-01.101001.zone1-0000000103";
const PITR: &str = "vtsnap-pitr";

struct World {
    kube: FakeKube,
    archive: tempfile::TempDir,
    _vtctld: FakeVtctld,
}

/// The shard's tablets, snapshot `snap-a` (`U:1-100`, cut 10:00) and one increment to
/// `U:1-150` in the archive.
fn world() -> World {
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    shard().replicas(3).primary(1).install(&kube, &vtctld);
    let cut = "2026-12-01T10:00:00Z".parse().unwrap();
    kube.put_json(
        GROUP,
        PLURAL,
        operator_shard().snapshot("snap-a", cut).object(),
    );
    let archive = tempfile::tempdir().unwrap();
    let dir = archive.path().join("commerce/-").join(INCREMENT);
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = json!({
        "BackupName": INCREMENT, "BackupMethod": "builtin", "Incremental": true,
        "Position": format!("MySQL56/{U}:1-150"), "PurgedPosition": "MySQL56/",
        "FromPosition": format!("MySQL56/{U}:1-90"),
        "BackupTime": "2026-12-01T10:10:00Z", "FinishedTime": "2026-12-01T10:10:00Z",
        "TabletAlias": "zone1-0000000103", "Keyspace": "commerce", "Shard": "-",
        "IncrementalDetails": {"FirstTimestamp": "2026-12-01T09:59:00Z", "LastTimestamp": "2026-12-01T10:10:00Z"},
        "CompressionEngine": "pargzip", "SkipCompress": false,
        "FileEntries": [{"Base": "BinLog", "Name": "vt-0000000103-bin.000002", "Hash": "0000abcd"}]
    });
    std::fs::write(dir.join("MANIFEST"), manifest.to_string()).unwrap();
    World {
        kube,
        archive,
        _vtctld: vtctld,
    }
}

fn options(w: &World, after: After) -> RecoverOptions {
    RecoverOptions {
        settings: Settings {
            restore_image: "vtsnap/vtsnap-restore:1".into(),
            pitr_image: "vtsnap/vtsnap-pitr:1".into(),
            recovery_uid: TabletUid::new(defaults::RECOVERY_UID),
            mysqld_command: "mysqld".into(),
            mysqld_resources: json!({}),
            deadline_seconds: 600,
            ready_seconds: 60,
            archive: ArchiveSource::Volume {
                root: "/vt/backups".into(),
                source: json!({"nfs": {"server": "nfs", "path": "/backups"}}),
            },
            image_pull_secrets: Vec::new(),
        },
        archive: ArchivePlace::Folder(w.archive.path().to_path_buf()),
        target: Target::Through(
            GtidSet::parse(GtidFlavor::Mysql56, &format!("{U}:1-120"), Text::Server).unwrap(),
        ),
        snapshot: None,
        after,
        owner: Some(JobOwner {
            name: "recover-1".into(),
            uid: "job-uid".into(),
            namespace: None,
        }),
        dry_run: false,
    }
}

fn shard_ref() -> ShardRef {
    ShardRef {
        namespace: "vitess".into(),
        cluster: "example".into(),
        keyspace: "commerce".into(),
        shard: "-".parse().unwrap(),
    }
}

fn ours(o: &Value) -> bool {
    o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == PITR
}

/// FAKE kubelet and snapshotter: binds the PVC, runs the Pod (the replay hands over
/// `message` and ends with `code`; mysqld stops when `after` is a cut), readies the cut.
async fn fake_kubelet(kube: FakeKube, code: i64, message: String, after: After) {
    let mut pod_done = false;
    loop {
        if let Some(mut pvc) = kube
            .list_json("", "persistentvolumeclaims")
            .into_iter()
            .find(ours)
            && pvc["status"]["phase"] != "Bound"
        {
            pvc["status"] = json!({"phase": "Bound"});
            kube.put_json("", "persistentvolumeclaims", pvc);
        }
        if !pod_done && let Some(mut pod) = kube.list_json("", "pods").into_iter().find(ours) {
            let replay = json!({"name": REPLAY_CONTAINER, "state": {"terminated": {"exitCode": code, "message": message}}});
            let mysqld = match (after, code) {
                (After::Cut, 0) => {
                    json!({"name": "mysqld", "state": {"terminated": {"exitCode": 0}}})
                }
                _ => json!({"name": "mysqld", "state": {"running": {}}}),
            };
            let phase = match (after, code) {
                (After::Cut, 0) => "Succeeded",
                _ => "Running",
            };
            pod["status"] = json!({"phase": phase,
                "initContainerStatuses": [
                    {"name": "vtsnap-restore", "state": {"terminated": {"exitCode": 0}}},
                    {"name": "fetch", "state": {"terminated": {"exitCode": 0}}}],
                "containerStatuses": [mysqld, replay]});
            kube.put_json("", "pods", pod);
            pod_done = true;
        }
        for mut s in kube.list_json(GROUP, PLURAL).into_iter().filter(ours) {
            if s["status"]["readyToUse"] != true {
                s["status"] = json!({"readyToUse": true});
                kube.put_json(GROUP, PLURAL, s);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn report(set: &str) -> String {
    format!(r#"{{"bytes":4096,"lastTransaction":null,"gtidExecuted":"{set}"}}"#)
}

fn left_behind(kube: &FakeKube) -> Vec<Value> {
    ["pods", "persistentvolumeclaims"]
        .into_iter()
        .flat_map(|plural| kube.list_json("", plural))
        .filter(ours)
        .collect()
}

fn cuts(kube: &FakeKube) -> Vec<Value> {
    kube.list_json(GROUP, PLURAL)
        .into_iter()
        .filter(ours)
        .collect()
}

#[tokio::test]
async fn a_cut_leaves_only_the_snapshot_naming_the_replayed_set() {
    let w = world();
    let set = format!("{U}:1-120");
    let kubelet = tokio::spawn(fake_kubelet(w.kube.clone(), 0, report(&set), After::Cut));
    let line = recover(
        &w.kube.client_as("pitr-recover"),
        &shard_ref(),
        &options(&w, After::Cut),
    )
    .await;
    kubelet.abort();
    let text = serde_json::to_string(&line).unwrap();
    assert_eq!(line.outcome, RecoverOutcome::Recovered, "{text}");
    // Every request the recovery sent, its chart account may send.
    let refused = vtsnap_testkit::rbac::refused("pitr-recover", &w.kube.log());
    assert!(refused.is_empty(), "{refused:?}");
    assert_eq!(line.base.as_deref(), Some("snap-a"), "{text}");
    assert_eq!(line.increments, [INCREMENT], "{text}");
    assert!(left_behind(&w.kube).is_empty(), "{text}");
    let cut = cuts(&w.kube);
    assert_eq!(cut.len(), 1, "{text}");
    assert_eq!(
        cut[0]["metadata"]["annotations"]["vtsnap.io/gtid-executed"],
        set.as_str()
    );
    assert!(
        cut[0]["metadata"].get("ownerReferences").is_none(),
        "{}",
        cut[0]
    );
    assert_eq!(
        line.snapshot.as_deref(),
        cut[0]["metadata"]["name"].as_str()
    );
}

#[tokio::test]
async fn a_served_recovery_stays_owned_by_its_job_and_a_failed_one_leaves_nothing() {
    let w = world();
    let kubelet = tokio::spawn(fake_kubelet(
        w.kube.clone(),
        0,
        report(&format!("{U}:1-120")),
        After::Serve,
    ));
    let line = recover(&w.kube.client(), &shard_ref(), &options(&w, After::Serve)).await;
    kubelet.abort();
    let text = serde_json::to_string(&line).unwrap();
    assert_eq!(line.outcome, RecoverOutcome::Recovered, "{text}");
    assert!(
        line.shell.as_deref().unwrap().contains("kubectl exec"),
        "{text}"
    );
    // The line as `kubectl vtsnap recover` reads it names the served Pod.
    let verdict: RunVerdict = serde_json::from_str(&text).unwrap();
    assert_eq!(verdict.served_pod(), line.pod.as_deref(), "{text}");
    assert!(verdict.served_pod().is_some(), "{text}");
    let served = left_behind(&w.kube);
    assert_eq!(served.len(), 2, "{text}");
    for o in &served {
        assert_eq!(o["metadata"]["ownerReferences"][0]["uid"], "job-uid", "{o}");
    }

    // The replay's check fails: its words are the error, and nothing is left.
    let w = world();
    let said = "vtsnap-pitr: the replay stopped short of the target".to_owned();
    let kubelet = tokio::spawn(fake_kubelet(w.kube.clone(), 3, said.clone(), After::Cut));
    let line = recover(&w.kube.client(), &shard_ref(), &options(&w, After::Cut)).await;
    kubelet.abort();
    let text = serde_json::to_string(&line).unwrap();
    assert_eq!(line.outcome, RecoverOutcome::Failed, "{text}");
    assert!(line.error.as_deref().unwrap().contains(&said), "{text}");
    assert!(left_behind(&w.kube).is_empty(), "{text}");
    assert!(cuts(&w.kube).is_empty(), "{text}");
}

/// A run killed just before each of its writes (held until the kill): whatever it left
/// is owned by its Job, for the garbage collector.
#[tokio::test]
async fn a_run_killed_at_each_write_leaves_only_what_its_job_owns() {
    let points = [
        (Verb::Create, "persistentvolumeclaims"),
        (Verb::Create, "pods"),
        (Verb::Create, "volumesnapshots"),
        (Verb::Delete, "pods"),
        (Verb::Delete, "persistentvolumeclaims"),
    ];
    for (verb, plural) in points {
        let w = world();
        let reached = std::sync::Arc::new(tokio::sync::Notify::new());
        let signal = reached.clone();
        w.kube.fault(
            Fault::on(is(verb, plural))
                .then_change(move |_| signal.notify_one())
                .delay(Duration::from_secs(3600)),
        );
        let kubelet = tokio::spawn(fake_kubelet(
            w.kube.clone(),
            0,
            report(&format!("{U}:1-120")),
            After::Cut,
        ));
        let (client, opts) = (w.kube.client(), options(&w, After::Cut));
        let run = tokio::spawn(async move { recover(&client, &shard_ref(), &opts).await });
        reached.notified().await;
        run.abort();
        assert!(run.await.unwrap_err().is_cancelled(), "{verb:?} {plural}");
        kubelet.abort();
        let left = left_behind(&w.kube);
        // Only a run killed before its first write leaves nothing.
        let first = (verb, plural) == (Verb::Create, "persistentvolumeclaims");
        assert_eq!(left.is_empty(), first, "{verb:?} {plural}: {left:?}");
        for o in left {
            assert_eq!(
                (
                    &o["metadata"]["ownerReferences"][0]["kind"],
                    &o["metadata"]["ownerReferences"][0]["uid"]
                ),
                (&json!("Job"), &json!("job-uid")),
                "{verb:?} {plural}: {o}"
            );
        }
    }
}

/// `--snapshot` naming no base is refused as bad usage, naming it, before anything is made.
#[tokio::test]
async fn a_named_snapshot_that_is_no_base_is_named_and_nothing_is_made() {
    let w = world();
    let unusable = vtsnap_testkit::operator_objects::VtsnapSnapshot {
        ready: false,
        ..operator_shard().snapshot("snap-b", "2026-12-01T10:05:00Z".parse().unwrap())
    };
    w.kube.put_json(GROUP, PLURAL, unusable.object());
    for (name, words) in [
        (
            "snap-x",
            "--snapshot snap-x: no snapshot of vitess/example/commerce/- has that name",
        ),
        ("snap-b", "--snapshot snap-b: not a base"),
    ] {
        let o = RecoverOptions {
            snapshot: Some(name.into()),
            ..options(&w, After::Cut)
        };
        let line = recover(&w.kube.client(), &shard_ref(), &o).await;
        let text = serde_json::to_string(&line).unwrap();
        assert_eq!(line.outcome, RecoverOutcome::Usage, "{text}");
        assert_eq!(line.exit().code(), 2, "{text}");
        assert!(line.error.as_deref().unwrap().contains(words), "{text}");
        assert!(
            left_behind(&w.kube).is_empty() && cuts(&w.kube).is_empty(),
            "{text}"
        );
    }
}
