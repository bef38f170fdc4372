//! The schedule reconciler's decision without a client: new shards, reshards, the
//! deletion gate (spec, vtctld, running Jobs), objects it did not make, uncertain reads,
//! overrides, and the stagger's spread, stability and idempotence.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::json;

use super::super::observe::{RunningJobs, cron_seen};
use super::*;

const UID: &str = "template-uid";

fn template() -> Template {
    Template {
        configmap: "vtsnap-snapshot-schedule".into(),
        configmap_uid: UID.into(),
        namespace: "vtsnap".into(),
        fullname: "vtsnap".into(),
        snapshot: KindTemplate {
            cronjob: json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "template", "labels": {"app.kubernetes.io/name": "vtsnap",
                "app.kubernetes.io/component": "snapshot"}},
            "spec": {"schedule": "0 0 1 1 *", "concurrencyPolicy": "Forbid",
                "jobTemplate": {"metadata": {"labels": {"app.kubernetes.io/component": "snapshot"}},
                    "spec": {"backoffLimit": 1, "template": {"metadata": {"labels": {}},
                        "spec": {"serviceAccountName": "vtsnap-snapshot", "restartPolicy": "Never",
                            "containers": [{"name": "snapshot", "image": "vtsnap-snapshot:1", "args": ["run"]}]}}}}}}),
            overrides: vec![],
        },
        drill: None,
        archive: None,
    }
}

/// The template with the chart's drills on.
fn with_drills() -> Template {
    Template {
        drill: Some(KindTemplate {
            cronjob: json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "template", "labels": {"app.kubernetes.io/component": "drill"}},
                "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": {"spec": {
                    "serviceAccountName": "vtsnap-drill", "restartPolicy": "Never",
                    "containers": [{"name": "drill", "image": "vtsnap-drill:1",
                        "args": ["run", "--deadline", "1h"]}]}}}}}}),
            overrides: vec![],
        }),
        ..template()
    }
}

/// The chart's drills on (its archive off).
fn with_drills_seen(clusters: Vec<ClusterSeen>, cronjobs: Vec<CronSeen>) -> Observed {
    Observed {
        template: Ok(with_drills()),
        clusters,
        cronjobs,
    }
}

fn two_shards() -> ClusterSeen {
    cluster(&[("commerce", "-80"), ("commerce", "80-")])
}

fn config(extra: &str) -> Config {
    Config::from_yaml(&format!(
        "clusters:\n- name: example\n  namespace: vitess\n{extra}"
    ))
    .unwrap()
}

fn cluster(shards: &[(&str, &str)]) -> ClusterSeen {
    ClusterSeen {
        namespace: "vitess".into(),
        cluster: "example".into(),
        shards: Ok(shards
            .iter()
            .map(|(k, s)| KeyspaceShard {
                keyspace: (*k).to_owned(),
                shard: s.parse().unwrap(),
            })
            .collect()),
    }
}

fn seen(clusters: Vec<ClusterSeen>, cronjobs: Vec<CronSeen>) -> Observed {
    Observed {
        template: Ok(template()),
        clusters,
        cronjobs,
    }
}

/// The CronJobs as they are after the plan's writes (what the next run reads).
fn applied(before: &[CronSeen], plan: &Plan) -> Vec<CronSeen> {
    applied_with(before, plan, &template())
}

fn applied_with(before: &[CronSeen], plan: &Plan, template: &Template) -> Vec<CronSeen> {
    let mut out: Vec<CronSeen> = before
        .iter()
        .filter(|c| {
            !plan
                .decisions
                .iter()
                .any(|d| d.name == c.name && matches!(d.action, Action::Delete | Action::Update))
        })
        .cloned()
        .collect();
    for d in &plan.decisions {
        if let (Action::Create | Action::Update, Some(obj)) = (d.action, &d.desired) {
            let mut obj = obj.clone();
            obj["metadata"]["uid"] = json!(format!("uid-{}", d.name));
            obj["metadata"]["resourceVersion"] = json!("2");
            out.push(cron_seen(&obj, Some(template), &RunningJobs::default()));
        }
    }
    out
}

fn find<'a>(plan: &'a Plan, name: &str) -> &'a Decision {
    plan.decisions
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no decision on {name}: {plan:#?}"))
}

