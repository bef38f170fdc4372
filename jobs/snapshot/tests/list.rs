//! `list` against the fake Kubernetes API.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use vtsnap_core::config::Config;
use vtsnap_core::shard::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};
use vtsnap_core::snapshot::*;
use vtsnap_snapshot::list::{Filter, list, table};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};

/// A VolumeSnapshot of shard `(cluster, keyspace, shardSafe)`.
fn snap(
    name: &str,
    shard: (&str, &str, &str),
    created: &str,
    phase: Option<&str>,
    status: Value,
    gtid: (&str, &str),
) -> Value {
    let (cluster, keyspace, shard) = shard;
    let mut labels = json!({"app.kubernetes.io/managed-by": "vtsnap", LABEL_CLUSTER: cluster, LABEL_KEYSPACE: keyspace,
                            LABEL_SHARD: shard, LABEL_MODE: if gtid.0 == ANN_GTID_EXECUTED { "cold" } else { "online" }});
    if let Some(p) = phase {
        labels[LABEL_PHASE] = json!(p);
    }
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": name, "namespace": "vitess", "creationTimestamp": created, "labels": labels,
                     "annotations": {gtid.0: gtid.1, ANN_SOURCE_TABLET: "zone1-0000000101"}},
        "spec": {"source": {"persistentVolumeClaimName": "pvc"}},
        "status": status,
    })
}

fn world() -> (FakeKube, Config) {
    let kube = FakeKube::new();
    let ready = json!({"boundVolumeSnapshotContentName": "c", "creationTime": "2026-11-28T00:00:00Z", "readyToUse": true, "restoreSize": "10Gi"});
    let cut = json!({"boundVolumeSnapshotContentName": "c", "creationTime": "2026-11-29T00:00:00Z", "readyToUse": false});
    for v in [
        snap(
            "a-old",
            ("example", "commerce", "x-80"),
            "2026-11-27T00:00:00Z",
            Some("ready"),
            ready.clone(),
            (ANN_GTID_EXECUTED, "MariaDB/0-1-100"),
        ),
        // Labelled `cut` but the status is ready: the status wins.
        snap(
            "a-new",
            ("example", "commerce", "x-80"),
            "2026-11-28T00:00:00Z",
            Some("cut"),
            ready,
            (ANN_GTID_EXECUTED, "MariaDB/0-1-200"),
        ),
        snap(
            "a-cut",
            ("example", "commerce", "x-80"),
            "2026-11-29T00:00:00Z",
            Some("cut"),
            cut,
            (ANN_GTID_LOWER_BOUND, "MariaDB/0-1-300"),
        ),
        snap(
            "a-bad",
            ("example", "commerce", "x-80"),
            "2026-11-20T00:00:00Z",
            Some("failed"),
            json!({"error": {"message": "boom"}}),
            (ANN_GTID_EXECUTED, "MariaDB/0-1-50"),
        ),
        snap(
            "b-1",
            ("example", "commerce", "80-x"),
            "2026-11-28T00:00:00Z",
            None,
            json!({"error": {"message": "retrying"}}),
            (ANN_GTID_EXECUTED, "MariaDB/0-2-10"),
        ),
        snap(
            "other",
            ("other", "commerce", "x-80"),
            "2026-11-28T00:00:00Z",
            Some("ready"),
            json!({}),
            (ANN_GTID_EXECUTED, "MariaDB/0-3-10"),
        ),
    ] {
        kube.put_json(GROUP, PLURAL, v);
    }
    // Not vtsnap's: never listed.
    kube.put_json(GROUP, PLURAL, json!({"metadata": {"name": "manual", "namespace": "vitess", "labels": {LABEL_CLUSTER: "example"}}}));
    let config = Config::from_yaml(
        "clusters:\n- name: example\n  namespace: vitess\n- name: other\n  namespace: vitess\n",
    )
    .unwrap();
    (kube, config)
}

#[tokio::test]
async fn lists_one_shard_newest_first_with_phase_gtid_size_and_source() {
    let (kube, config) = world();
    let filter = Filter {
        cluster: Some("example".into()),
        keyspace: Some("commerce".into()),
        shard: Some("-80".into()),
    };
    let rows = list(&config, &filter, kube.client()).await.unwrap();
    let got: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.name.as_str(), r.phase.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("a-cut", "cut"),
            ("a-new", "ready"),
            ("a-old", "ready"),
            ("a-bad", "failed")
        ]
    );
    assert_eq!(
        rows[0].gtid.as_deref(),
        Some(">=MariaDB/0-1-300"),
        "an online snapshot shows a lower bound"
    );
    assert_eq!(rows[1].gtid.as_deref(), Some("MariaDB/0-1-200"));
    assert_eq!(rows[1].size.as_deref(), Some("10Gi"));
    assert_eq!(rows[1].source_tablet.as_deref(), Some("zone1-0000000101"));
    let t = table(&rows);
    assert!(
        t.ends_with("4 snapshots: 1 cut, 1 failed, 2 ready\n"),
        "{t}"
    );
}

