//! The fake API server, exercised through a real `kube::Client`.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

use super::*;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "labels": labels.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<serde_json::Map<_, _>>()},
        "data": {"k": "v"}
    }))
    .unwrap()
}

fn api(fake: &FakeKube) -> Api<ConfigMap> {
    Api::namespaced(fake.client(), "ns")
}

fn code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn create_get_and_duplicate_create() {
    let fake = FakeKube::new();
    let a = api(&fake);
    let made = a
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    assert!(made.metadata.resource_version.is_some());
    assert!(made.metadata.uid.is_some());
    assert_eq!(a.get("a").await.unwrap().data, made.data);
    assert_eq!(
        code(
            a.create(&PostParams::default(), &cm("a", &[]))
                .await
                .unwrap_err()
        ),
        409
    );
    assert_eq!(code(a.get("missing").await.unwrap_err()), 404);
    assert_eq!(fake.writes(), vec!["Create configmaps ns/a"]);
}

#[tokio::test]
async fn stale_updates_conflict_and_fresh_ones_bump_the_version() {
    let fake = FakeKube::new();
    let a = api(&fake);
    let v1 = a
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let mut v2 = v1.clone();
    v2.data = Some([("k".to_owned(), "2".to_owned())].into());
    let v2 = a.replace("a", &PostParams::default(), &v2).await.unwrap();
    assert_ne!(v1.metadata.resource_version, v2.metadata.resource_version);
    // Writing with the old resourceVersion must fail.
    assert_eq!(
        code(
            a.replace("a", &PostParams::default(), &v1)
                .await
                .unwrap_err()
        ),
        409
    );
    // A merge patch carrying a stale resourceVersion is a compare-and-swap that fails.
    let stale =
        json!({"metadata": {"resourceVersion": v1.metadata.resource_version}, "data": {"k": "3"}});
    assert_eq!(
        code(
            a.patch("a", &PatchParams::default(), &Patch::Merge(&stale))
                .await
                .unwrap_err()
        ),
        409
    );
    assert_eq!(a.get("a").await.unwrap().data.unwrap()["k"], "2");
}

#[tokio::test]
async fn merge_and_json_patches() {
    let fake = FakeKube::new();
    let a = api(&fake);
    a.create(&PostParams::default(), &cm("a", &[("x", "1")]))
        .await
        .unwrap();
    let p = json!({"metadata": {"labels": {"x": null, "y": "2"}}});
    let got = a
        .patch("a", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(
        got.metadata.labels.unwrap(),
        [("y".to_owned(), "2".to_owned())].into()
    );
    let jp: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/k", "value": "v"},
        {"op": "replace", "path": "/data/k", "value": "w"}
    ]))
    .unwrap();
    let got = a
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(jp.clone()))
        .await
        .unwrap();
    assert_eq!(got.data.unwrap()["k"], "w");
    // The `test` op now fails: 422, nothing changed.
    assert_eq!(
        code(
            a.patch("a", &PatchParams::default(), &Patch::<()>::Json(jp))
                .await
                .unwrap_err()
        ),
        422
    );
}

