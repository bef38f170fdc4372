//! Drill CronJobs (docs/design.md §5.9): made per shard beside the snapshot's when the
//! chart's drills are on, on the `drill` policy's schedule and their own stagger, and
//! deleted when drills are turned off or the shard is gone, never while a drill runs.

use super::*;

const DRILL_X80: &str = "vtsnap-drill-example-commerce-x-80";
const DRILL_80X: &str = "vtsnap-drill-example-commerce-80-x";

/// (hour, minute) of a daily line `M H * * *`.
fn at(d: &Decision) -> (u32, u32) {
    let line = schedule_of(d);
    let f: Vec<&str> = line.split(' ').collect();
    assert_eq!(f[2..], ["*", "*", "*"], "{line}");
    (f[1].parse().unwrap(), f[0].parse().unwrap())
}

#[test]
fn each_shard_gets_a_drill_cronjob_on_the_drill_policy_spread_over_the_day() {
    let cfg = config("  snapshot: {schedule: \"0 */6 * * *\"}\n");
    let p = plan(&cfg, &with_drills_seen(vec![two_shards()], vec![]));
    assert_eq!(p.count(Action::Create), 4, "{p:#?}");
    let (a, b) = (find(&p, DRILL_X80), find(&p, DRILL_80X));
    for d in [a, b] {
        assert_eq!((d.action, d.reason), (Action::Create, Reason::NewShard));
        let o = d.desired.as_ref().unwrap();
        assert_eq!(o["metadata"]["annotations"][names::ANN_KIND], "drill");
        let c = &o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["name"], "drill");
        let args = c["args"].as_array().unwrap();
        assert_eq!(
            args[..5],
            [
                json!("run"),
                json!("--deadline"),
                json!("1h"),
                json!("--cluster"),
                json!("example")
            ]
        );
        assert!(!args.contains(&json!("--mode")), "{args:?}");
        assert_eq!(
            o["spec"]["jobTemplate"]["metadata"]["labels"]["vtsnap.io/keyspace"],
            "commerce"
        );
    }
    assert_eq!(
        a.desired.as_ref().unwrap()["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .last(),
        Some(&json!("--shard=-80"))
    );
    // The default "0 3 * * *" spread over the day: two shards, two different minutes of
    // the day, each at or after 03:00 (the offset moves it later, wrapping at midnight).
    let (ta, tb) = (at(a), at(b));
    assert_ne!(ta, tb, "{ta:?} {tb:?}");
    // The snapshot CronJobs keep their own schedule: a drill policy does not move them.
    let snap = schedule_of(find(&p, "vtsnap-snap-example-commerce-x-80"));
    let hours = snap.split(' ').nth(1).unwrap().split(',').count();
    assert_eq!(hours, 4, "every six hours: {snap}");
    // A second run changes nothing.
    let again = plan(
        &cfg,
        &with_drills_seen(vec![two_shards()], applied_with(&[], &p, &with_drills())),
    );
    assert!(
        again.decisions.iter().all(|d| d.reason == Reason::UpToDate),
        "{again:#?}"
    );
}

#[test]
fn the_drill_policy_chooses_schedule_stagger_and_suspension_and_overrides_win() {
    let cfg = config(
        "  drill: {schedule: \"30 1 * * *\", stagger: 0s}\n  keyspaces:\n    commerce:\n      shards:\n        \"80-\": {drill: {suspend: true}}\n",
    );
    let mut s = with_drills_seen(vec![two_shards()], vec![]);
    if let Ok(Template { drill: Some(d), .. }) = &mut s.template {
        d.overrides = vec![Override {
            cluster: "example".into(),
            keyspace: "commerce".into(),
            shard: "-80".into(),
            mode: None,
            schedule: Some("45 4 * * 0".into()),
            suspend: None,
        }];
    }
    let p = plan(&cfg, &s);
    assert_eq!(schedule_of(find(&p, DRILL_X80)), "45 4 * * 0");
    let d = find(&p, DRILL_80X);
    assert_eq!(schedule_of(d), "30 1 * * *", "stagger 0s: as written");
    assert_eq!(d.desired.as_ref().unwrap()["spec"]["suspend"], true);
    assert_eq!(
        find(&p, "vtsnap-snap-example-commerce-80-x")
            .desired
            .as_ref()
            .unwrap()["spec"]["suspend"],
        false,
        "the drill's suspension is its own"
    );
}