#[tokio::test]
async fn lists_every_configured_cluster_and_reports_errors() {
    let (kube, config) = world();
    let rows = list(&config, &Filter::default(), kube.client())
        .await
        .unwrap();
    assert_eq!(
        rows.len(),
        6,
        "vtsnap's snapshots of both clusters, not the manual one"
    );
    assert!(rows.iter().any(|r| r.name == "b-1" && r.phase == "error"));
    let e = list(
        &config,
        &Filter {
            cluster: Some("nope".into()),
            ..Filter::default()
        },
        kube.client(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.exit().code(), 2);
    kube.fault(Fault::on(is(Verb::List, "volumesnapshots")).status(500));
    let e = list(&config, &Filter::default(), kube.client())
        .await
        .unwrap_err();
    assert_eq!(e.exit().code(), 1);
}

#[tokio::test]
async fn an_unreadable_snapshot_is_not_shown_as_something_it_is_not() {
    let (kube, config) = world();
    let mut bad = snap(
        "a-unreadable",
        ("example", "commerce", "x-80"),
        "2026-11-29T00:00:00Z",
        Some("done"),
        json!({}),
        (ANN_GTID_EXECUTED, "MariaDB/0-1-400"),
    );
    bad["metadata"]["annotations"][ANN_CUT_TIME] = json!("not a time");
    kube.put_json(GROUP, PLURAL, bad);
    let rows = list(&config, &Filter::default(), kube.client())
        .await
        .unwrap();
    assert_eq!(rows.len(), 6, "the six readable ones");
    assert!(rows.iter().all(|r| r.name != "a-unreadable"));
}

/// The COVERED and HEADROOM columns: a ready snapshot judged against its shard's primary
/// (the read itself is the GC's, tested on real MariaDB in the lab), never a guess.
#[test]
fn a_ready_snapshot_shows_whether_a_new_tablet_could_catch_up_from_it() {
    use std::time::Duration;
    use vtsnap_core::coverage::{GtidSet, PrimaryBinlogs, Purged, Text};
    use vtsnap_core::snapshot::{GtidFlavor, VolumeSnapshot};
    use vtsnap_snapshot::list::{Covered, coverage_of, row};
    let ready = json!({"boundVolumeSnapshotContentName": "c", "creationTime": "2026-11-28T00:00:00Z", "readyToUse": true});
    let at = |status: Value, gtid: (&str, &str)| {
        VolumeSnapshot::read(&snap(
            "s",
            ("example", "commerce", "x-80"),
            "2026-11-28T00:00:00Z",
            Some("ready"),
            status,
            gtid,
        ))
        .unwrap()
    };
    let primary = |oldest: &str| {
        Ok(PrimaryBinlogs {
            purged: Purged::MariadbOldestBinlogStart(
                GtidSet::parse(GtidFlavor::Mariadb, oldest, Text::Server).unwrap(),
            ),
            expiry: Some(Duration::from_secs(3 * 86_400)),
        })
    };
    let now: k8s_openapi::jiff::Timestamp = "2026-11-29T00:00:00Z".parse().unwrap();
    let s = at(ready.clone(), (ANN_GTID_EXECUTED, "MariaDB/0-1-200"));
    assert_eq!(
        coverage_of(&s, &primary("0-1-150"), now),
        (Some(Covered::Yes), Some(2 * 86_400))
    );
    assert_eq!(
        coverage_of(&s, &primary("0-1-250"), now),
        (Some(Covered::No), None)
    );
    assert_eq!(
        coverage_of(&s, &Err("vtctld down".into()), now),
        (Some(Covered::Unknown), None)
    );
    // online: judged at its lower bound
    let online = at(ready, (ANN_GTID_LOWER_BOUND, "MariaDB/0-1-200"));
    assert_eq!(
        coverage_of(&online, &primary("0-1-201"), now).0,
        Some(Covered::No)
    );
    // not ready: nothing to say
    let cut = at(
        json!({"boundVolumeSnapshotContentName": "c", "readyToUse": false}),
        (ANN_GTID_EXECUTED, "MariaDB/0-1-200"),
    );
    assert_eq!(coverage_of(&cut, &primary("0-1-150"), now), (None, None));
    // the table
    let mut r = row(&s, now);
    (r.covered, r.headroom_seconds) = coverage_of(&s, &primary("0-1-150"), now);
    let t = table(&[r]);
    let header = t.lines().next().unwrap();
    assert!(
        header.contains("COVERED") && header.contains("HEADROOM"),
        "{t}"
    );
    let line = t.lines().nth(1).unwrap();
    assert!(
        line.contains(" yes ") && line.trim_end().ends_with("2d"),
        "{t}"
    );
}
