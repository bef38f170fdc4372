//! core::events against the fake API server: what kube's Recorder writes (events.k8s.io/v1,
//! validated as the real server validates it), a repeat counted in the first Event's series,
//! a new note a new Event, and a failed write that is only logged.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use vtsnap_core::events::{EventType, Events, NOTE_LIMIT, Subject};
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};

fn writes_of_events(kube: &FakeKube) -> Vec<(Verb, String, u16)> {
    kube.log()
        .into_iter()
        .filter(|l| l.info.plural == "events")
        .map(|l| (l.info.verb, l.info.group, l.status))
        .collect()
}

#[tokio::test]
async fn an_event_says_who_did_what_to_which_object() {
    let kube = FakeKube::new();
    let events = Events::new(kube.client(), "vtsnap-snapshot");
    events
        .publish(
            &Subject::pod("vitess", "tablet-a", "u-1"),
            EventType::Normal,
            "Fence",
            "SnapshotFenced",
            "vtsnap fenced this tablet",
        )
        .await;
    let all = kube.events();
    assert_eq!(all.len(), 1, "{all:?}");
    let e = &all[0];
    assert_eq!(e["metadata"]["namespace"], "vitess");
    assert_eq!(
        (&e["type"], &e["reason"], &e["note"], &e["action"]),
        (
            &Value::from("Normal"),
            &Value::from("SnapshotFenced"),
            &Value::from("vtsnap fenced this tablet"),
            &Value::from("Fence")
        )
    );
    assert_eq!(e["reportingController"], "vtsnap-snapshot");
    assert!(!e["reportingInstance"].as_str().unwrap().is_empty(), "{e}");
    assert_eq!(
        (
            &e["regarding"]["kind"],
            &e["regarding"]["name"],
            &e["regarding"]["uid"]
        ),
        (
            &Value::from("Pod"),
            &Value::from("tablet-a"),
            &Value::from("u-1")
        )
    );
    assert_eq!(
        writes_of_events(&kube),
        [(Verb::Create, "events.k8s.io".to_owned(), 201)]
    );
}

#[tokio::test]
async fn the_same_note_again_is_a_series_and_another_note_a_new_event() {
    let kube = FakeKube::new();
    let events = Events::new(kube.client(), "vtsnap-gc");
    let cluster = Subject::vitess_cluster("vitess", "example", Some("u-1"));
    for snapshot in ["s-1", "s-2", "s-1"] {
        events
            .publish(
                &cluster,
                EventType::Normal,
                "DeleteSnapshot",
                "SnapshotDeleted",
                &format!("deleted VolumeSnapshot {snapshot}"),
            )
            .await;
    }
    let mut notes: Vec<(String, Value)> = kube
        .events()
        .iter()
        .map(|e| {
            (
                e["note"].as_str().unwrap().to_owned(),
                e["series"]["count"].clone(),
            )
        })
        .collect();
    notes.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        notes,
        [
            ("deleted VolumeSnapshot s-1".to_owned(), Value::from(2)),
            ("deleted VolumeSnapshot s-2".to_owned(), Value::Null)
        ]
    );
    let verbs: Vec<Verb> = writes_of_events(&kube).iter().map(|w| w.0).collect();
    assert_eq!(verbs, [Verb::Create, Verb::Create, Verb::Patch]);
    assert!(writes_of_events(&kube).iter().all(|w| w.2 < 300));
}

#[tokio::test]
async fn a_note_longer_than_the_api_takes_is_cut_on_a_character() {
    let kube = FakeKube::new();
    let events = Events::new(kube.client(), "vtsnap-gc");
    // 1023 bytes, then a two-byte character that would end past the limit.
    let long = format!("{}é and more", "x".repeat(NOTE_LIMIT - 1));
    events
        .publish(
            &Subject::snapshot("vitess", "s-1"),
            EventType::Warning,
            "MarkUnusable",
            "SnapshotUnusable",
            &long,
        )
        .await;
    let all = kube.events();
    assert_eq!(all.len(), 1, "{:?}", writes_of_events(&kube));
    assert_eq!(all[0]["note"].as_str().unwrap(), "x".repeat(NOTE_LIMIT - 1));
    assert_eq!(all[0]["type"], "Warning");
}

#[tokio::test]
async fn a_nodes_event_is_written_in_default() {
    let kube = FakeKube::new();
    Events::new(kube.client(), "vtsnap-node")
        .publish(
            &Subject::node("node-a"),
            EventType::Warning,
            "ReadRegistry",
            "HoldRegistryCorrupt",
            "moved aside",
        )
        .await;
    let all = kube.events();
    assert_eq!(all.len(), 1, "{:?}", writes_of_events(&kube));
    assert_eq!(all[0]["metadata"]["namespace"], "default");
    assert!(all[0]["regarding"].get("namespace").is_none());
}

#[tokio::test]
async fn an_event_that_cannot_be_written_is_only_logged() {
    let kube = FakeKube::new();
    kube.fault(Fault::on(is(Verb::Create, "events")).status(403));
    Events::new(kube.client(), "vtsnap-drill")
        .publish(
            &Subject::snapshot("vitess", "s-1"),
            EventType::Normal,
            "RecordDrill",
            "DrillPassed",
            "restored and checked",
        )
        .await;
    assert!(kube.events().is_empty());
    assert_eq!(
        writes_of_events(&kube),
        [(Verb::Create, "events.k8s.io".to_owned(), 403)]
    );
}
