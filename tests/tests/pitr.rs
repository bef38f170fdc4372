//! Point-in-time recovery on a snapshot base, against real Vitess 24 and MySQL 9.7
//! (docs/pitr.md): the archive is real Vitess incremental backups in its `file` storage,
//! the base a cold cut taken in vtsnap's order, the replay the script `vtsnap-pitr` runs
//! beside the recovered mysqld (`mysqlbinlog … | mysql`, in the mysqld's own container).
//!
//! - A table dropped after the snapshot comes back: to a time (the second of the drop,
//!   exclusive) and to a GTID set (inclusive, exactly), each with the checksum the table
//!   had at that point; what came after the drop is not there.
//! - The real MANIFESTs read as increments whose files check (CRC-32, many gzip members).
//! - An increment deleted from the middle of the archive is a gap the plan names by the
//!   GTIDs it held.
//! - An online snapshot (taken of a running mysqld, its position a lower bound read
//!   before) is a base too: restored, crash-recovered, checked within the target, then
//!   replayed to the exact GTID set.
//! - `vtsnap-pitr archive` (config, API, vtctld, storage) goes on from the snapshot the
//!   real `vtsnap-snapshot run` took: the first increment from its recorded set, then from
//!   the archive's end, empty when nothing is new, refused where the config does not
//!   enable it.
//! - Vitess's own `s3` storage on a real S3-compatible server (moto): the increments
//!   Vitess writes there read through vtsnap's object-store client as they do from the
//!   folder, and a recovery to a time before a drop gives the table back.
//! - vtsnap's archive step (`next_increment`, then vtctld's `Backup` over gRPC) goes on
//!   through a reparent: the next increment is taken on a replica of the new topology and
//!   the chain from the snapshot reaches the new primary's transactions; with nothing new
//!   the call stores nothing; a replay across the reparent lands on the primary's set.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::coverage::{Exactness, GtidSet};
use vtsnap_core::pitr::chain::{self, Base, Refusal, Target};
use vtsnap_core::pitr::manifest::Compression;
use vtsnap_core::vtctld::TabletType;
use vtsnap_lab::vitess_cut::{cold_cut, restore_clone_as, shard_on_btrfs, shard_on_btrfs_with};
use vtsnap_lab::vitess_pitr::{
    ARCHIVER, LIMIT, caught_up, caught_up_with, gtid, incremental_backup, insert, insert_on,
    next_second, observe, recover, recover_plan, socket_client,
};
use vtsnap_pitr::act::archive::{Taken, take};
use vtsnap_pitr::decide::archive::{OnPrimary, Tablet, Take, next_increment};
use vtsnap_pitr::decide::replay;
use vtsnap_testkit::s3::S3Server;
use vtsnap_testkit::vitess::{
    BackupStorage, DATABASE, KEYSPACE, Orchestrator, SHARD, TabletRole, VitessShard,
};

const SOURCE: u32 = 102;
const AT_TIME: u32 = 201;
const AT_GTID: u32 = 202;
const AT_BOUND: u32 = 203;