#[test]
fn drills_turned_off_delete_their_cronjobs_but_never_a_running_drill() {
    let cfg = config("");
    let made = applied_with(
        &[],
        &plan(&cfg, &with_drills_seen(vec![two_shards()], vec![])),
        &with_drills(),
    );
    // The chart's drills off: both drill CronJobs go, the snapshot ones stay.
    let off = plan(&cfg, &seen(vec![two_shards()], made.clone()));
    for name in [DRILL_X80, DRILL_80X] {
        let d = find(&off, name);
        assert_eq!((d.action, d.reason), (Action::Delete, Reason::DrillsOff));
        // The uid and version read are the delete's preconditions.
        assert_eq!(
            (d.uid.as_deref(), d.resource_version.as_deref()),
            (Some(format!("uid-{name}").as_str()), Some("2"))
        );
    }
    assert_eq!(off.count(Action::Keep), 2, "{off:#?}");
    // One shard's policy off: only its drill goes.
    let cfg_off = config(
        "  keyspaces:\n    commerce:\n      shards:\n        \"-80\": {drill: {enabled: false}}\n",
    );
    let p = plan(
        &cfg_off,
        &with_drills_seen(vec![two_shards()], made.clone()),
    );
    assert_eq!(
        (find(&p, DRILL_X80).action, find(&p, DRILL_X80).reason),
        (Action::Delete, Reason::DrillsOff)
    );
    assert_eq!(find(&p, DRILL_80X).reason, Reason::UpToDate);
    assert_eq!(p.count(Action::Delete), 1);
    // …and a fresh shard with drills off for it gets none.
    let fresh = plan(&cfg_off, &with_drills_seen(vec![two_shards()], vec![]));
    assert!(
        fresh.decisions.iter().all(|d| d.name != DRILL_X80),
        "{fresh:#?}"
    );
    // A drill still running is never cut off, whichever way drills were turned off.
    let running: Vec<CronSeen> = made
        .iter()
        .cloned()
        .map(|mut c| {
            c.active_jobs = usize::from(c.name == DRILL_X80);
            c
        })
        .collect();
    for p in [
        plan(&cfg, &seen(vec![two_shards()], running.clone())),
        plan(&cfg_off, &with_drills_seen(vec![two_shards()], running)),
    ] {
        let d = find(&p, DRILL_X80);
        assert_eq!((d.action, d.reason), (Action::Keep, Reason::JobRunning));
    }
}

#[test]
fn a_gone_shard_s_drill_cronjob_waits_for_vtctld_like_its_snapshot_s() {
    let cfg = config("");
    let one = with_drills_seen(vec![cluster(&[("commerce", "-")])], vec![]);
    let made = applied_with(&[], &plan(&cfg, &one), &with_drills());
    let drill = "vtsnap-drill-example-commerce-x-x";
    let after = |vtctld: InVtctld| {
        let crons: Vec<CronSeen> = made
            .iter()
            .cloned()
            .map(|mut c| {
                c.vtctld = vtctld.clone();
                c
            })
            .collect();
        plan(&cfg, &with_drills_seen(vec![two_shards()], crons))
    };
    let p = after(InVtctld::Present);
    assert_eq!(find(&p, drill).reason, Reason::StillInVtctld);
    assert_eq!(
        p.count(Action::Create),
        4,
        "the new shards' snapshots and drills"
    );
    let p = after(InVtctld::Absent);
    let d = find(&p, drill);
    assert_eq!((d.action, d.reason), (Action::Delete, Reason::ShardGone));
}