#[tokio::test]
async fn label_selectors_and_pagination() {
    let fake = FakeKube::new();
    let a = api(&fake);
    for i in 0..7 {
        let team = if i % 2 == 0 { "a" } else { "b" };
        a.create(
            &PostParams::default(),
            &cm(&format!("c{i}"), &[("team", team)]),
        )
        .await
        .unwrap();
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            a.list(&ListParams::default().labels("team=a"))
                .await
                .unwrap()
        ),
        ["c0", "c2", "c4", "c6"]
    );
    assert_eq!(
        names(
            a.list(&ListParams::default().labels("team in (b)"))
                .await
                .unwrap()
        ),
        ["c1", "c3", "c5"]
    );
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut pages = 0;
    loop {
        let page = a.list(&lp).await.unwrap();
        pages += 1;
        let cont = page.metadata.continue_.clone();
        seen.extend(names(page));
        match cont {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
    let bad = a
        .list(&ListParams::default().continue_token("zz"))
        .await
        .unwrap_err();
    assert_eq!(code(bad), 400);
}

#[tokio::test]
async fn the_status_subresource_is_separate() {
    let fake = FakeKube::new();
    let gvk = GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshot");
    let ar = ApiResource::from_gvk(&gvk);
    let a: Api<DynamicObject> = Api::namespaced_with(fake.client(), "ns", &ar);
    let mut vs = DynamicObject::new("snap", &ar);
    vs.data = json!({"spec": {"source": {"persistentVolumeClaimName": "pvc"}}, "status": {"readyToUse": true}});
    a.create(&PostParams::default(), &vs).await.unwrap();
    // Status sent to the main resource on create is kept only because the object is new;
    // an update of the main resource cannot change it.
    let p = json!({"status": {"readyToUse": false}, "spec": {"volumeSnapshotClassName": "c"}});
    let got = a
        .patch("snap", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(got.data["status"]["readyToUse"], true);
    assert_eq!(got.data["spec"]["volumeSnapshotClassName"], "c");
    let got = a
        .patch_status(
            "snap",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"readyToUse": false}, "spec": {"x": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(got.data["status"]["readyToUse"], false);
    assert!(
        got.data["spec"].get("x").is_none(),
        "a status write must not change spec"
    );
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let fake = FakeKube::new();
    let a: Api<Lease> = Api::namespaced(fake.client(), "ns");
    let lease: Lease =
        serde_json::from_value(json!({"metadata": {"name": "l", "finalizers": ["x/y"]}})).unwrap();
    a.create(&PostParams::default(), &lease).await.unwrap();
    a.delete("l", &DeleteParams::default()).await.unwrap();
    let held = a.get("l").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    a.patch(
        "l",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(code(a.get("l").await.unwrap_err()), 404);
    assert_eq!(
        code(a.delete("l", &DeleteParams::default()).await.unwrap_err()),
        404
    );
}

#[tokio::test]
async fn delete_preconditions_are_checked() {
    let fake = FakeKube::new();
    let a = api(&fake);
    a.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            resource_version: Some("999".into()),
            uid: None,
        }),
        ..Default::default()
    };
    assert_eq!(code(a.delete("a", &dp).await.unwrap_err()), 409);
    assert!(a.get("a").await.is_ok());
}

#[tokio::test]
async fn watches_deliver_changes_after_a_resource_version() {
    let fake = FakeKube::new();
    let a = api(&fake);
    a.create(&PostParams::default(), &cm("old", &[("w", "1")]))
        .await
        .unwrap();
    let rv = a
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = a
        .watch(&WatchParams::default().labels("w=1").timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    a.create(&PostParams::default(), &cm("other", &[("w", "2")]))
        .await
        .unwrap();
    a.create(&PostParams::default(), &cm("new", &[("w", "1")]))
        .await
        .unwrap();
    a.delete("new", &DeleteParams::default()).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(c) => got.push(format!("added {}", c.metadata.name.unwrap())),
            WatchEvent::Deleted(c) => got.push(format!("deleted {}", c.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got, ["added new", "deleted new"]);
}

#[tokio::test]
async fn a_write_after_the_watches_are_dropped_never_reaches_them() {
    let fake = FakeKube::new();
    let a = api(&fake);
    // Each round is a coin toss if the stream may pick either of its ready wake-ups.
    for round in 0..20 {
        let rv = a
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
        let mut stream = a
            .watch(&WatchParams::default().timeout(5), &rv)
            .await
            .unwrap()
            .boxed();
        fake.drop_watches();
        // No await in between: the stream has not run since it was ended.
        fake.put(&cm(&format!("late-{round}"), &[]));
        let next = stream.try_next().await;
        assert!(matches!(next, Ok(None)), "round {round}: {next:?}");
    }
}

#[tokio::test]
async fn the_nth_matching_request_fails_as_injected() {
    let fake = FakeKube::new();
    let a = api(&fake);
    a.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    fake.fault(Fault::on(is(Verb::Get, "configmaps")).nth(2).status(503));
    assert!(a.get("a").await.is_ok());
    assert_eq!(code(a.get("a").await.unwrap_err()), 503);
    assert!(a.get("a").await.is_ok(), "a one-shot fault fires once");

    fake.fault(Fault::on(is(Verb::Create, "configmaps")).status(409));
    assert_eq!(
        code(
            a.create(&PostParams::default(), &cm("b", &[]))
                .await
                .unwrap_err()
        ),
        409
    );
    assert_eq!(
        code(a.get("b").await.unwrap_err()),
        404,
        "an injected failure writes nothing"
    );

    fake.fault(Fault::on(is(Verb::List, "configmaps")).drop_connection());
    assert!(matches!(
        a.list(&ListParams::default()).await.unwrap_err(),
        kube::Error::Service(_)
    ));

    fake.fault(Fault::on(is(Verb::Get, "configmaps")).delay(Duration::from_millis(300)));
    let t = std::time::Instant::now();
    assert!(a.get("a").await.is_ok());
    assert!(t.elapsed() >= Duration::from_millis(300));

    fake.set_down(true);
    assert!(a.get("a").await.is_err());
    fake.set_down(false);
    assert!(a.get("a").await.is_ok());
}

#[tokio::test]
async fn faults_can_fail_every_matching_request() {
    let fake = FakeKube::new();
    let a = api(&fake);
    a.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    fake.fault(Fault::on(|r| r.verb == Verb::Get).always().status(500));
    for _ in 0..3 {
        assert_eq!(code(a.get("a").await.unwrap_err()), 500);
    }
    fake.clear_faults();
    assert!(a.get("a").await.is_ok());
}

#[tokio::test]
async fn kubes_recorder_writes_events_and_counts_a_repeat_in_their_series() {
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::runtime::events::{Event, EventType, Recorder};
    let fake = FakeKube::new();
    let recorder = Recorder::new(fake.client(), "vtsnap-test".into());
    let about = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some("tablet-a".into()),
        namespace: Some("ns".into()),
        ..ObjectReference::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: "Fenced".into(),
        note: Some("fenced".into()),
        action: "Fence".into(),
        secondary: None,
    };
    recorder.publish(&event, &about).await.unwrap();
    recorder.publish(&event, &about).await.unwrap();
    let events = fake.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["series"]["count"], 2);
    assert_eq!(events[0]["note"], "fenced");
    let verbs: Vec<_> = fake.log().iter().map(|l| l.info.verb).collect();
    assert_eq!(verbs, [Verb::Create, Verb::Patch]);
}

#[tokio::test]
async fn an_event_the_real_server_would_refuse_is_refused() {
    use k8s_openapi::api::events::v1::Event;
    let fake = FakeKube::new();
    let api: Api<Event> = Api::namespaced(fake.client(), "ns");
    // An old-style Event sent to events.k8s.io: no action, no reporting controller.
    let old_style: Event = serde_json::from_value(json!({
        "metadata": {"name": "e-1"},
        "eventTime": "2026-12-01T10:00:00.000000Z",
        "reason": "Fenced", "type": "Normal", "deprecatedCount": 1,
        "regarding": {"kind": "Pod", "name": "tablet-a", "namespace": "ns"}
    }))
    .unwrap();
    let e = api
        .create(&PostParams::default(), &old_style)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = e else {
        panic!("not an API error: {e}")
    };
    assert_eq!(status.code, 422);
    for field in ["reportingController", "action", "deprecatedCount"] {
        assert!(status.message.contains(field), "{}", status.message);
    }
    assert!(fake.events().is_empty());
}