#[tokio::test]
async fn a_dropped_table_comes_back_to_a_time_and_to_a_gtid_and_a_missing_increment_is_named() {
    let (mut shard, vol) = shard_on_btrfs(Orchestrator::Off).await;
    insert(&shard, 1, 51).await;
    let base = Base {
        name: "snap-base".into(),
        gtid: gtid(&cold_cut(&shard, &vol, SOURCE, "snap-base").await),
        exactness: Exactness::Exact,
        cut: Timestamp::now(),
    };
    insert(&shard, 51, 101).await;
    let checksum = format!("CHECKSUM TABLE {DATABASE}.t");
    let at_point = shard.primary().must_sql(&checksum).await;
    let point = gtid(&shard.primary().gtid_executed().await);
    let drop_second = next_second().await;
    shard
        .primary()
        .must_sql(&format!(
            "DROP TABLE {DATABASE}.t; CREATE TABLE {DATABASE}.after_drop (id INT PRIMARY KEY); \
             INSERT INTO {DATABASE}.after_drop VALUES (1)"
        ))
        .await;
    incremental_backup(&shard, &format!("MySQL56/{}", base.gtid)).await;

    // The real MANIFEST reads as one increment that carries the base past the drop.
    let first = observe(&shard).await.increments;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].compression, Compression::Gzip);
    assert!(!first[0].files.is_empty());
    assert!(point.is_subset_of(&first[0].to), "{:?}", first[0]);
    let reach = chain::reach(&base, &first);
    assert_eq!(reach.increments.len(), 1);
    assert!(reach.last_commit.unwrap() >= drop_second, "{reach:?}");

    // To the second of the drop: the table as it was, nothing of what came after.
    let to_time = Target::Before(drop_second);
    recover(&mut shard, &vol, AT_TIME, &base, &first, &to_time).await;
    let t = shard.tablet_by_uid(AT_TIME);
    assert_eq!(t.must_sql(&checksum).await, at_point);
    let after_drop = t
        .must_sql(&format!(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '{DATABASE}' \
             AND table_name = 'after_drop'"
        ))
        .await;
    assert_eq!(after_drop, "0", "nothing after the target is applied");

    // To the GTID set just before the drop: exactly it.
    let to_gtid = Target::Through(point.clone());
    let after = recover(&mut shard, &vol, AT_GTID, &base, &first, &to_gtid).await;
    assert_eq!(after.after, point);
    assert_eq!(
        shard.tablet_by_uid(AT_GTID).must_sql(&checksum).await,
        at_point
    );

    // Two more increments (`auto` continues from the last one); the middle one deleted
    // leaves a gap named by the transactions it held.
    let before_middle = gtid(&shard.primary().gtid_executed().await);
    shard
        .primary()
        .must_sql(&format!("INSERT INTO {DATABASE}.after_drop VALUES (2)"))
        .await;
    incremental_backup(&shard, "auto").await;
    let after_middle = gtid(&shard.primary().gtid_executed().await);
    shard
        .primary()
        .must_sql(&format!("INSERT INTO {DATABASE}.after_drop VALUES (3)"))
        .await;
    incremental_backup(&shard, "auto").await;
    let all = observe(&shard).await.increments;
    assert_eq!(all.len(), 3, "{all:?}");
    let whole = chain::reach(&base, &all);
    assert_eq!((whole.increments.len(), whole.gap.clone()), (3, None));
    let mut names: Vec<&str> = all.iter().map(|i| i.name.as_str()).collect();
    names.sort_unstable();
    std::fs::remove_dir_all(
        shard
            .shared_dir()
            .join("backups")
            .join(KEYSPACE)
            .join(SHARD)
            .join(names[1]),
    )
    .unwrap();
    let holed = observe(&shard).await.increments;
    let end = gtid(&shard.primary().gtid_executed().await);
    let e = chain::plan(&base, &holed, &Target::Through(end)).unwrap_err();
    let Refusal::Gap { gap } = &e else {
        panic!("{e}")
    };
    assert_eq!(gap.next, names[2]);
    let held_by_middle = gtid(&gap.missing);
    assert!(
        held_by_middle.is_subset_of(&after_middle) && !held_by_middle.is_subset_of(&before_middle),
        "{e}: the gap is what the deleted increment held"
    );
}

