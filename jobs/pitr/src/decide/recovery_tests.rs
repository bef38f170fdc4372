use k8s_openapi::jiff::Timestamp;
use vtsnap_core::coverage::{GtidSet, Text};
use vtsnap_core::restore_pod::CONTAINER as RESTORE_CONTAINER;
use vtsnap_core::snapshot::GtidFlavor;

use super::*;

fn settings() -> Settings {
    Settings {
        restore_image: "vtsnap/vtsnap-restore:1".into(),
        pitr_image: "vtsnap/vtsnap-pitr:1".into(),
        recovery_uid: TabletUid::new(defaults::RECOVERY_UID),
        mysqld_command: "mysqld".into(),
        mysqld_resources: serde_json::from_str(defaults::MYSQLD_RESOURCES).unwrap(),
        deadline_seconds: 3600,
        ready_seconds: defaults::READY_SECONDS,
        archive: ArchiveSource::Volume {
            root: "/vt/backups".into(),
            source: json!({"nfs": {"server": "nfs.example.com", "path": "/backups"}}),
        },
        image_pull_secrets: Vec::new(),
    }
}

fn gtid(s: &str) -> GtidSet {
    GtidSet::parse(GtidFlavor::Mysql56, s, Text::Server).unwrap()
}

fn recovery(target: Target, after: After) -> Recovery {
    Recovery {
        shard: ShardRef {
            namespace: "vitess".into(),
            cluster: "example".into(),
            keyspace: "commerce".into(),
            shard: "-80".parse().unwrap(),
        },
        base: "example-commerce-x-80-20261207100000".into(),
        base_facts: crate::observe::base_facts(&json!({"metadata": {
            "name": "example-commerce-x-80-20261207100000",
            "managedFields": [{"manager": "x", "fieldsV1": {"f:a": {}}}],
            "annotations": {"vtsnap.io/mysql-flavor": "mysql", "vtsnap.io/mysql-version": "9.7.0",
                            "vtsnap.io/gtid-executed": "MySQL56/3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10"}}})),
        target,
        storage_bytes: 10 << 30,
        storage_class: Some("topolvm".into()),
        mysqld_image: "vitess/lite:v24".into(),
        pod_security: None,
        after,
        owner: Some(JobOwner {
            name: "recover-1".into(),
            uid: "job-uid".into(),
            namespace: None,
        }),
    }
}

fn before() -> Target {
    Target::Before("2026-12-07T14:02:00Z".parse::<Timestamp>().unwrap())
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

fn container<'a>(p: &'a Value, list: &str, name: &str) -> &'a Value {
    p["spec"][list]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