#[test]
fn a_kind_record_it_cannot_read_is_left_alone() {
    let cfg = config("");
    let made = applied_with(
        &[],
        &plan(&cfg, &with_drills_seen(vec![two_shards()], vec![])),
        &with_drills(),
    );
    let mut bad = None;
    let crons: Vec<CronSeen> = made
        .into_iter()
        .map(|c| {
            if c.name != DRILL_X80 {
                return c;
            }
            let mut obj = json!({"metadata": {"name": c.name, "uid": c.uid, "resourceVersion": "2",
                "labels": {"app.kubernetes.io/managed-by": "vtsnap-schedule"},
                "ownerReferences": [{"uid": UID}],
                "annotations": {"vtsnap.io/schedule-shard": "vitess/example/commerce/-80",
                    "vtsnap.io/schedule-kind": "restore"}}});
            obj["metadata"]["annotations"]["vtsnap.io/stagger-minutes"] = json!("0");
            let seen = cron_seen(&obj, Some(&with_drills()), &RunningJobs::default());
            bad = Some(seen.shard.clone());
            seen
        })
        .collect();
    assert!(
        bad.unwrap()
            .unwrap_err()
            .contains("not snapshot, drill or archive")
    );
    // Not deleted with drills on, nor with drills off.
    for p in [
        plan(&cfg, &with_drills_seen(vec![two_shards()], crons.clone())),
        plan(&cfg, &seen(vec![two_shards()], crons)),
    ] {
        let d = find(&p, DRILL_X80);
        assert_eq!(
            (d.action, d.reason),
            (Action::Keep, Reason::UnreadableRecord),
            "{p:#?}"
        );
    }
}

#[test]
fn a_snapshot_cronjob_is_never_taken_for_a_drill_of_the_same_shard() {
    let cfg = config("");
    let made = applied_with(
        &[],
        &plan(&cfg, &with_drills_seen(vec![two_shards()], vec![])),
        &with_drills(),
    );
    // The drill's name holding a snapshot record (the kind annotation lost): left alone.
    let crons: Vec<CronSeen> = made
        .into_iter()
        .map(|mut c| {
            if c.name == DRILL_X80 {
                c.kind = Kind::Snapshot;
            }
            c
        })
        .collect();
    let p = plan(&cfg, &with_drills_seen(vec![two_shards()], crons));
    let d = find(&p, DRILL_X80);
    assert_eq!((d.action, d.reason), (Action::Keep, Reason::NameTaken));
    assert!(d.message.contains("snapshot"), "{}", d.message);
    // The shard is left without a drill: a problem, so the run says so.
    assert_eq!(p.problems.len(), 1, "{p:#?}");
    assert!(p.problems[0].contains(DRILL_X80), "{:?}", p.problems);
    // Its snapshot CronJob stays the one under the snapshot name.
    assert_eq!(
        find(&p, "vtsnap-snap-example-commerce-x-80").reason,
        Reason::UpToDate
    );
}

#[test]
fn a_shard_s_drills_off_never_touch_its_snapshot_cronjobs() {
    // -80's drills are off; a snapshot CronJob of ours for -80 under an old release name
    // is a duplicate of the current one, kept as such — never deleted as a drill.
    let cfg_off = config(
        "  keyspaces:\n    commerce:\n      shards:\n        \"-80\": {drill: {enabled: false}}\n",
    );
    let made = applied_with(
        &[],
        &plan(&cfg_off, &with_drills_seen(vec![two_shards()], vec![])),
        &with_drills(),
    );
    let current = "vtsnap-snap-example-commerce-x-80";
    let mut renamed = made.iter().find(|c| c.name == current).unwrap().clone();
    renamed.name = "old-vtsnap-snap-example-commerce-x-80".into();
    renamed.uid = "uid-old".into();
    let mut crons = made.clone();
    crons.push(renamed);
    let p = plan(&cfg_off, &with_drills_seen(vec![two_shards()], crons));
    let d = find(&p, "old-vtsnap-snap-example-commerce-x-80");
    assert_eq!((d.action, d.reason), (Action::Keep, Reason::Duplicate));
    assert_eq!(find(&p, current).reason, Reason::UpToDate);
    assert!(p.decisions.iter().all(|d| d.name != DRILL_X80), "{p:#?}");
}
