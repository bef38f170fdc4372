//! An AdmissionReview body of arbitrary bytes, end to end without I/O: read, decided
//! against a config that opts everything in and an inventory built from the same bytes'
//! object, answered. It must never panic; an answered review always allows, and its
//! patch applies to the object it was made for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use vtsnap_admission::admission;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::inventory::Dump;
use vtsnap_admission::observe::Review;
use vtsnap_admission::patch::apply;
use vtsnap_admission::review::review;
use vtsnap_core::config::Config;

const CONFIG: &str = "clusters:\n- name: example\n  namespace: vitess\n  \
    restore: {enabled: true, nodeLocal: true}\n  vtbackup: {useEmptyDirForInitialBackup: true}\n";

fuzz_target!(|data: &[u8]| {
    let Ok(req) = admission::parse(data) else {
        return;
    };
    let Ok(config) = Config::from_yaml(CONFIG) else {
        return;
    };
    let settings = Settings {
        restore_image: Some("vtsnap/vtsnap-restore:fuzz".into()),
        shard_state_max_age: Duration::from_secs(300),
    };
    // The object as sent (what the patch applies to).
    let sent = serde_json::from_slice::<serde_json::Value>(data)
        .ok()
        .and_then(|v| v.pointer("/request/object").cloned())
        .unwrap_or(serde_json::Value::Null);
    // The object may also be read as one of the inventory's (a snapshot, a PVC).
    let mut dump = Dump::default();
    dump.add(sent.clone());
    let now = "2026-12-01T12:00:00Z"
        .parse()
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let observed = Review::observe(&req);
    let Ok((answer, decision)) = review(&req, &observed, &config, &settings, &dump, now) else {
        panic!("an answer that cannot be encoded");
    };
    assert!(answer.response().allowed);
    if !decision.patch.is_empty() {
        assert!(apply(&sent, &decision.patch).is_ok(), "{decision:?}");
    }
});
