use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;

fn now() -> Timestamp {
    "2026-12-07T12:00:00Z".parse().unwrap()
}

fn template() -> CronJob {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "recover", "namespace": "vtsnap"},
        "spec": {"schedule": "0 0 1 1 *", "suspend": true, "jobTemplate": {
            "metadata": {"labels": {"app.kubernetes.io/component": "pitr-recover"}},
            "spec": {"activeDeadlineSeconds": 7200, "template": {"spec": {
                "serviceAccountName": "vtsnap-pitr-recover", "restartPolicy": "Never",
                "containers": [{"name": "recover", "image": "pitr:1",
                    "args": ["run", "--archive-root", "/vt/backups"]}]}}}}}
    }))
    .unwrap()
}

fn request(target: Target) -> Request {
    Request {
        shard: "example/commerce/-80".parse().unwrap(),
        namespace: "vitess".into(),
        target,
        snapshot: Some("example-commerce-x-80-20261207100000".into()),
        after: After::Cut,
    }
}

fn args(j: &Job) -> Vec<String> {
    j.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .args
        .clone()
        .unwrap()
}

#[test]
fn the_job_is_the_template_s_with_the_shard_and_the_target_in_run_s_args() {
    let j = job(
        &template(),
        "vtsnap",
        &request(Target::Time("2026-12-07T11:02:00Z".into())),
    )
    .unwrap();
    assert_eq!(j.metadata.generate_name.as_deref(), Some("vtsnap-recover-"));
    assert!(j.metadata.owner_references.is_none(), "no CronJob trims it");
    let labels = j.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["vtsnap.io/shard"], "x-80");
    assert_eq!(labels["app.kubernetes.io/component"], "pitr-recover");
    assert_eq!(labels[LABEL_TRIGGER], TRIGGER_KUBECTL);
    assert_eq!(
        args(&j),
        [
            "run",
            "--archive-root",
            "/vt/backups",
            "--cluster",
            "example",
            "--cluster-namespace",
            "vitess",
            "--keyspace",
            "commerce",
            "--shard=-80",
            "--to-time",
            "2026-12-07T11:02:00Z",
            "--snapshot",
            "example-commerce-x-80-20261207100000",
            "--after",
            "cut"
        ]
    );
    let spec = j.spec.unwrap();
    assert_eq!(spec.active_deadline_seconds, Some(7200));
    assert_eq!(
        spec.template.spec.unwrap().service_account_name.as_deref(),
        Some("vtsnap-pitr-recover")
    );
    let mut served = request(Target::Gtid("u:1-5".into()));
    served.after = After::Serve;
    served.snapshot = None;
    let a = args(&job(&template(), "vtsnap", &served).unwrap());
    assert_eq!(a[a.len() - 4..], ["--to-gtid", "u:1-5", "--after", "serve"]);
}

#[test]
fn a_template_without_its_run_container_is_named() {
    let mut t = template();
    let mut v = serde_json::to_value(&t).unwrap();
    v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["name"] = json!("x");
    t = serde_json::from_value(v.clone()).unwrap();
    let r = request(Target::Gtid("u:1".into()));
    assert_eq!(
        job(&t, "vtsnap", &r).unwrap_err(),
        "no container named recover"
    );
    v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0] =
        json!({"name": "recover", "image": "x", "args": ["archive"]});
    let t: CronJob = serde_json::from_value(v).unwrap();
    assert_eq!(
        job(&t, "vtsnap", &r).unwrap_err(),
        "the recover container does not run `run`"
    );
}

const SOURCE: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

fn to(time: Option<&str>, gtid: Option<&str>) -> vtsnap_core::cli::PitrTargetArgs {
    vtsnap_core::cli::PitrTargetArgs {
        to_time: time.map(str::to_owned),
        to_gtid: gtid.map(str::to_owned),
        snapshot: None,
    }
}

/// A GTID set of exactly `n` bytes, as the server prints it: one source, a first
/// interval sized to make the length come out, then 7-digit transactions one apart.
fn set_of_len(n: usize) -> String {
    let head = format!("{SOURCE}:");
    let rest = n - head.len();
    let first_len = (rest - 1) % 8 + 1;
    let first = if first_len <= 6 {
        "1".repeat(first_len)
    } else {
        format!("1-{}", "1".repeat(first_len - 2))
    };
    let mut set = head + &first;
    for i in 0..(rest - first_len) / 8 {
        set.push_str(&format!(":{}", 1_000_001 + 2 * i));
    }
    assert_eq!(set.len(), n);
    set
}

