//! The nap of a poll on one object against the fake Kubernetes API, in virtual time: it
//! ends at the object's next change (the snapshot job's cut wait on its VolumeSnapshot),
//! never sleeps past its bound, and a watch it cannot open is counted and napped through.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use tokio::time::Instant;
use vtsnap_core::reconcile::{Wake, apis, watch};
use vtsnap_core::snapshot::GROUP;
use vtsnap_testkit::fake_kube::{FakeKube, Fault, Verb, is};

const NAME: &str = "commerce-x-80-1";
/// The nap every test takes: far longer than any change it should wake on.
const NAP: Duration = Duration::from_secs(10);

fn snapshot(ready: bool) -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": NAME, "namespace": "vitess"},
        "spec": {"source": {"persistentVolumeClaimName": "vttablet-pvc"}},
        "status": {"readyToUse": ready}
    })
}

/// A fake with the snapshot just created, and the version its creation answered.
fn created() -> (FakeKube, String) {
    let kube = FakeKube::new();
    let v = kube.put_json(GROUP, "volumesnapshots", snapshot(false));
    let version = v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    (kube, version)
}

fn snapshots(kube: &FakeKube) -> Api<DynamicObject> {
    apis::volume_snapshots(&kube.client(), "vitess")
}

/// Marks the snapshot ready after `after`, as the CSI snapshot controller would.
fn ready_after(kube: &FakeKube, after: Duration) {
    let k = kube.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        k.put_json(GROUP, "volumesnapshots", snapshot(true));
    });
}

async fn nap_from(kube: &FakeKube, version: Option<&str>) -> Duration {
    let mut wake = Wake::watch(&snapshots(kube), NAME, version).await;
    let start = Instant::now();
    wake.nap(NAP).await;
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn a_nap_ends_at_the_snapshots_change() {
    let (kube, version) = created();
    ready_after(&kube, Duration::from_millis(300));
    let took = nap_from(&kube, Some(&version)).await;
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(350),
        "{took:?}"
    );
}

/// A change made before the watch was opened, but after the version the wait read, still
/// wakes it: the watch starts from that version.
#[tokio::test(start_paused = true)]
async fn a_change_after_the_version_read_wakes_at_once() {
    let (kube, version) = created();
    kube.put_json(GROUP, "volumesnapshots", snapshot(true));
    let took = nap_from(&kube, Some(&version)).await;
    assert_eq!(took, Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_quiet_nap_lasts_exactly_its_bound() {
    let (kube, version) = created();
    let mut wake = Wake::watch(&snapshots(&kube), NAME, Some(&version)).await;
    for most in [Duration::from_millis(200), Duration::ZERO, NAP] {
        let start = Instant::now();
        wake.nap(most).await;
        assert_eq!(start.elapsed(), most);
    }
}

/// A Role without `watch`: the nap falls back to its whole length (the poll's beat) and the
/// fallback is counted, so that an install's tests can tell.
#[tokio::test(start_paused = true)]
async fn a_refused_watch_is_counted_and_napped_through() {
    let (kube, version) = created();
    kube.fault(
        Fault::on(is(Verb::Watch, "volumesnapshots"))
            .status(403)
            .always(),
    );
    let before = watch::fallbacks();
    let mut wake = Wake::watch(&snapshots(&kube), NAME, Some(&version)).await;
    assert!(watch::fallbacks() > before, "the refusal was not counted");
    ready_after(&kube, Duration::from_millis(300));
    let start = Instant::now();
    wake.nap(Duration::from_secs(1)).await;
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

/// The server ends the watch (its timeout) during a nap: the watch is opened again where it
/// ended, inside the same nap, and the change after that still wakes it.
#[tokio::test(start_paused = true)]
async fn a_watch_the_server_ends_still_wakes_the_nap() {
    let (kube, version) = created();
    let k = kube.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        k.drop_watches();
    });
    ready_after(&kube, Duration::from_millis(300));
    let took = nap_from(&kube, Some(&version)).await;
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(350),
        "{took:?}"
    );
}

/// The version is too old to watch from (410 Gone): the object is read again, and that
/// read ends the nap, since the caller may have missed a change.
#[tokio::test(start_paused = true)]
async fn a_version_too_old_ends_the_nap_on_a_fresh_read() {
    let (kube, version) = created();
    kube.fault(
        Fault::on(is(Verb::Watch, "volumesnapshots"))
            .status(410)
            .times(1),
    );
    let took = nap_from(&kube, Some(&version)).await;
    assert_eq!(took, Duration::ZERO);
    let gets = kube
        .log()
        .iter()
        .filter(|l| l.info.verb == Verb::Get)
        .count();
    assert_eq!(gets, 1);
}

/// The watch is opened on the object by name, with the server's timeout under the client's
/// read timeout, and nothing is listed.
#[tokio::test(start_paused = true)]
async fn the_watch_is_by_name_within_the_server_timeout() {
    let (kube, version) = created();
    ready_after(&kube, Duration::from_millis(100));
    nap_from(&kube, Some(&version)).await;
    let log = kube.log();
    let watches: Vec<_> = log.iter().filter(|l| l.info.verb == Verb::Watch).collect();
    assert_eq!(watches.len(), 1, "{log:?}");
    let q = &watches[0].info.query;
    assert_eq!(
        q.get("fieldSelector").map(String::as_str),
        Some(format!("metadata.name={NAME}").as_str())
    );
    assert_eq!(q.get("resourceVersion"), Some(&version));
    let timeout: u32 = q.get("timeoutSeconds").unwrap().parse().unwrap();
    assert!(timeout <= vtsnap_core::cli::MAX_WATCH_SECONDS);
    assert!(log.iter().all(|l| l.info.verb != Verb::List), "{log:?}");
}

/// The waits run inside spawned tasks (the snapshot job's run is one): their futures must be
/// `Send`.
#[tokio::test]
async fn the_waits_can_run_in_a_spawned_task() {
    let (kube, version) = created();
    let api = snapshots(&kube);
    let task = tokio::spawn(async move {
        let mut wake = Wake::watch(&api, NAME, Some(&version)).await;
        wake.nap(Duration::from_millis(1)).await;
        vtsnap_core::reconcile::wait_until(&api, NAME, Duration::from_secs(5), |o| o.is_some())
            .await
    });
    let got = task.await.unwrap();
    assert!(
        matches!(got, vtsnap_core::reconcile::Waited::Met(Some(_))),
        "{got:?}"
    );
}

/// After the server ends the watch, the next one starts after the last change a nap saw:
/// that change does not wake the next nap again.
#[tokio::test(start_paused = true)]
async fn a_reopened_watch_resumes_after_the_last_change_seen() {
    let (kube, version) = created();
    let mut wake = Wake::watch(&snapshots(&kube), NAME, Some(&version)).await;
    ready_after(&kube, Duration::from_millis(100));
    let start = Instant::now();
    wake.nap(NAP).await;
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    let k = kube.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        k.drop_watches();
        tokio::time::sleep(Duration::from_millis(200)).await;
        k.put_json(GROUP, "volumesnapshots", snapshot(false));
    });
    wake.nap(NAP).await;
    assert_eq!(start.elapsed(), Duration::from_millis(400));
}
