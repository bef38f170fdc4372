//! Checks a parsed config and reports every problem with its path.

use std::collections::BTreeSet;

use super::model::*;
use super::resolve::{ResolvedPolicy, merge, with_defaults};
use super::{ConfigError, GoDuration, pvc_spec};
use crate::k8s_names::{self, ANNOTATIONS_TOTAL_MAX, is_dns_label};
use crate::naming::KeyRange;

/// Paths whose value did not parse (and was left out). A check on such a field, or on one
/// below it, would judge a stand-in rather than what the file says, so it stays quiet.
#[derive(Debug, Default)]
pub struct Unparsed(Vec<String>);

impl Unparsed {
    pub fn new(paths: Vec<String>) -> Self {
        Self(paths)
    }

    /// Whether `path` is an unparsed path or lies below one.
    fn covers(&self, path: &str) -> bool {
        self.0.iter().any(|u| {
            path.strip_prefix(u.as_str()).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with('.') || rest.starts_with('[')
            })
        })
    }
}

struct Errors<'u> {
    found: Vec<ConfigError>,
    unparsed: &'u Unparsed,
}

impl Errors<'_> {
    fn at(&mut self, path: &str, field: &str, message: impl Into<String>) {
        let path = if field.is_empty() {
            path.to_owned()
        } else {
            format!("{path}.{field}")
        };
        if self.unparsed.covers(&path) {
            return;
        }
        self.found.push(ConfigError {
            path,
            message: message.into(),
        });
    }
}

fn positive(e: &mut Errors, path: &str, field: &str, d: Option<GoDuration>) {
    if let Some(d) = d
        && d.get().is_zero()
    {
        e.at(path, field, "must be greater than 0");
    }
}

const RESERVED_LABEL_PREFIX: &str = "vtsnap.io/";

/// Annotations vtsnap writes itself (GTID sets among them) get this much of the API's
/// total; the configured ones share the rest.
pub const RESERVED_ANNOTATION_BYTES: usize = 64 * 1024;

/// The tablet pool types that have a data volume (vitess-operator's `VitessTabletPoolType`,
/// `pkg/apis/planetscale/v2/vitessshard_types.go`; the `external*` pools have none).
const POOL_TYPES: [&str; 2] = ["replica", "rdonly"];

fn pool_type(e: &mut Errors, path: &str, i: usize, pool: &str) {
    if POOL_TYPES.contains(&pool) {
        return;
    }
    let why = match pool {
        "primary" | "master" => "is a tablet type, not a pool type",
        p if p.starts_with("external") => {
            "is a pool of externally managed MySQL: it has no data volume to restore"
        }
        _ => "is not a tablet pool type",
    };
    e.at(
        path,
        &format!("pools[{i}]"),
        format!("{pool:?} {why} (pools are `replica` or `rdonly`)"),
    );
}

/// A block's `schedule`: a cron line that fires on some day.
fn schedule(e: &mut Errors, p: &str, sched: &str) {
    use crate::cron::{CronError, Schedule};
    match Schedule::parse(sched).and_then(|s| s.check_fires()) {
        Ok(()) => {}
        Err(CronError::NeverFires) => e.at(
            p,
            "schedule",
            format!("{sched:?} {}", CronError::NeverFires),
        ),
        Err(why) => e.at(
            p,
            "schedule",
            format!("{sched:?} is not a cron line: {why}"),
        ),
    }
}

