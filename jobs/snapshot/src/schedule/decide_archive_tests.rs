//! Binlog-archive CronJobs (docs/pitr.md §6): made per shard whose `pitr.enabled` is true
//! when the chart's archive is on, on the `pitr` policy's schedule and their own stagger,
//! and deleted when the archive is turned off (the chart's or the shard's), never while an
//! increment is being taken.

use super::*;

fn with_archive() -> Template {
    Template {
        archive: Some(KindTemplate {
            cronjob: json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "template", "labels": {"app.kubernetes.io/component": "pitr"}},
                "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": {"spec": {
                    "serviceAccountName": "vtsnap-pitr", "restartPolicy": "Never",
                    "containers": [{"name": "archive", "image": "vtsnap-pitr:1",
                        "args": ["archive", "--archive-root", "/vt/backups"]}]}}}}}}),
            overrides: vec![],
        }),
        ..with_drills()
    }
}

fn with_archive_seen(clusters: Vec<ClusterSeen>, cronjobs: Vec<CronSeen>) -> Observed {
    Observed {
        template: Ok(with_archive()),
        clusters,
        cronjobs,
    }
}

const ARCHIVE_X80: &str = "vtsnap-pitr-example-commerce-x-80";
const ARCHIVE_80X: &str = "vtsnap-pitr-example-commerce-80-x";

/// The archive on for the keyspace, off for its shard `80-`.
fn keyspace_on_one_shard_off() -> Config {
    config(
        "  keyspaces:\n    commerce:\n      pitr: {enabled: true}\n      shards:\n        \"80-\": {pitr: {enabled: false}}\n",
    )
}