#[test]
fn the_pod_restores_fetches_then_serves_and_replays_with_no_network_and_no_tablet_label() {
    let r = recovery(before(), After::Serve);
    let p = pod("rec", &r, &settings());
    let inits: Vec<&str> = p["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(inits, [RESTORE_CONTAINER, FETCH_CONTAINER]);
    let restore = container(&p, "initContainers", RESTORE_CONTAINER);
    assert_eq!(restore["env"][0]["value"], "999999998");
    let mysqld = container(&p, "containers", MYSQLD_CONTAINER);
    let args = strings(&mysqld["args"]);
    for want in [
        "--skip-networking",
        "--skip-replica-start",
        "--skip-grant-tables",
        "--socket=/vt/socket/mysql.sock",
        "--defaults-file=/vt/vtdataroot/vt_0999999998/my.cnf",
    ] {
        assert!(args.contains(&want), "{want}: {args:?}");
    }
    assert!(mysqld.get("ports").is_none());
    let fetch = strings(&container(&p, "initContainers", FETCH_CONTAINER)["args"]);
    assert_eq!(fetch[0], "fetch");
    for pair in [
        ["--shard", "vitess/example/commerce/-80"],
        ["--snapshot", "example-commerce-x-80-20261207100000"],
        ["--to-time", "2026-12-07T14:02:00Z"],
        ["--result-file", RESULT_FILE],
        ["--archive-root", "/vt/backups"],
    ] {
        assert!(fetch.windows(2).any(|w| w == pair), "{pair:?}: {fetch:?}");
    }
    // The archive is mounted read-only where fetch reads it, from the install's source.
    let archive = p["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == ARCHIVE_VOLUME)
        .unwrap();
    assert_eq!(archive["nfs"]["server"], "nfs.example.com");
    let mounts = container(&p, "initContainers", FETCH_CONTAINER)["volumeMounts"]
        .as_array()
        .unwrap();
    let m = mounts.iter().find(|m| m["name"] == ARCHIVE_VOLUME).unwrap();
    assert_eq!(
        (&m["mountPath"], &m["readOnly"]),
        (&json!("/vt/backups"), &json!(true))
    );
    // Served: the replay leaves mysqld up.
    let replay = container(&p, "containers", REPLAY_CONTAINER);
    assert_eq!(replay["image"], "vitess/lite:v24");
    let script = replay["command"][2].as_str().unwrap();
    assert!(script.contains("bash /pitr/replay.sh"), "{script}");
    assert!(script.contains("> /dev/termination-log"), "{script}");
    assert!(!script.contains("shutdown"), "{script}");
    // No operator label, no Service, no token.
    let labels = p["metadata"]["labels"].as_object().unwrap();
    assert!(
        labels.keys().all(|k| !k.starts_with("planetscale.com/")),
        "{labels:?}"
    );
    assert_eq!(labels[MANAGED_BY], MANAGED_BY_PITR);
    assert_eq!(p["spec"]["automountServiceAccountToken"], false);
    assert_eq!(p["spec"]["restartPolicy"], "Never");
    assert_eq!(
        p["metadata"]["annotations"][ANN_RECOVERY_TARGET],
        "before 2026-12-07T14:02:00Z"
    );
}

#[test]
fn a_cut_shuts_mysqld_down_only_after_the_result_is_handed_over() {
    let p = pod("rec", &recovery(before(), After::Cut), &settings());
    let script = container(&p, "containers", REPLAY_CONTAINER)["command"][2]
        .as_str()
        .unwrap()
        .to_owned();
    let replayed = script.find("replay.sh").unwrap();
    let handed = script.find("termination-log").unwrap();
    let shutdown = script.find("shutdown").unwrap();
    assert!(replayed < handed && handed < shutdown, "{script}");
    assert!(script.starts_with("set -euo pipefail"), "{script}");
}

#[test]
fn the_base_reaches_fetch_as_a_file_without_its_managed_fields() {
    let r = recovery(
        Target::Through(gtid("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-20")),
        After::Serve,
    );
    let p = pod("rec", &r, &settings());
    let text = p["metadata"]["annotations"][ANN_RECOVERY_BASE]
        .as_str()
        .unwrap();
    let items = vtsnap_core::dump::parse(text.as_bytes()).unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], r.base);
    assert!(
        items[0]["metadata"].get("managedFields").is_none(),
        "{text}"
    );
    let fetch = strings(&container(&p, "initContainers", FETCH_CONTAINER)["args"]);
    assert!(
        fetch.windows(2).any(|w| w == ["--objects", BASE_FILE]),
        "{fetch:?}"
    );
    assert!(
        fetch
            .windows(2)
            .any(|w| w == ["--to-gtid", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-20"]),
        "{fetch:?}"
    );
    let base = p["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == BASE_VOLUME)
        .unwrap();
    assert_eq!(
        base["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
        "metadata.annotations['vtsnap.io/recovery-base']"
    );
    // The PVC clones the base and carries no copy of it.
    let claim = pvc("rec", &r);
    assert_eq!(claim["spec"]["dataSourceRef"]["name"], r.base);
    assert_eq!(claim["spec"]["storageClassName"], "topolvm");
    assert!(
        claim["metadata"]["annotations"]
            .get(ANN_RECOVERY_BASE)
            .is_none()
    );
}

#[test]
fn the_cut_names_the_recovered_set_and_is_no_tablet_snapshot() {
    let r = recovery(before(), After::Cut);
    let set = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-15";
    let c = cut("rec", &r, Some("csi-class"), set);
    assert_eq!(c["spec"]["source"]["persistentVolumeClaimName"], "rec");
    assert_eq!(c["spec"]["volumeSnapshotClassName"], "csi-class");
    assert_eq!(c["metadata"]["annotations"]["vtsnap.io/gtid-executed"], set);
    assert_eq!(
        c["metadata"]["annotations"]["vtsnap.io/mysql-version"],
        "9.7.0"
    );
    assert_eq!(c["metadata"]["annotations"][ANN_RECOVERY_OF], r.base);
    // Not vtsnap's tablet snapshot: no retention or restore choice lists it.
    assert_eq!(c["metadata"]["labels"][MANAGED_BY], MANAGED_BY_PITR);
    assert!(c["metadata"]["labels"].get("vtsnap.io/phase").is_none());
    assert!(
        cut("rec", &r, None, set)["spec"]
            .get("volumeSnapshotClassName")
            .is_none()
    );
}

#[test]
fn names_are_valid_hostnames_however_long_the_shard() {
    let mut s = recovery(before(), After::Serve).shard;
    let n = recovery_name(&s, "20261207140200");
    assert!(
        n.starts_with("vtsnap-pitr-example-commerce-x-80-20261207140200"),
        "{n}"
    );
    s.keyspace = "k".repeat(80);
    let n = recovery_name(&s, "20261207140200");
    assert!(
        n.len() <= 63 && vtsnap_core::k8s_names::dns_label(&n).is_ok(),
        "{n}"
    );
}

#[test]
fn the_pod_pulls_with_the_install_s_secrets_only_when_given() {
    let r = recovery(before(), After::Serve);
    let none = pod("rec", &r, &settings());
    assert!(none["spec"].get("imagePullSecrets").is_none(), "{none}");
    let s = Settings {
        image_pull_secrets: vec!["regcred".into()],
        ..settings()
    };
    assert_eq!(
        pod("rec", &r, &s)["spec"]["imagePullSecrets"],
        json!([{"name": "regcred"}])
    );
}

#[test]
fn the_job_owns_the_pvc_and_the_pod_never_the_cut() {
    let r = recovery(before(), After::Cut);
    for o in [pvc("rec", &r), pod("rec", &r, &settings())] {
        let owner = &o["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["kind"], &owner["uid"]),
            (&json!("Job"), &json!("job-uid")),
            "{o}"
        );
    }
    let c = cut("rec", &r, None, "");
    assert!(c["metadata"].get("ownerReferences").is_none(), "{c}");
    let alone = Recovery { owner: None, ..r };
    assert!(
        pvc("rec", &alone)["metadata"]
            .get("ownerReferences")
            .is_none()
    );
}

#[test]
fn an_object_store_archive_is_read_by_url_with_its_secret_and_nothing_mounted() {
    let r = recovery(
        Target::Through(gtid("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-20")),
        After::Serve,
    );
    let stored = |secret: Option<&str>| Settings {
        archive: ArchiveSource::Store {
            url: "s3://vitess-backups/prod".into(),
            secret: secret.map(str::to_owned),
        },
        ..settings()
    };
    let p = pod("rec", &r, &stored(Some("vitess-s3")));
    let fetch = container(&p, "initContainers", FETCH_CONTAINER);
    let args = strings(&fetch["args"]);
    assert!(
        args.windows(2)
            .any(|w| w == ["--archive-url", "s3://vitess-backups/prod"]),
        "{args:?}"
    );
    assert!(!args.contains(&"--archive-root"), "{args:?}");
    assert_eq!(
        fetch["envFrom"],
        json!([{"secretRef": {"name": "vitess-s3"}}])
    );
    let mounted = |p: &Value| {
        container(p, "initContainers", FETCH_CONTAINER)["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == ARCHIVE_VOLUME)
            || p["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["name"] == ARCHIVE_VOLUME)
    };
    assert!(!mounted(&p), "{p}");
    // Without a Secret (a workload identity, or the node's role): an empty envFrom.
    let p = pod("rec", &r, &stored(None));
    assert_eq!(
        container(&p, "initContainers", FETCH_CONTAINER)["envFrom"],
        json!([])
    );
    // The volume's archive is mounted, and has no envFrom.
    let p = pod("rec", &r, &settings());
    assert!(mounted(&p), "{p}");
    assert_eq!(
        container(&p, "initContainers", FETCH_CONTAINER)["envFrom"],
        json!([])
    );
}