fn snapshot_block(e: &mut Errors, p: &str, s: &SnapshotPolicy) {
    match s.volume_snapshot_class_name.as_deref() {
        Some("") => e.at(
            p,
            "volumeSnapshotClassName",
            "must not be empty (leave it out for the default class)",
        ),
        Some(class) => {
            if let Err(why) = k8s_names::dns_subdomain(class) {
                e.at(
                    p,
                    "volumeSnapshotClassName",
                    format!("{class:?} is not a VolumeSnapshotClass name: {why}"),
                );
            }
        }
        None => {}
    }
    if let Some(sched) = &s.schedule {
        schedule(e, p, sched);
    }
    positive(e, p, "cutTimeout", s.cut_timeout);
    positive(e, p, "readyTimeout", s.ready_timeout);
    positive(e, p, "maxHold", s.max_hold);
    if let Some(t) = &s.target {
        positive(e, &format!("{p}.target"), "maxLag", t.max_lag);
    }
    for (field, map) in [("labels", &s.labels), ("annotations", &s.annotations)] {
        let fp = format!("{p}.{field}");
        for (k, v) in map.iter().flatten() {
            // An empty key would leave the path ending in '.': shown as "".
            let key_path = if k.is_empty() { "\"\"" } else { k.as_str() };
            if let Err(why) = k8s_names::qualified_name(k) {
                e.at(
                    &fp,
                    key_path,
                    format!("key {k:?} is not a valid {field} key: {why}"),
                );
            } else if k.starts_with(RESERVED_LABEL_PREFIX) || k == crate::labels::MANAGED_BY {
                e.at(&fp, k, "is set by vtsnap itself and cannot be configured");
            }
            if field == "labels"
                && let Err(why) = k8s_names::label_value(v)
            {
                e.at(
                    &fp,
                    key_path,
                    format!("value {v:?} is not a valid label value: {why}"),
                );
            }
        }
    }
}

fn block(e: &mut Errors, path: &str, b: &PolicyBlocks) {
    if let Some(s) = &b.snapshot {
        snapshot_block(e, &format!("{path}.snapshot"), s);
    }
    if let Some(r) = &b.retention {
        let p = format!("{path}.retention");
        match r.max_count {
            Some(n) if n < 1 => e.at(&p, "maxCount", "must be ≥ 1"),
            Some(n) if n > i64::from(u32::MAX) => e.at(
                &p,
                "maxCount",
                format!("{n} is too large (at most {})", u32::MAX),
            ),
            _ => {}
        }
        positive(e, &p, "maxAge", r.max_age);
        positive(e, &p, "failedMaxAge", r.failed_max_age);
    }
    if let Some(r) = &b.restore {
        let p = format!("{path}.restore");
        positive(e, &p, "maxSnapshotAge", r.max_snapshot_age);
        positive(e, &p, "binlogRetention", r.binlog_retention);
        positive(e, &p, "pendingTimeout", r.pending_timeout);
        for (i, pool) in r.pools.iter().flatten().enumerate() {
            pool_type(e, &p, i, pool);
        }
        if let Some(label) = &r.node_label
            && let Err(why) = k8s_names::qualified_name(label)
        {
            e.at(
                &p,
                "nodeLabel",
                format!("{label:?} is not a label key: {why}"),
            );
        }
    }
    if let Some(d) = &b.drill
        && let Some(sched) = &d.schedule
    {
        schedule(e, &format!("{path}.drill"), sched);
    }
    if let Some(pi) = &b.pitr {
        let p = format!("{path}.pitr");
        if let Some(sched) = &pi.schedule {
            schedule(e, &p, sched);
        }
        positive(e, &p, "window", pi.window);
    }
    if let Some(v) = &b.vtbackup {
        let p = format!("{path}.vtbackup");
        if v.use_empty_dir_for_initial_backup == Some(true)
            && v.data_volume_claim_template.is_some()
        {
            e.at(&p, "", "useEmptyDirForInitialBackup: true and dataVolumeClaimTemplate are mutually exclusive");
        }
        if let Some(t) = &v.data_volume_claim_template {
            let tp = format!("{p}.dataVolumeClaimTemplate");
            for problem in pvc_spec::problems(t, pvc_spec::Purpose::Scratch) {
                e.at(&tp, &problem.path, problem.message);
            }
        }
    }
}