fn schedule_of(d: &Decision) -> String {
    d.desired.as_ref().unwrap()["spec"]["schedule"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_new_shard_gets_its_cronjob_from_the_template() {
    let p = plan(
        &config(""),
        &seen(vec![cluster(&[("commerce", "-")])], vec![]),
    );
    assert_eq!(p.decisions.len(), 1, "{p:#?}");
    let d = &p.decisions[0];
    assert_eq!(
        (d.name.as_str(), d.action, d.reason),
        (
            "vtsnap-snap-example-commerce-x-x",
            Action::Create,
            Reason::NewShard
        )
    );
    let o = d.desired.as_ref().unwrap();
    assert_eq!(o["metadata"]["namespace"], "vtsnap");
    assert_eq!(
        o["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "vtsnap-schedule"
    );
    assert_eq!(o["metadata"]["labels"]["vtsnap.io/shard"], "x-x");
    assert_eq!(
        o["metadata"]["labels"]["app.kubernetes.io/name"], "vtsnap",
        "the template's labels kept"
    );
    assert_eq!(o["metadata"]["ownerReferences"][0]["uid"], UID);
    assert_eq!(
        o["metadata"]["annotations"]["vtsnap.io/schedule-shard"],
        "vitess/example/commerce/-"
    );
    assert_eq!(o["spec"]["suspend"], false);
    assert_eq!(
        o["spec"]["concurrencyPolicy"], "Forbid",
        "the template's spec kept"
    );
    let c = &o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        c["args"],
        json!([
            "run",
            "--cluster",
            "example",
            "--keyspace",
            "commerce",
            "--shard=-"
        ])
    );
    assert_eq!(c["image"], "vtsnap-snapshot:1");
    assert_eq!(
        o["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]["vtsnap.io/keyspace"],
        "commerce"
    );
    // The default schedule, moved by the shard's offset within six hours.
    let offset: u32 = o["metadata"]["annotations"]["vtsnap.io/stagger-minutes"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(offset < 360);
    assert_eq!(
        schedule_of(d),
        vtsnap_core::schedule::Staggered::new("0 */6 * * *", None)
            .unwrap()
            .at(offset)
    );
    assert!(p.problems.is_empty());
}

#[test]
fn a_second_run_changes_nothing() {
    let cfg = config("");
    let s = seen(
        vec![cluster(&[
            ("commerce", "-80"),
            ("commerce", "80-"),
            ("lookup", "-"),
        ])],
        vec![],
    );
    let first = plan(&cfg, &s);
    assert_eq!(first.count(Action::Create), 3);
    let again = plan(&cfg, &seen(s.clusters.clone(), applied(&[], &first)));
    assert_eq!(again.count(Action::Keep), 3, "{again:#?}");
    assert!(again.decisions.iter().all(|d| d.reason == Reason::UpToDate));
}

#[test]
fn a_reshard_adds_the_new_shards_and_keeps_the_old_until_it_is_gone_everywhere() {
    let cfg = config("");
    let one = seen(vec![cluster(&[("commerce", "-")])], vec![]);
    let crons = applied(&[], &plan(&cfg, &one));
    let old = "vtsnap-snap-example-commerce-x-x";
    // The reshard adds -80 and 80- beside -: two new CronJobs in one run, the old kept.
    let during = plan(
        &cfg,
        &seen(
            vec![cluster(&[
                ("commerce", "-"),
                ("commerce", "-80"),
                ("commerce", "80-"),
            ])],
            crons.clone(),
        ),
    );
    assert_eq!(during.count(Action::Create), 2, "{during:#?}");
    assert_eq!(find(&during, old).action, Action::Keep);
    let crons = applied(&crons, &during);
    let after = |vtctld: InVtctld, active_jobs: usize| {
        let crons: Vec<CronSeen> = crons
            .iter()
            .cloned()
            .map(|mut c| {
                if c.name == old {
                    c.vtctld = vtctld.clone();
                    c.active_jobs = active_jobs;
                }
                c
            })
            .collect();
        plan(
            &cfg,
            &seen(
                vec![cluster(&[("commerce", "-80"), ("commerce", "80-")])],
                crons,
            ),
        )
    };
    // Gone from the spec: kept while vtctld has it or cannot say, or a Job of it runs.
    for (vtctld, jobs, reason) in [
        (InVtctld::Present, 0, Reason::StillInVtctld),
        (
            InVtctld::Unknown("timeout".into()),
            0,
            Reason::VtctldUnknown,
        ),
        (InVtctld::Absent, 1, Reason::JobRunning),
        (InVtctld::Present, 1, Reason::JobRunning),
    ] {
        let p = after(vtctld, jobs);
        let d = find(&p, old);
        assert_eq!((d.action, d.reason), (Action::Keep, reason), "{d:?}");
        assert_eq!(p.count(Action::Delete), 0);
    }
    // Gone from both, no Job: deleted, with the version read as its precondition.
    let p = after(InVtctld::Absent, 0);
    let d = find(&p, old);
    assert_eq!((d.action, d.reason), (Action::Delete, Reason::ShardGone));
    assert_eq!(d.uid.as_deref(), Some(format!("uid-{old}").as_str()));
    assert_eq!(d.resource_version.as_deref(), Some("2"));
    assert_eq!(p.count(Action::Keep), 2);
}

#[test]
fn what_it_did_not_make_is_never_touched() {
    let cfg = config("");
    let name = "vtsnap-snap-example-commerce-x-x";
    // A person's CronJob of the very name a shard would get, and one of a gone shard.
    let hand = |name: &str, labelled: bool, owner: &str| {
        let mut labels = json!({});
        if labelled {
            labels["app.kubernetes.io/managed-by"] = json!("vtsnap-schedule");
        }
        cron_seen(
            &json!({"metadata": {"name": name, "uid": "u", "resourceVersion": "1", "labels": labels,
                "ownerReferences": [{"uid": owner}],
                "annotations": {"vtsnap.io/schedule-shard": "vitess/example/commerce/-"}}}),
            Some(&template()),
            &RunningJobs::default(),
        )
    };
    for c in [hand(name, false, UID), hand(name, true, "another-uid")] {
        assert!(!c.ours);
        let p = plan(
            &cfg,
            &seen(vec![cluster(&[("commerce", "-")])], vec![c.clone()]),
        );
        let d = find(&p, name);
        assert_eq!(
            (d.action, d.reason),
            (Action::Keep, Reason::NotOurs),
            "{p:#?}"
        );
        assert_eq!(p.decisions.len(), 1);
        // Its shard gone everywhere: still left alone.
        let mut gone = c;
        gone.vtctld = InVtctld::Absent;
        let p = plan(&cfg, &seen(vec![cluster(&[])], vec![gone]));
        assert!(p.decisions.is_empty(), "{p:#?}");
    }
}

#[test]
fn uncertain_reads_change_nothing_they_cover() {
    let cfg = config("");
    let crons = applied(
        &[],
        &plan(&cfg, &seen(vec![cluster(&[("commerce", "-")])], vec![])),
    );
    // The template cannot be read: no decision at all.
    let mut s = seen(vec![cluster(&[])], crons.clone());
    s.template = Err("ConfigMap vtsnap/x not found".into());
    let p = plan(&cfg, &s);
    assert!(
        p.decisions.is_empty() && p.problems[0].contains("not found"),
        "{p:#?}"
    );
    // The VitessCluster cannot be read: its CronJob is kept, nothing is created.
    let mut unread = cluster(&[]);
    unread.shards = Err("forbidden".into());
    let mut crons_gone = crons.clone();
    crons_gone[0].vtctld = InVtctld::Absent;
    let p = plan(&cfg, &seen(vec![unread], crons_gone.clone()));
    assert_eq!(p.decisions.len(), 1);
    assert_eq!(
        (p.decisions[0].action, p.decisions[0].reason),
        (Action::Keep, Reason::SpecUnread)
    );
    assert!(p.problems[0].contains("forbidden"));
    // Its cluster left the config: kept, said.
    let p = plan(
        &Config::from_yaml("clusters:\n- name: other\n  namespace: vitess\n").unwrap(),
        &seen(vec![], crons_gone.clone()),
    );
    assert_eq!(p.decisions[0].reason, Reason::ClusterNotConfigured);
    // A record of ours that cannot be read.
    let mut bad = crons_gone[0].clone();
    bad.shard = ShardRef::parse_path("vitess/example/commerce/zz").map_err(|e| e.to_string());
    let p = plan(&cfg, &seen(vec![cluster(&[])], vec![bad]));
    assert_eq!(
        (p.decisions[0].action, p.decisions[0].reason),
        (Action::Keep, Reason::UnreadableRecord)
    );
}

#[test]
fn policy_and_overrides_choose_schedule_suspension_and_mode() {
    let cfg = config(
        "  snapshot: {schedule: \"0 */4 * * *\", stagger: 0s}\n  keyspaces:\n    lookup:\n      snapshot: {suspend: true}\n",
    );
    let mut s = seen(
        vec![cluster(&[
            ("commerce", "-80"),
            ("commerce", "80-"),
            ("lookup", "-"),
        ])],
        vec![],
    );
    if let Ok(t) = &mut s.template {
        t.snapshot.overrides = vec![Override {
            cluster: "example".into(),
            keyspace: "commerce".into(),
            shard: "x-80".into(),
            mode: Some(Mode::Online),
            schedule: Some("15 3 * * *".into()),
            suspend: None,
        }];
    }
    let p = plan(&cfg, &s);
    let d = find(&p, "vtsnap-snap-example-commerce-x-80");
    assert_eq!(
        schedule_of(d),
        "15 3 * * *",
        "an override's line is run as written"
    );
    let args = &d.desired.as_ref().unwrap()["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        [0]["args"];
    assert_eq!(
        args.as_array().unwrap()[5..],
        [json!("--shard=-80"), json!("--mode"), json!("online")]
    );
    let d = find(&p, "vtsnap-snap-example-commerce-80-x");
    assert_eq!(schedule_of(d), "0 */4 * * *", "stagger 0s: as written");
    let d = find(&p, "vtsnap-snap-example-lookup-x-x");
    assert_eq!(d.desired.as_ref().unwrap()["spec"]["suspend"], true);
    // A changed policy updates the CronJob, with the version read as its precondition.
    let crons = applied(&[], &p);
    let cfg2 = config("  snapshot: {schedule: \"0 */3 * * *\", stagger: 0s}\n");
    let p2 = plan(&cfg2, &seen(s.clusters.clone(), crons));
    let d = find(&p2, "vtsnap-snap-example-commerce-80-x");
    assert_eq!((d.action, d.reason), (Action::Update, Reason::Changed));
    assert_eq!(d.resource_version.as_deref(), Some("2"));
    assert_eq!(schedule_of(d), "0 */3 * * *");
}

#[test]
fn a_schedule_it_cannot_stagger_is_named_and_its_cronjob_kept() {
    let cfg = config("");
    let crons = applied(
        &[],
        &plan(&cfg, &seen(vec![cluster(&[("commerce", "-")])], vec![])),
    );
    // Valid alone, but a schedule of many minutes cannot take the shard's stagger.
    let s = seen(vec![cluster(&[("commerce", "-")])], crons);
    // (The config's own validation refuses this; the decision holds without it.)
    let unchecked: Config = serde_json::from_value(json!({"clusters": [{"name": "example",
        "namespace": "vitess", "snapshot": {"stagger": "1h"},
        "keyspaces": {"commerce": {"shards": {"-": {"snapshot": {"schedule": "*/7 * * * *"}}}}}}]}))
    .unwrap();
    let p = plan(&unchecked, &s);
    assert_eq!(p.decisions.len(), 1, "{p:#?}");
    assert_eq!(
        (p.decisions[0].action, p.decisions[0].reason),
        (Action::Keep, Reason::BadPolicy)
    );
    assert!(p.problems[0].contains("one minute of the hour"), "{p:#?}");
}

#[test]
fn records_that_do_not_fit_are_left_alone_and_named() {
    let cfg = config("");
    let s = seen(vec![cluster(&[("commerce", "-")])], vec![]);
    let first = plan(&cfg, &s);
    let crons = applied(&[], &first);
    let name = "vtsnap-snap-example-commerce-x-x";
    // Ours under this shard's name, but its record names another shard: left alone, and
    // the shard left without one is a problem (the run exits 1).
    let mut other = crons[0].clone();
    other.shard = ShardRef::parse_path("vitess/example/commerce/-80").map_err(|e| e.to_string());
    let p = plan(&cfg, &seen(s.clusters.clone(), vec![other.clone()]));
    assert_eq!(
        (find(&p, name).action, find(&p, name).reason),
        (Action::Keep, Reason::NameTaken)
    );
    assert_eq!(p.decisions.len(), 1, "{p:#?}");
    assert!(
        p.problems[0].contains("vitess/example/commerce/-80"),
        "{p:#?}"
    );
    // Once the shard it names is gone from vtctld too, it goes under the gate like any
    // other: the name is not held for it for ever.
    other.vtctld = InVtctld::Absent;
    let p = plan(&cfg, &seen(s.clusters.clone(), vec![other.clone()]));
    assert_eq!(
        (find(&p, name).action, find(&p, name).reason),
        (Action::Delete, Reason::ShardGone),
        "{p:#?}"
    );
    assert_eq!(p.decisions.len(), 1, "{p:#?}");
    // Its record unreadable: left alone as well.
    let mut unreadable = crons[0].clone();
    unreadable.shard = Err("no record".into());
    let p = plan(&cfg, &seen(s.clusters.clone(), vec![unreadable]));
    assert_eq!(find(&p, name).reason, Reason::UnreadableRecord);
    // An update carries the uid and version read.
    let p = plan(
        &config("  snapshot: {suspend: true}\n"),
        &seen(s.clusters.clone(), crons),
    );
    let d = find(&p, name);
    assert_eq!(d.action, Action::Update);
    assert_eq!(
        (d.uid.as_deref(), d.resource_version.as_deref()),
        (Some(format!("uid-{name}").as_str()), Some("2"))
    );
}

#[test]
fn an_empty_override_schedule_is_the_policy_s() {
    let mut s = seen(vec![cluster(&[("commerce", "-")])], vec![]);
    if let Ok(t) = &mut s.template {
        t.snapshot.overrides = vec![Override {
            cluster: "example".into(),
            keyspace: "commerce".into(),
            shard: "-".into(),
            mode: None,
            schedule: Some(String::new()),
            suspend: None,
        }];
    }
    let p = plan(&config("  snapshot: {stagger: 0s}\n"), &s);
    assert_eq!(schedule_of(&p.decisions[0]), "0 */6 * * *");
}

#[test]
fn a_cronjob_it_did_not_make_holds_no_minute() {
    // A two-minute window, two shards: a person's CronJob for one of them records the
    // minute the other would otherwise take; it must not change the other's.
    let cfg = config("  snapshot: {stagger: 2m}\n");
    let s = seen(
        vec![cluster(&[("commerce", "-80"), ("commerce", "80-")])],
        vec![],
    );
    let alone = plan(&cfg, &s);
    let minute_of = |p: &Plan, name: &str| {
        find(p, name).desired.as_ref().unwrap()["metadata"]["annotations"]
            ["vtsnap.io/stagger-minutes"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let high = "vtsnap-snap-example-commerce-80-x";
    let low = "vtsnap-snap-example-commerce-x-80";
    let want = minute_of(&alone, high);
    let hand = cron_seen(
        &json!({"metadata": {"name": low, "uid": "u", "resourceVersion": "1",
            "annotations": {"vtsnap.io/schedule-shard": "vitess/example/commerce/-80",
                            "vtsnap.io/stagger-minutes": want}}}),
        Some(&template()),
        &RunningJobs::default(),
    );
    let p = plan(&cfg, &seen(s.clusters.clone(), vec![hand]));
    assert_eq!(find(&p, low).reason, Reason::NotOurs);
    assert_eq!(minute_of(&p, high), want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any set of shards: distinct minutes within the six hours, a second run keeps all,
    /// and a shard added later moves no other shard's schedule.
    #[test]
    fn spread_stable_and_idempotent(
        parts in 1usize..24,
        extra_keyspace in "[a-z]{3,8}",
    ) {
        let cfg = config("");
        let shards: Vec<String> = vtsnap_core::vitesscluster::equal_shards(parts as u64).unwrap();
        let pairs: Vec<(&str, &str)> = shards.iter().map(|s| ("commerce", s.as_str())).collect();
        let s = seen(vec![cluster(&pairs)], vec![]);
        let first = plan(&cfg, &s);
        prop_assert_eq!(first.count(Action::Create), parts);
        let schedules: std::collections::BTreeSet<String> = first.decisions.iter().map(schedule_of).collect();
        prop_assert_eq!(schedules.len(), parts, "two shards at the same minute");
        let crons = applied(&[], &first);
        let again = plan(&cfg, &seen(s.clusters.clone(), crons.clone()));
        prop_assert_eq!(again.count(Action::Keep), parts);
        let mut more = pairs.clone();
        more.push((extra_keyspace.as_str(), "-"));
        let grown = plan(&cfg, &seen(vec![cluster(&more)], crons));
        prop_assert_eq!(grown.count(Action::Create), 1);
        prop_assert_eq!(grown.count(Action::Keep), parts);
        prop_assert_eq!(grown.count(Action::Update) + grown.count(Action::Delete), 0);
    }
}

#[path = "decide_drill_tests.rs"]
mod drill;

#[path = "decide_archive_tests.rs"]
mod archive;

#[path = "decide_names_tests.rs"]
mod names_tests;
