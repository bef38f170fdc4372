//! An AdmissionReview body of arbitrary bytes, end to end without I/O: read, decided
//! against a config that opts everything in and an inventory built from the same bytes'
//! object, answered. It must never panic; an answered review always allows, and its
//! patch applies to the object it was made for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use vtsnap_admission::admission;
use vtsnap_admission::decide::Settings;
use vtsnap_admission::observe::Dump;
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
    // The object may also be read as one of the inventory's (a snapshot, a PVC).
    let mut dump = Dump::default();
    dump.add(req.object.clone());
    let now = "2026-12-01T12:00:00Z".parse().unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let (response, decision) = review(&req, &config, &settings, &dump, now);
    assert_eq!(response["response"]["allowed"], serde_json::json!(true));
    if !decision.patch.is_empty() {
        assert!(apply(&req.object, &decision.patch).is_ok(), "{decision:?}");
    }
});