fn args_of(d: &Decision) -> Vec<Value> {
    d.desired.as_ref().unwrap()["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        ["args"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn only_shards_with_pitr_enabled_get_an_archive_cronjob_every_fifteen_minutes_staggered() {
    let cfg = keyspace_on_one_shard_off();
    let p = plan(&cfg, &with_archive_seen(vec![two_shards()], vec![]));
    // Two snapshots, two drills, one archive: 80- has the archive off.
    assert_eq!(p.count(Action::Create), 5, "{p:#?}");
    assert!(p.decisions.iter().all(|d| d.name != ARCHIVE_80X), "{p:#?}");
    let d = find(&p, ARCHIVE_X80);
    assert_eq!((d.action, d.reason), (Action::Create, Reason::NewShard));
    let o = d.desired.as_ref().unwrap();
    assert_eq!(o["metadata"]["annotations"][names::ANN_KIND], "archive");
    assert_eq!(
        o["metadata"]["annotations"][names::ANN_SHARD],
        "vitess/example/commerce/-80"
    );
    assert_eq!(
        args_of(d),
        [
            "archive",
            "--archive-root",
            "/vt/backups",
            "--cluster",
            "example",
            "--keyspace",
            "commerce",
            "--shard=-80"
        ]
        .map(|a| json!(a))
    );
    // The default `*/15 * * * *`, moved by an offset inside its 15 minutes: four runs an
    // hour, 15 minutes apart.
    let line = schedule_of(d);
    let fields: Vec<&str> = line.split(' ').collect();
    assert_eq!(fields[1..], ["*", "*", "*", "*"], "{line}");
    let minutes: Vec<u32> = fields[0].split(',').map(|m| m.parse().unwrap()).collect();
    assert_eq!(minutes.len(), 4, "{line}");
    assert!(minutes.windows(2).all(|w| w[1] - w[0] == 15), "{line}");
    // A second run changes nothing.
    let again = plan(
        &cfg,
        &with_archive_seen(vec![two_shards()], applied_with(&[], &p, &with_archive())),
    );
    assert!(
        again.decisions.iter().all(|d| d.reason == Reason::UpToDate),
        "{again:#?}"
    );
}

#[test]
fn the_pitr_policy_chooses_schedule_and_suspension_and_an_override_wins() {
    let cfg = config(
        "  pitr: {enabled: true, schedule: \"*/5 * * * *\", stagger: 0s}\n  keyspaces:\n    commerce:\n      shards:\n        \"80-\": {pitr: {suspend: true}}\n",
    );
    let mut s = with_archive_seen(vec![two_shards()], vec![]);
    if let Ok(Template {
        archive: Some(a), ..
    }) = &mut s.template
    {
        a.overrides = vec![Override {
            cluster: "example".into(),
            keyspace: "commerce".into(),
            shard: "-80".into(),
            mode: None,
            schedule: Some("*/2 * * * *".into()),
            suspend: None,
        }];
    }
    let p = plan(&cfg, &s);
    assert_eq!(schedule_of(find(&p, ARCHIVE_X80)), "*/2 * * * *");
    let d = find(&p, ARCHIVE_80X);
    assert_eq!(schedule_of(d), "*/5 * * * *", "stagger 0s: as written");
    assert_eq!(d.desired.as_ref().unwrap()["spec"]["suspend"], true);
    assert_eq!(
        find(&p, "vtsnap-snap-example-commerce-80-x")
            .desired
            .as_ref()
            .unwrap()["spec"]["suspend"],
        false,
        "the archive's suspension is its own"
    );
}

#[test]
fn the_archive_turned_off_deletes_its_cronjobs_but_never_a_running_increment() {
    let on = config("  pitr: {enabled: true}\n");
    let made = applied_with(
        &[],
        &plan(&on, &with_archive_seen(vec![two_shards()], vec![])),
        &with_archive(),
    );
    assert_eq!(made.len(), 6);
    // The chart's archive off: both archive CronJobs go, drills and snapshots stay.
    let chart_off = plan(&on, &with_drills_seen(vec![two_shards()], made.clone()));
    for name in [ARCHIVE_X80, ARCHIVE_80X] {
        let d = find(&chart_off, name);
        assert_eq!((d.action, d.reason), (Action::Delete, Reason::PitrOff));
        assert!(
            d.message.contains("chart's binlog archive"),
            "{}",
            d.message
        );
        assert_eq!(
            (d.uid.as_deref(), d.resource_version.as_deref()),
            (Some(format!("uid-{name}").as_str()), Some("2"))
        );
    }
    assert_eq!(chart_off.count(Action::Delete), 2, "{chart_off:#?}");
    assert_eq!(chart_off.count(Action::Keep), 4, "{chart_off:#?}");
    // One shard's policy off: only its archive goes.
    let p = plan(
        &keyspace_on_one_shard_off(),
        &with_archive_seen(vec![two_shards()], made.clone()),
    );
    let d = find(&p, ARCHIVE_80X);
    assert_eq!((d.action, d.reason), (Action::Delete, Reason::PitrOff));
    assert!(d.message.contains("pitr.enabled is false"), "{}", d.message);
    assert_eq!(find(&p, ARCHIVE_X80).reason, Reason::UpToDate);
    assert_eq!(p.count(Action::Delete), 1, "{p:#?}");
    // An increment still being taken is never cut off, whichever way it was turned off.
    let running: Vec<CronSeen> = made
        .iter()
        .cloned()
        .map(|mut c| {
            c.active_jobs = usize::from(c.name == ARCHIVE_80X);
            c
        })
        .collect();
    for p in [
        plan(&on, &with_drills_seen(vec![two_shards()], running.clone())),
        plan(
            &keyspace_on_one_shard_off(),
            &with_archive_seen(vec![two_shards()], running),
        ),
    ] {
        let d = find(&p, ARCHIVE_80X);
        assert_eq!((d.action, d.reason), (Action::Keep, Reason::JobRunning));
    }
}

#[test]
fn drills_off_never_delete_an_archive_and_the_archive_off_never_a_drill() {
    let on = config("  pitr: {enabled: true}\n");
    let made = applied_with(
        &[],
        &plan(&on, &with_archive_seen(vec![two_shards()], vec![])),
        &with_archive(),
    );
    // The chart's drills off, its archive on.
    let archive_only = Template {
        drill: None,
        ..with_archive()
    };
    let p = plan(
        &on,
        &Observed {
            template: Ok(archive_only),
            clusters: vec![two_shards()],
            cronjobs: made.clone(),
        },
    );
    for d in &p.decisions {
        let want = if d.name.contains("-drill-") {
            Reason::DrillsOff
        } else {
            Reason::UpToDate
        };
        assert_eq!(d.reason, want, "{d:#?}");
    }
    // The shard's drill off: its archive stays.
    let cfg = config("  pitr: {enabled: true}\n  drill: {enabled: false}\n");
    let p = plan(&cfg, &with_archive_seen(vec![two_shards()], made));
    assert_eq!(find(&p, ARCHIVE_X80).reason, Reason::UpToDate);
    assert_eq!(p.count(Action::Delete), 2, "the two drills: {p:#?}");
}

#[test]
fn an_archive_cronjob_of_a_gone_shard_waits_for_vtctld() {
    let on = config("  pitr: {enabled: true}\n");
    let one = with_archive_seen(vec![cluster(&[("commerce", "-")])], vec![]);
    let made = applied_with(&[], &plan(&on, &one), &with_archive());
    let archive = "vtsnap-pitr-example-commerce-x-x";
    let after = |vtctld: InVtctld| {
        let crons: Vec<CronSeen> = made
            .iter()
            .cloned()
            .map(|mut c| {
                c.vtctld = vtctld.clone();
                c
            })
            .collect();
        plan(&on, &with_archive_seen(vec![two_shards()], crons))
    };
    assert_eq!(
        find(&after(InVtctld::Present), archive).reason,
        Reason::StillInVtctld
    );
    let d = find(&after(InVtctld::Absent), archive).clone();
    assert_eq!((d.action, d.reason), (Action::Delete, Reason::ShardGone));
}

#[test]
fn a_second_drill_or_archive_cronjob_of_a_shard_with_them_on_is_kept_as_a_duplicate() {
    // Drills and the archive on for every shard; a copy of each of -80's CronJobs under an
    // old release name: kept and named, never deleted as if its kind were off.
    let on = config("  pitr: {enabled: true}\n");
    let made = applied_with(
        &[],
        &plan(&on, &with_archive_seen(vec![two_shards()], vec![])),
        &with_archive(),
    );
    let mut crons = made.clone();
    for current in ["vtsnap-drill-example-commerce-x-80", ARCHIVE_X80] {
        let mut copy = made.iter().find(|c| c.name == current).unwrap().clone();
        copy.name = format!("old-{current}");
        copy.uid = format!("uid-old-{current}");
        crons.push(copy);
    }
    let p = plan(&on, &with_archive_seen(vec![two_shards()], crons));
    for current in ["vtsnap-drill-example-commerce-x-80", ARCHIVE_X80] {
        let d = find(&p, &format!("old-{current}"));
        assert_eq!(
            (d.action, d.reason),
            (Action::Keep, Reason::Duplicate),
            "{d:#?}"
        );
        assert!(d.message.contains(current), "{}", d.message);
        assert_eq!(find(&p, current).reason, Reason::UpToDate);
    }
    assert_eq!(p.count(Action::Delete), 0, "{p:#?}");
}
