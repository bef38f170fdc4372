//! Which CronJob is a shard's (docs/design.md §5.8): its name carries the namespace when
//! the cluster's name is configured in two; a CronJob of ours is the shard's by its
//! record, whatever its name; a second one is kept and named, never deleted; two shards
//! that would get one name get none.

use super::*;

/// `example` in `ns-a` and in `ns-b`, each with `commerce` `-`.
fn twins() -> (Config, Vec<ClusterSeen>) {
    let cfg = Config::from_yaml(
        "clusters:\n- name: example\n  namespace: ns-a\n- name: example\n  namespace: ns-b\n",
    )
    .unwrap();
    let one = |ns: &str| ClusterSeen {
        namespace: ns.into(),
        ..cluster(&[("commerce", "-")])
    };
    (cfg, vec![one("ns-a"), one("ns-b")])
}

const A: &str = "vtsnap-snap-ns-a-example-commerce-x-x";
const B: &str = "vtsnap-snap-ns-b-example-commerce-x-x";
const SHORT: &str = "vtsnap-snap-example-commerce-x-x";

/// Review round three, item 4: both shards got `vtsnap-snap-example-commerce-x-x`.
#[test]
fn one_cluster_name_in_two_namespaces_gives_each_shard_its_own_cronjob() {
    let (cfg, clusters) = twins();
    let p = plan(&cfg, &seen(clusters.clone(), vec![]));
    let made: Vec<(&str, Action, Option<&str>)> = p
        .decisions
        .iter()
        .map(|d| (d.name.as_str(), d.action, d.shard.as_deref()))
        .collect();
    assert_eq!(
        made,
        [
            (A, Action::Create, Some("ns-a/example/commerce/-")),
            (B, Action::Create, Some("ns-b/example/commerce/-")),
        ],
        "{p:#?}"
    );
    assert!(p.problems.is_empty(), "{p:#?}");
    let record = |name: &str| {
        find(&p, name).desired.as_ref().unwrap()["metadata"]["annotations"]
            ["vtsnap.io/schedule-shard"]
            .clone()
    };
    assert_eq!(record(A), "ns-a/example/commerce/-");
    assert_eq!(record(B), "ns-b/example/commerce/-");
    // The next run keeps both, each as its shard's.
    let again = plan(&cfg, &seen(clusters, applied(&[], &p)));
    assert_eq!(again.count(Action::Keep), 2, "{again:#?}");
    assert!(
        again.decisions.iter().all(|d| d.reason == Reason::UpToDate),
        "{again:#?}"
    );
    // A name of the one cluster that is configured once stays short.
    let p = plan(
        &config(""),
        &seen(vec![cluster(&[("commerce", "-")])], vec![]),
    );
    assert_eq!(p.decisions[0].name, SHORT);
}

/// The args a decision's CronJob gives its Job's container of `kind`.
fn args_of(d: &Decision, kind: Kind) -> Vec<String> {
    let containers = &d.desired.as_ref().unwrap()["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        ["containers"];
    let c = containers
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == kind.container())
        .unwrap();
    serde_json::from_value(c["args"].clone()).unwrap()
}

/// Round three, item 4, continued: each shard had its CronJob, but its Jobs ran
/// `--cluster example` alone, which the program cannot place (exit 2, every run). A
/// namespaced CronJob's Job names the namespace; the others' args are as they were.
#[test]
fn a_namespaced_cronjob_s_job_names_its_cluster_s_namespace() {
    let (cfg, clusters) = twins();
    let drilled = |clusters| Observed {
        template: Ok(with_drills()),
        clusters,
        cronjobs: vec![],
    };
    let p = plan(&cfg, &drilled(clusters));
    assert_eq!(p.count(Action::Create), 4, "{p:#?}");
    for (ns, snap, drill) in [
        ("ns-a", A, "vtsnap-drill-ns-a-example-commerce-x-x"),
        ("ns-b", B, "vtsnap-drill-ns-b-example-commerce-x-x"),
    ] {
        let shard = [
            "--cluster",
            "example",
            "--cluster-namespace",
            ns,
            "--keyspace",
            "commerce",
            "--shard=-",
        ];
        assert_eq!(args_of(find(&p, snap), Kind::Snapshot)[1..], shard);
        assert_eq!(args_of(find(&p, drill), Kind::Drill)[3..], shard);
    }
    // A cluster name in one namespace: no such flag, so no CronJob of it is rewritten.
    let p = plan(&config(""), &drilled(vec![cluster(&[("commerce", "-")])]));
    for (name, kind) in [
        (SHORT, Kind::Snapshot),
        ("vtsnap-drill-example-commerce-x-x", Kind::Drill),
    ] {
        let args = args_of(find(&p, name), kind);
        assert!(
            !args.contains(&"--cluster-namespace".to_owned()),
            "{args:?}"
        );
    }
}

