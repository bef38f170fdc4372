//! `kubectl vtsnap status` on a demo-like state (one shard protected with a restore in
//! progress, one whose snapshots failed and whose CronJob is suspended, a node without
//! its node helper, a snapshot vtsnap did not make): the table and the JSON are compared
//! with the files in tests/golden/. `VTSNAP_BLESS=1 cargo test -p kubectl-vtsnap --test
//! golden` writes them again after an intended change (review the diff).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use kubectl_vtsnap::decide::status::status;
use kubectl_vtsnap::observe::read::{StatusObjects, status_seen};
use kubectl_vtsnap::report::{self, Colour, Format};
use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_gc::decide::{CoverageState, ShardCoverage};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

fn check(name: &str, got: &str) {
    let path = golden(name);
    if std::env::var_os("VTSNAP_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (VTSNAP_BLESS=1 writes it)", path.display()));
    assert_eq!(got, want, "{name} differs from its golden file");
}

fn list(v: &Value, key: &str) -> Vec<Value> {
    v[key].as_array().cloned().unwrap_or_default()
}

#[test]
fn status_of_the_demo_state_matches_its_golden_outputs() {
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(golden("demo_state.json")).unwrap()).unwrap();
    let config = Config::from_yaml(state["config"].as_str().unwrap()).unwrap();
    let objects = StatusObjects {
        snapshots: list(&state, "snapshots"),
        cronjobs: list(&state, "cronjobs"),
        jobs: list(&state, "jobs"),
        leases: list(&state, "leases"),
        tablet_pvcs: list(&state, "tablet_pvcs"),
        tablet_pods: list(&state, "tablet_pods"),
        node_helpers: list(&state, "node_helpers"),
    };
    let seen = status_seen(
        &objects,
        // What the GC's decider says of the commerce shard's primary: 60 hours of binlogs
        // left for the newest covered snapshot.
        vec![ShardCoverage {
            namespace: "vitess".into(),
            cluster: "example".into(),
            keyspace: "commerce".into(),
            shard: "-".into(),
            state: CoverageState::Known {
                newest_covered: Some("example-commerce-x-x-20261201110000".into()),
                headroom_seconds: Some(60 * 3600),
                not_covered: vec![],
                warning: None,
            },
        }],
    );
    let now = state["now"].as_str().unwrap().parse().unwrap();
    let st = status(&config, &seen, now);
    check(
        "status.txt",
        &report::status(&st, Format::Table, Colour::Off),
    );
    check(
        "status.json",
        &report::status(&st, Format::Json, Colour::Off),
    );
    // The YAML says the same as the JSON.
    let yaml: Value =
        serde_yaml_ng::from_str(&report::status(&st, Format::Yaml, Colour::Off)).unwrap();
    let json: Value =
        serde_json::from_str(&report::status(&st, Format::Json, Colour::Off)).unwrap();
    assert_eq!(yaml, json);
}

/// `explain snapshot` of each snapshot of the demo state (the GC's decider on the same
/// objects) and `explain pvc` of the tablet being restored, with its Events (one carries
/// control characters, which the table escapes).
#[test]
fn explain_of_the_demo_state_matches_its_golden_outputs() {
    use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
    use kubectl_vtsnap::explain::{self, NewestEvents};
    use vtsnap_gc::observe::Inventory;

    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(golden("demo_state.json")).unwrap()).unwrap();
    let config = Config::from_yaml(state["config"].as_str().unwrap()).unwrap();
    let now = state["now"].as_str().unwrap().parse().unwrap();
    let mut inv = Inventory::default();
    for o in list(&state, "snapshots") {
        inv.add_any(&o, now);
    }
    for mut o in list(&state, "tablet_pvcs") {
        o["kind"] = "PersistentVolumeClaim".into();
        inv.add_any(&o, now);
    }
    let plan = vtsnap_gc::decide::plan(&config, &inv, now, None);
    let mut text = String::new();
    for o in list(&state, "snapshots") {
        let name = o["metadata"]["name"].as_str().unwrap();
        let unusable = o["metadata"]["annotations"]["vtsnap.io/unusable"]
            .as_str()
            .map(str::to_owned);
        let e = explain::snapshot_in_plan(&plan, "vitess", name, unusable);
        text.push_str(&format!("$ kubectl vtsnap explain snapshot {name}\n"));
        text.push_str(&explain::lines(&serde_json::to_value(e).unwrap()));
    }
    let pvc: PersistentVolumeClaim =
        serde_json::from_value(list(&state, "tablet_pvcs")[0].clone()).unwrap();
    let mut events = NewestEvents::default();
    for e in list(&state, "pvc_events") {
        events.push(serde_json::from_value::<Event>(e).unwrap());
    }
    let e = explain::pvc_explained(&pvc, events);
    text.push_str(&format!("$ kubectl vtsnap explain pvc {}\n", e.name));
    text.push_str(&explain::lines(&serde_json::to_value(&e).unwrap()));
    check("explain.txt", &text);
}