/// One run of the archive step: the shard's tablets from vtctld, the archive read, the
/// next increment decided and taken (a new second first: Vitess names backups by it).
async fn archive_once(shard: &VitessShard, bases: &[Base], primary: u32) -> (Take, Taken) {
    let client = shard.client();
    let tablets: Vec<Tablet> = client
        .get_tablets(KEYSPACE, SHARD)
        .await
        .unwrap()
        .iter()
        .map(|t| Tablet {
            alias: t.alias.as_ref().unwrap().into(),
            kind: TabletType::try_from(t.r#type).unwrap(),
        })
        .collect();
    let next = next_increment(
        bases,
        &observe(shard).await.increments,
        &tablets,
        OnPrimary::Never,
    )
    .unwrap();
    caught_up_with(shard, next.alias.uid.get(), primary).await;
    next_second().await;
    let taken = take(&client, &next, LIMIT).await.unwrap();
    (next, taken)
}

#[tokio::test]
async fn the_archive_goes_on_through_a_reparent_and_a_replay_crosses_it() {
    let (mut shard, vol) = shard_on_btrfs(Orchestrator::Off).await;
    insert(&shard, 1, 21).await;
    let base = Base {
        name: "snap-base".into(),
        gtid: gtid(&cold_cut(&shard, &vol, SOURCE, "snap-base").await),
        exactness: Exactness::Exact,
        cut: Timestamp::now(),
    };
    let bases = [base.clone()];
    insert(&shard, 21, 41).await;
    let (first, taken) = archive_once(&shard, &bases, 101).await;
    assert_eq!(taken, Taken::Stored);
    assert_eq!(
        first.from,
        format!("MySQL56/{}", base.gtid),
        "the first from the snapshot"
    );
    assert_eq!(
        first.tablet, "zone1-0000000102",
        "a replica, never the primary"
    );

    let new_primary = shard.tablet_by_uid(ARCHIVER).alias.to_string();
    shard
        .ctl(&[
            "PlannedReparentShard",
            "--new-primary",
            &new_primary,
            &format!("{KEYSPACE}/{SHARD}"),
        ])
        .await;
    insert_on(&shard, ARCHIVER, 41, 61).await;
    let (second, taken) = archive_once(&shard, &bases, ARCHIVER).await;
    assert_eq!(taken, Taken::Stored);
    assert_ne!(second.tablet, new_primary, "{second:?}");
    assert_eq!(second.after_increments, 1);

    let end = gtid(&shard.tablet_by_uid(ARCHIVER).gtid_executed().await);
    let increments = observe(&shard).await.increments;
    let reach = chain::reach(&base, &increments);
    assert_eq!((reach.increments.len(), reach.gap.clone()), (2, None));
    assert!(
        end.is_subset_of(&reach.holds),
        "{end} within {}",
        reach.holds
    );
    let GtidSet::Mysql56(sources) = &end else {
        panic!()
    };
    assert_eq!(sources.len(), 2, "writes of both primaries: {end}");

    // Nothing new: the call succeeds and stores nothing.
    let (_, taken) = archive_once(&shard, &bases, ARCHIVER).await;
    assert_eq!(taken, Taken::Empty);
    assert_eq!(observe(&shard).await.increments.len(), 2);

    // A replay across the reparent lands exactly on the new primary's set.
    let checksum = format!("CHECKSUM TABLE {DATABASE}.t");
    let want = shard.tablet_by_uid(ARCHIVER).must_sql(&checksum).await;
    let after = recover(
        &mut shard,
        &vol,
        AT_GTID,
        &base,
        &increments,
        &Target::Through(end.clone()),
    )
    .await;
    assert_eq!(after.after, end);
    assert_eq!(shard.tablet_by_uid(AT_GTID).must_sql(&checksum).await, want);
}

#[tokio::test]
async fn increments_vitess_keeps_in_s3_are_read_and_replayed_to_a_time() {
    let s3 = S3Server::start();
    s3.create_bucket("vitess-backups");
    let storage = BackupStorage::S3 {
        endpoint: s3.endpoint(),
        bucket: "vitess-backups".into(),
        root: "prod/vt".into(),
    };
    let (mut shard, vol) = shard_on_btrfs_with(Orchestrator::Off, storage).await;
    insert(&shard, 1, 31).await;
    let base = Base {
        name: "snap-s3".into(),
        gtid: gtid(&cold_cut(&shard, &vol, SOURCE, "snap-s3").await),
        exactness: Exactness::Exact,
        cut: Timestamp::now(),
    };
    insert(&shard, 31, 61).await;
    let checksum = format!("CHECKSUM TABLE {DATABASE}.t");
    let at_point = shard.primary().must_sql(&checksum).await;
    let drop_second = next_second().await;
    shard
        .primary()
        .must_sql(&format!("DROP TABLE {DATABASE}.t"))
        .await;
    incremental_backup(&shard, &format!("MySQL56/{}", base.gtid)).await;

    // Vitess wrote to the bucket, nothing to the folder; the object-store client finds
    // the increment by its real MANIFEST, its files as Vitess stored them.
    let folder = shard.shared_dir().join("backups").join(KEYSPACE);
    assert!(!folder.exists(), "{} exists", folder.display());
    let increments = observe(&shard).await.increments;
    assert_eq!(increments.len(), 1, "{increments:?}");
    assert_eq!(increments[0].compression, Compression::Gzip);
    let to_time = Target::Before(drop_second);
    recover(&mut shard, &vol, AT_TIME, &base, &increments, &to_time).await;
    assert_eq!(
        shard.tablet_by_uid(AT_TIME).must_sql(&checksum).await,
        at_point
    );
}

#[tokio::test]
async fn an_online_snapshot_is_a_base_checked_after_restore() {
    let (mut shard, vol) = shard_on_btrfs(Orchestrator::Off).await;
    insert(&shard, 1, 41).await;
    caught_up(&shard, SOURCE).await;
    // Online: the lower bound first, then writes, then the cut of the running server.
    let lower = gtid(&shard.tablet_by_uid(SOURCE).gtid_executed().await);
    insert(&shard, 41, 46).await;
    // It holds 5 transactions more than its bound says.
    caught_up(&shard, SOURCE).await;
    vol.snapshot(&SOURCE.to_string(), "snap-online", true);
    let base = Base {
        name: "snap-online".into(),
        gtid: lower.clone(),
        exactness: Exactness::LowerBound,
        cut: Timestamp::now(),
    };
    insert(&shard, 46, 81).await;
    let checksum = format!("CHECKSUM TABLE {DATABASE}.t");
    let at_point = shard.primary().must_sql(&checksum).await;
    let point = gtid(&shard.primary().gtid_executed().await);
    shard
        .primary()
        .must_sql(&format!("DROP TABLE {DATABASE}.t"))
        .await;
    incremental_backup(&shard, &format!("MySQL56/{lower}")).await;
    let increments = observe(&shard).await.increments;
    let plan = chain::plan(&base, &increments, &Target::Through(point.clone())).unwrap();
    assert_eq!(plan.base_check, chain::BaseCheck::WithinTargetAfterRestore);
    let after = recover_plan(
        &mut shard,
        &vol,
        AT_GTID,
        &base,
        &increments,
        &plan,
        &Target::Through(point.clone()),
    )
    .await;
    assert_eq!(after.after, point);
    assert_eq!(
        shard.tablet_by_uid(AT_GTID).must_sql(&checksum).await,
        at_point
    );

    // To its own bound: the plan cannot know better, the script's check on the restored
    // server refuses before anything is replayed.
    let bound = Target::Through(lower.clone());
    let plan = chain::plan(&base, &increments, &bound).unwrap();
    restore_clone_as(&vol, &base.name, AT_BOUND);
    let t = shard.add_mysqld(AT_BOUND).await;
    let before = t.gtid_executed().await;
    let guard = replay::guard(&base, &[], &bound);
    let script = replay::script(&[], &bound, &socket_client(), &guard, None).unwrap();
    assert!(plan.increments.is_empty(), "{plan:?}");
    let out = t
        .container(TabletRole::Mysqld)
        .unwrap()
        .exec(&["bash", "-c", &script])
        .await;
    assert_eq!(out.status.code(), Some(3), "{script}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("vtsnap-pitr: the restored base holds transactions past the target"),
        "{err}"
    );
    assert_eq!(t.gtid_executed().await, before, "nothing was applied");
}

#[tokio::test]
async fn the_archive_command_goes_on_from_the_snapshot_vtsnap_took() {
    use vtsnap_core::config::Config;
    use vtsnap_core::shard::ShardName;
    use vtsnap_lab::vitess_lab::VitessLab;
    use vtsnap_pitr::report::ArchiveOutcome;
    use vtsnap_pitr::run::{ArchiveOptions, Mode, archive};

    let lab = VitessLab::start(vtsnap_lab::timeline::Timeline::new(false)).await;
    let name = ShardName::new("example", "commerce", "-");
    let off = Config::from_yaml(&lab.config("")).unwrap();
    let on = Config::from_yaml(&lab.config("  pitr: {enabled: true}\n")).unwrap();
    let s = vtsnap_snapshot::run::run(
        &off,
        &name,
        &vtsnap_lab::demo::run_options(),
        lab.cp.client(),
    )
    .await;
    assert_eq!(s.exit_code, 0, "{}", serde_json::to_string(&s).unwrap());
    let primary = lab.shard.primary().uid;
    for i in 0..20 {
        lab.shard
            .primary()
            .must_sql(&format!(
                "INSERT INTO {DATABASE}.t (v) VALUES ('after {i}')"
            ))
            .await;
    }
    let opts = ArchiveOptions {
        archive: vtsnap_pitr::archive::ArchivePlace::Folder(lab.shard.shared_dir().join("backups")),
        mode: Mode::Take,
        backup_limit: LIMIT,
    };
    let kube = lab.cp.client();

    let line = archive(&kube, &off, &name, &opts).await;
    assert_eq!(line.outcome, ArchiveOutcome::Refused, "{line:?}");
    assert_eq!(line.error.as_ref().unwrap().code, "pitr-disabled");

    let dry = archive(
        &kube,
        &on,
        &name,
        &ArchiveOptions {
            mode: Mode::DryRun,
            ..opts.clone()
        },
    )
    .await;
    assert_eq!(dry.outcome, ArchiveOutcome::Planned, "{dry:?}");
    let planned = dry.take.unwrap();
    assert_eq!(Some(&planned.base), s.snapshot.as_ref());
    assert_eq!(
        Some(planned.from.clone()),
        s.gtid.clone(),
        "from the set the run recorded"
    );
    assert!(
        observe(&lab.shard).await.increments.is_empty(),
        "a dry run takes nothing"
    );
    assert_eq!(dry.window_recorded_on, None, "a dry run writes nothing");

    caught_up_with(&lab.shard, planned.alias.uid.get(), primary).await;
    next_second().await;
    let line = archive(&kube, &on, &name, &opts).await;
    assert_eq!(line.outcome, ArchiveOutcome::Stored, "{line:?}");
    assert_eq!(line.exit_code, 0);
    let increments = observe(&lab.shard).await.increments;
    assert_eq!(increments.len(), 1);
    let end = gtid(&lab.shard.primary().gtid_executed().await);
    assert!(end.is_subset_of(&increments[0].to), "{end}");
    // The window as the archive now stands, on the snapshot, bound to it: from its cut to
    // the increment's last commit, for `kubectl vtsnap status`.
    assert_eq!(
        line.window_recorded_on.as_ref(),
        s.snapshot.as_ref(),
        "{line:?}"
    );
    assert_eq!(line.window_not_recorded, None);
    let snapshot = || async {
        let shard = on.shard(&name).unwrap().shard.clone();
        let objects = vtsnap_core::reconcile::apis::shard_snapshots(&kube, &shard)
            .await
            .unwrap();
        assert_eq!(objects.len(), 1);
        vtsnap_core::snapshot::VolumeSnapshot::read(&objects[0]).unwrap()
    };
    let read = snapshot().await;
    let now = Timestamp::now();
    let recorded = read.pitr_window(now).unwrap().unwrap().clone();
    assert_eq!(recorded.spans, line.window);
    assert_eq!(recorded.spans.len(), 1, "{recorded:?}");
    assert_eq!(Some(recorded.spans[0].from), read.cut_time);
    assert_eq!(recorded.end(), Some(increments[0].last_commit));

    next_second().await;
    let line = archive(&kube, &on, &name, &opts).await;
    assert_eq!(line.outcome, ArchiveOutcome::Empty, "{line:?}");
    assert_eq!(
        line.take.unwrap().from,
        format!("MySQL56/{}", increments[0].to),
        "from the archive's end"
    );
    assert_eq!(observe(&lab.shard).await.increments.len(), 1);
    // Nothing new: the same window, read again later.
    let again = snapshot().await;
    let now = Timestamp::now();
    let reread = again.pitr_window(now).unwrap().unwrap();
    assert_eq!(reread.spans, recorded.spans);
    assert!(reread.checked > recorded.checked, "{reread:?} {recorded:?}");
}