#[test]
fn a_cronjob_made_under_the_short_name_stays_its_shard_s() {
    // Before the rule, ns-a's shard got the short name (ns-b's create failed on it). After:
    // ns-a's is kept under its name, only ns-b's is made; nothing is deleted.
    let (cfg, clusters) = twins();
    let before = applied(
        &[],
        &plan(
            &config(""),
            &seen(vec![cluster(&[("commerce", "-")])], vec![]),
        ),
    );
    let mut old = before[0].clone();
    old.shard = ShardRef::parse_path("ns-a/example/commerce/-").map_err(|e| e.to_string());
    let p = plan(&cfg, &seen(clusters.clone(), vec![old.clone()]));
    let acts: Vec<(&str, Action)> = p
        .decisions
        .iter()
        .map(|d| (d.name.as_str(), d.action))
        .collect();
    // Its record changed (ns-a instead of vitess), so it is rewritten in place.
    assert_eq!(
        acts,
        [(SHORT, Action::Update), (B, Action::Create)],
        "{p:#?}"
    );
    let d = find(&p, SHORT);
    assert_eq!(d.shard.as_deref(), Some("ns-a/example/commerce/-"));
    assert_eq!(d.desired.as_ref().unwrap()["metadata"]["name"], SHORT);
    // Under its short name, its Job names ns-a too: the name `example` alone is two
    // clusters now.
    assert_eq!(
        args_of(d, Kind::Snapshot)[1..5],
        ["--cluster", "example", "--cluster-namespace", "ns-a"]
    );
    // Its minute is kept.
    assert_eq!(
        d.desired.as_ref().unwrap()["metadata"]["annotations"]["vtsnap.io/stagger-minutes"],
        old.offset.unwrap().to_string()
    );
    let again = plan(&cfg, &seen(clusters, applied(&[old], &p)));
    assert!(
        again.decisions.iter().all(|d| d.reason == Reason::UpToDate),
        "{again:#?}"
    );
}

/// Audit item 4: a second CronJob of ours for a shard of the spec was deleted without the
/// deletion gate. It is kept and named.
#[test]
fn a_second_cronjob_of_a_shard_is_kept_and_named_never_deleted() {
    let cfg = config("");
    let s = seen(vec![cluster(&[("commerce", "-")])], vec![]);
    let made = applied(&[], &plan(&cfg, &s));
    let mut second = made[0].clone();
    second.name = "old-vtsnap-snap-example-commerce-x-x".into();
    second.uid = "uid-old".into();
    // vtctld's word does not matter: the shard is in the spec.
    for vtctld in [InVtctld::Absent, InVtctld::Unknown("not asked".into())] {
        second.vtctld = vtctld;
        let p = plan(
            &cfg,
            &seen(s.clusters.clone(), vec![made[0].clone(), second.clone()]),
        );
        assert_eq!(p.count(Action::Delete), 0, "{p:#?}");
        let d = find(&p, "old-vtsnap-snap-example-commerce-x-x");
        assert_eq!((d.action, d.reason), (Action::Keep, Reason::Duplicate));
        assert!(d.message.contains(SHORT), "{}", d.message);
        assert_eq!(find(&p, SHORT).reason, Reason::UpToDate);
        // Alone, the one under another name is the shard's: kept, no second made.
        let p = plan(&cfg, &seen(s.clusters.clone(), vec![second.clone()]));
        assert_eq!(p.decisions.len(), 1, "{p:#?}");
        assert_eq!(p.decisions[0].name, second.name);
        assert_eq!(p.count(Action::Create) + p.count(Action::Delete), 0);
    }
    // Two of a gone shard: each goes through the gate on its own.
    let mut gone = [made[0].clone(), second];
    for c in &mut gone {
        c.vtctld = InVtctld::Absent;
    }
    let p = plan(&cfg, &seen(vec![cluster(&[])], gone.to_vec()));
    assert_eq!(p.count(Action::Delete), 2, "{p:#?}");
    assert!(p.decisions.iter().all(|d| d.reason == Reason::ShardGone));
}

#[test]
fn two_shards_that_would_get_one_name_get_none() {
    // `b_c` and `b-c`: a name cannot hold `_`, so both would be `…-b-c-x-x`.
    let cfg = config("");
    let p = plan(
        &cfg,
        &seen(vec![cluster(&[("b_c", "-"), ("b-c", "-")])], vec![]),
    );
    let name = "vtsnap-snap-example-b-c-x-x";
    assert_eq!(p.count(Action::Create), 0, "{p:#?}");
    let refused: Vec<(&str, Reason)> = p
        .decisions
        .iter()
        .map(|d| (d.name.as_str(), d.reason))
        .collect();
    assert_eq!(refused.len(), 2, "{p:#?}");
    for (n, reason) in &refused {
        assert_eq!((*n, *reason), (name, Reason::NameCollision));
    }
    // Each names the other shard (only), and each is a problem (the run exits 1).
    for d in &p.decisions {
        let own = d.shard.as_deref().unwrap();
        let other = if own.contains("b_c") {
            "vitess/example/b-c/-"
        } else {
            "vitess/example/b_c/-"
        };
        assert!(d.message.contains(other), "{}", d.message);
        assert!(!d.message.contains(own), "{}", d.message);
    }
    assert_eq!(p.problems.len(), 2, "{p:#?}");
    // One of them already has its CronJob: it keeps it; the other cannot take the name.
    let one = plan(&cfg, &seen(vec![cluster(&[("b_c", "-")])], vec![]));
    let crons = applied(&[], &one);
    let p = plan(
        &cfg,
        &seen(vec![cluster(&[("b_c", "-"), ("b-c", "-")])], crons),
    );
    let reasons: Vec<(Option<&str>, Reason)> = p
        .decisions
        .iter()
        .map(|d| (d.shard.as_deref(), d.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            (Some("vitess/example/b-c/-"), Reason::NameTaken),
            (Some("vitess/example/b_c/-"), Reason::UpToDate),
        ],
        "{p:#?}"
    );
    assert_eq!(p.problems.len(), 1);
}