#[test]
fn a_target_is_a_past_time_or_a_bounded_gtid_set() {
    assert_eq!(
        target(&to(Some("2026-12-07T11:02:00+01:00"), None), now()),
        Ok(Target::Time("2026-12-07T10:02:00Z".into()))
    );
    let Err(RecoverError::Target(bad_time)) = target(&to(Some("yesterday"), None), now()) else {
        panic!("a time that is not one was taken")
    };
    assert!(
        bad_time.starts_with("--to-time \"yesterday\": not an RFC 3339 time"),
        "{bad_time}"
    );
    assert_eq!(
        target(&to(Some("2026-12-07T12:00:01Z"), None), now()),
        Err(RecoverError::Target(
            "--to-time 2026-12-07T12:00:01Z: after now (2026-12-07T12:00:00Z)".into()
        ))
    );
    assert_eq!(
        target(&to(Some("2026-12-07T12:00:00Z"), None), now()),
        Ok(Target::Time("2026-12-07T12:00:00Z".into()))
    );
    // the set as the server prints it, as the run checks it
    assert_eq!(
        target(&to(None, Some(&format!("{SOURCE}:3-5:1"))), now()),
        Ok(Target::Gtid(format!("{SOURCE}:1:3-5")))
    );
    let Err(RecoverError::Target(not_a_set)) = target(&to(None, Some("u:1-5")), now()) else {
        panic!("a set that is not one was taken")
    };
    assert!(not_a_set.starts_with("--to-gtid \"u:1-5\":"), "{not_a_set}");
    // 64 KiB: far above any shard's set, far below what a Job's args may hold
    for bad in ["", &format!("{SOURCE}:1\n--after"), &set_of_len(65_537)] {
        assert!(
            matches!(
                target(&to(None, Some(bad)), now()),
                Err(RecoverError::Gtid(_))
            ),
            "{bad:?}"
        );
    }
    let largest = set_of_len(65_536);
    assert_eq!(
        target(&to(None, Some(&largest)), now()),
        Ok(Target::Gtid(largest.clone()))
    );
    assert_eq!(
        target(&to(None, None), now()),
        Err(RecoverError::Target(
            "give one of --to-time and --to-gtid".into()
        ))
    );
}

#[test]
fn the_shard_s_namespace_is_the_config_s_or_the_one_named_among_several() {
    let config = Config::from_yaml(
        "clusters:\n- {name: a, namespace: one, vtctld: \"v:1\"}\n- {name: b, namespace: x, vtctld: \"v:1\"}\n- {name: b, namespace: y, vtctld: \"v:1\"}\n",
    )
    .unwrap();
    assert_eq!(shard_namespace(&config, "a", None), Ok("one".into()));
    assert_eq!(shard_namespace(&config, "b", Some("y")), Ok("y".into()));
    assert_eq!(
        shard_namespace(&config, "b", None),
        Err(RecoverError::SeveralNamespaces {
            cluster: "b".into(),
            namespaces: 2
        })
    );
    assert_eq!(
        shard_namespace(&config, "a", Some("x")),
        Err(RecoverError::NotInNamespace {
            cluster: "a".into(),
            namespace: "x".into()
        })
    );
    assert_eq!(
        shard_namespace(&config, "c", None),
        Err(RecoverError::NoCluster("c".into()))
    );
}

#[test]
fn the_run_s_line_is_found_among_its_log_lines_and_gives_the_shell() {
    let line = json!({"shard": "vitess/example/commerce/-", "target": "u:1-5",
        "outcome": "recovered", "pod": "vtsnap-recover-x", "after": "serve", "steps": []});
    let log = format!(
        "{{\"level\":\"INFO\",\"msg\":\"replayed\"}}\n{line}\n{{\"level\":\"INFO\",\"outcome\":\"x\"}}\n"
    );
    let shard = ShardRef::parse_path("vitess/example/commerce/-").unwrap();
    let (verdict, written) = run_line(&log, &shard).unwrap();
    assert_eq!(written, line);
    assert_eq!(run_line("not json\n{}\n", &shard), None);
    // A line about another shard is not this recovery's, even when it comes last.
    let mut other = line.clone();
    other["shard"] = json!("vitess/example/commerce/-80");
    other["pod"] = json!("someone-else");
    let (mine, _) = run_line(&format!("{log}{other}\n"), &shard).unwrap();
    assert_eq!(mine.pod.as_deref(), Some("vtsnap-recover-x"));
    assert_eq!(run_line(&format!("{other}\n"), &shard), None);
    let read = |v: &Value| serde_json::from_value::<RunVerdict>(v.clone()).unwrap();
    let shell = shell_args(&verdict, "vitess").unwrap();
    assert_eq!(
        shell[..7],
        [
            "exec",
            "-it",
            "-n",
            "vitess",
            "vtsnap-recover-x",
            "-c",
            "mysqld"
        ]
    );
    let mut cut = line.clone();
    cut["after"] = json!("cut");
    assert_eq!(shell_args(&read(&cut), "vitess"), None);
    let mut failed = line.clone();
    failed["outcome"] = json!("failed");
    assert_eq!(shell_args(&read(&failed), "vitess"), None);
    assert_eq!(
        cleanup(&verdict, "vitess", "vtsnap", "vtsnap-recover-abcde").as_deref(),
        Some(
            "kubectl delete pod,pvc -n vitess vtsnap-recover-x && kubectl delete job -n vtsnap vtsnap-recover-abcde"
        )
    );
    assert_eq!(cleanup(&read(&cut), "vitess", "vtsnap", "j"), None);
    let mut hostile = line;
    hostile["pod"] = json!("x; rm -rf /");
    assert_eq!(shell_args(&read(&hostile), "vitess"), None);
    assert_eq!(cleanup(&read(&hostile), "vitess", "vtsnap", "j"), None);
    assert_eq!(shell_args(&verdict, "bad namespace"), None);
    assert_eq!(cleanup(&verdict, "vitess", "vtsnap", "bad job"), None);
    assert_eq!(cleanup(&verdict, "vitess", "bad ns", "j"), None);
}

#[test]
fn a_snapshot_name_is_checked_before_it_goes_into_args() {
    assert_eq!(snapshot_name("s-1"), Ok("s-1".into()));
    assert!(matches!(
        snapshot_name("--after=cut"),
        Err(RecoverError::Snapshot(..))
    ));
}