/// Rules that span fields, checked on the policy each level resolves to. `levels` are
/// this level and the ones above it: the values it inherits come from there. `own` is
/// what this level itself sets: a rule on a combination is reported where it is made,
/// not again at every level that inherits it.
fn resolved(e: &mut Errors, levels: &[&str], own: &PolicyBlocks, r: &ResolvedPolicy) {
    let Some(path) = levels.last() else {
        return;
    };
    let unread = |field: &str| {
        levels
            .iter()
            .any(|l| e.unparsed.covers(&format!("{l}.{field}")))
    };
    if r.snapshot.cut_timeout > r.snapshot.max_hold
        && !unread("snapshot.cutTimeout")
        && !unread("snapshot.maxHold")
    {
        e.at(
            path,
            "snapshot.cutTimeout",
            format!(
                "resolves to {} which exceeds snapshot.maxHold {}: a cold cut must end inside the hold",
                r.snapshot.cut_timeout, r.snapshot.max_hold
            ),
        );
    }
    // Each schedule and its stagger, as this level resolves them (each may come from a
    // different level); reported at the level that sets either.
    let own_snapshot = own.snapshot.clone().unwrap_or_default();
    let own_drill = own.drill.clone().unwrap_or_default();
    let own_pitr = own.pitr.clone().unwrap_or_default();
    for (block, own_schedule, own_stagger, schedule, stagger) in [
        (
            "snapshot",
            own_snapshot.schedule.is_some(),
            own_snapshot.stagger.is_some(),
            &r.snapshot.schedule,
            r.snapshot.stagger,
        ),
        (
            "drill",
            own_drill.schedule.is_some(),
            own_drill.stagger.is_some(),
            &r.drill.schedule,
            r.drill.stagger,
        ),
        (
            "pitr",
            own_pitr.schedule.is_some(),
            own_pitr.stagger.is_some(),
            &r.pitr.schedule,
            r.pitr.stagger,
        ),
    ] {
        if (own_schedule || own_stagger)
            && !unread(&format!("{block}.schedule"))
            && !unread(&format!("{block}.stagger"))
            && crate::cron::Schedule::parse(schedule).is_ok()
            && let Err(why) =
                crate::schedule::Staggered::new(schedule, stagger.map(GoDuration::get))
        {
            let field = if own_stagger { "stagger" } else { "schedule" };
            e.at(path, &format!("{block}.{field}"), why.to_string());
        }
    }
    let own_restore = own.restore.clone().unwrap_or_default();
    if r.restore.max_snapshot_age >= r.restore.binlog_retention
        && !unread("restore.maxSnapshotAge")
        && !unread("restore.binlogRetention")
    {
        // Reported where the combination is made: the level that sets either field.
        let field = if own_restore.max_snapshot_age.is_some() {
            Some("restore.maxSnapshotAge")
        } else if own_restore.binlog_retention.is_some() {
            Some("restore.binlogRetention")
        } else {
            None
        };
        if let Some(field) = field {
            e.at(
                path,
                field,
                format!(
                    "maxSnapshotAge {} must be below binlogRetention {}: a replica restored from an older snapshot cannot catch up (its position is no longer in the primary's binlogs)",
                    r.restore.max_snapshot_age, r.restore.binlog_retention
                ),
            );
        }
    }
    // Every snapshot would be passed over: no drill ever vouches for one.
    if r.restore.require_drill
        && !r.drill.enabled
        && !unread("restore.requireDrill")
        && !unread("drill.enabled")
    {
        if own_restore.require_drill.is_some() {
            e.at(
                path,
                "restore.requireDrill",
                "true, but drill.enabled resolves to false here: no drill would run, so no snapshot would ever be offered (turn drills on, or requireDrill off)",
            );
        } else if own_drill.enabled.is_some() {
            e.at(
                path,
                "drill.enabled",
                "false, under an inherited restore.requireDrill: true: no snapshot would ever be offered (set requireDrill: false here too)",
            );
        }
    }
    let own_snapshot = own.snapshot.clone().unwrap_or_default();
    if r.snapshot.fsfreeze
        && r.snapshot.mode == Mode::Cold
        && !unread("snapshot.fsfreeze")
        && !unread("snapshot.mode")
    {
        if own_snapshot.fsfreeze.is_some() {
            e.at(
                path,
                "snapshot.fsfreeze",
                "is for online snapshots only, and this level resolves to mode cold (set mode: online, or leave fsfreeze out)",
            );
        } else if own_snapshot.mode.is_some() {
            e.at(
                path,
                "snapshot.mode",
                "cold, with fsfreeze: true inherited: fsfreeze is for online snapshots only (set fsfreeze: false here)",
            );
        }
    }
    if let Some(own_annotations) = &own_snapshot.annotations
        && !unread("snapshot.annotations")
    {
        let size = k8s_names::annotations_size(
            r.snapshot
                .annotations
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let limit = ANNOTATIONS_TOTAL_MAX - RESERVED_ANNOTATION_BYTES;
        if size > limit && !own_annotations.is_empty() {
            e.at(
                path,
                "snapshot.annotations",
                format!(
                    "resolve to {size} bytes, more than {limit}: the API allows {ANNOTATIONS_TOTAL_MAX} for all of an object's annotations, and vtsnap's own need the rest"
                ),
            );
        }
    }
}

/// Every rule on a config that parsed whole.
pub fn validate(c: &Config) -> Vec<ConfigError> {
    let mut found = Vec::new();
    // An empty file parses as a config without clusters: every program would do nothing.
    if c.clusters.is_empty() {
        found.push(ConfigError {
            path: "clusters".to_owned(),
            message: "lists no cluster (is the file empty?)".to_owned(),
        });
    }
    found.extend(validate_partial(c, &Unparsed::default()));
    found
}

/// Every rule on what parsed of a config, quiet on what did not.
pub fn validate_partial(c: &Config, unparsed: &Unparsed) -> Vec<ConfigError> {
    let mut e = Errors {
        found: Vec::new(),
        unparsed,
    };
    let mut seen = BTreeSet::new();
    for (i, cl) in c.clusters.iter().enumerate() {
        let path = format!("clusters[{i}]");
        let identity_unread = ["name", "namespace"]
            .iter()
            .any(|f| unparsed.covers(&format!("{path}.{f}")));
        if !is_dns_label(&cl.name) {
            e.at(
                &path,
                "name",
                "must be a lowercase DNS label (the VitessCluster name)",
            );
        }
        if !is_dns_label(&cl.namespace) {
            e.at(&path, "namespace", "must be a lowercase DNS label");
        }
        if !identity_unread && !seen.insert((cl.name.clone(), cl.namespace.clone())) {
            e.at(
                &path,
                "name",
                format!("cluster {}/{} is listed twice", cl.namespace, cl.name),
            );
        }
        if cl.vtctld != "auto" {
            let ok = cl
                .vtctld
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
            if !ok {
                e.at(&path, "vtctld", "must be `auto` or host:port");
            }
        }
        let cluster_blocks = cl.policy();
        block(&mut e, &path, &cluster_blocks);
        resolved(
            &mut e,
            &[&path],
            &cluster_blocks,
            &with_defaults(&cluster_blocks),
        );
        for (ks, k) in &cl.keyspaces {
            let kpath = format!("{path}.keyspaces.{ks}");
            if ks.is_empty() {
                e.at(&kpath, "", "keyspace name must not be empty");
            }
            let ks_blocks = merge(&k.policy(), &cluster_blocks);
            block(&mut e, &kpath, &k.policy());
            resolved(
                &mut e,
                &[&path, &kpath],
                &k.policy(),
                &with_defaults(&ks_blocks),
            );
            for (sh, s) in &k.shards {
                let spath = format!("{kpath}.shards.{sh}");
                match sh.parse::<KeyRange>() {
                    Err(m) => e.at(&spath, "", m),
                    Ok(k) => {
                        // Vitess reads each bound as bytes: an odd digit count does not
                        // decode (hex.DecodeString in go/vt/key/key.go ParseKeyRangeParts).
                        if let Some(b) = [&k.start, &k.end].into_iter().find(|b| b.len() % 2 == 1) {
                            e.at(
                                &spath,
                                "",
                                format!(
                                    "shard {sh:?}: bound {b:?} has an odd number of hex digits (each byte is two)"
                                ),
                            );
                        }
                    }
                }
                block(&mut e, &spath, &s.policy());
                resolved(
                    &mut e,
                    &[&path, &kpath, &spath],
                    &s.policy(),
                    &with_defaults(&merge(&s.policy(), &ks_blocks)),
                );
            }
        }
    }
    e.found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unparsed_path_covers_itself_and_what_is_below_it_only() {
        let u = Unparsed::new(vec!["clusters[0].snapshot".to_owned()]);
        for covered in [
            "clusters[0].snapshot",
            "clusters[0].snapshot.mode",
            "clusters[0].snapshot[1]",
        ] {
            assert!(u.covers(covered), "{covered}");
        }
        for not in [
            "clusters[0].snapshots",
            "clusters[0]",
            "clusters[1].snapshot",
            "",
        ] {
            assert!(!u.covers(not), "{not}");
        }
        assert!(!Unparsed::default().covers("clusters[0]"));
    }
}
