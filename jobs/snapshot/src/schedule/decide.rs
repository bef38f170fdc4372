//! The schedule reconciler's decision, pure (docs/design.md §5.8): from the configured
//! clusters' shards, the chart's rendered CronJob templates (snapshot; drill and binlog
//! archive when the chart has them on) and the CronJobs that exist, one decision per
//! CronJob — create, update, keep or delete — each with its reason.
//!
//! Safety rules, each checked here and tested without a client:
//! - only CronJobs it made are changed (its label and an ownerReference to the template);
//! - a CronJob is deleted only when its shard is gone from the VitessCluster's spec (read)
//!   and from vtctld (asked, and it said "no such shard"), and no Job of it runs;
//! - a read that failed or a record that cannot be read changes nothing it covers;
//! - a drill CronJob is deleted when drills are off (the chart's, or the shard's
//!   `drill.enabled: false`), never while one of its Jobs runs; an archive CronJob the
//!   same when the archive is off (the chart's, or the shard's `pitr.enabled: false`);
//! - a shard's CronJob is the one of ours whose record names it (under whatever name), so
//!   a change of the name rule never makes a second; a second one found is kept and
//!   reported, never deleted; two shards that would get one name get none.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Value, json};
use vtsnap_core::config::{Config, Mode, ResolvedPolicy, resolve_in};
use vtsnap_core::duration::GoDuration;
use vtsnap_core::naming::KeyRange;
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::schedule::{Staggered, assign};
use vtsnap_core::shard::{KeyspaceShard, ShardRef};

use super::names::{self, Kind, NameForm};
pub use super::names::{KindTemplate, Override, Template};

/// What vtctld said of a shard no longer in the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InVtctld {
    Present,
    /// vtctld answered that the shard does not exist.
    Absent,
    /// Not asked, or no clear answer.
    Unknown(String),
}

/// One configured cluster: the shards its VitessCluster's spec has, or why they are not
/// known.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSeen {
    pub namespace: String,
    pub cluster: String,
    pub shards: Result<BTreeSet<KeyspaceShard>, String>,
}

/// A CronJob as read.
#[derive(Debug, Clone, PartialEq)]
pub struct CronSeen {
    pub name: String,
    pub resource_version: String,
    pub uid: String,
    /// Its label and an ownerReference to the template: made by this reconciler.
    pub ours: bool,
    /// What it runs (its annotation; a bad one makes `shard` an error).
    pub kind: Kind,
    /// The shard it snapshots, from its annotation (ours only), or why it cannot be read.
    pub shard: Result<ShardRef, String>,
    pub offset: Option<u32>,
    pub spec_hash: Option<String>,
    /// Jobs of it that have not finished.
    pub active_jobs: usize,
    /// For ours whose shard is not in the spec: what vtctld said.
    pub vtctld: InVtctld,
}

/// Everything the decision reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub template: Result<Template, String>,
    pub clusters: Vec<ClusterSeen>,
    pub cronjobs: Vec<CronSeen>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Keep,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Reason {
    /// A shard of the spec without a CronJob.
    NewShard,
    /// Its policy, the template or its stagger changed.
    Changed,
    UpToDate,
    /// Gone from the spec and from vtctld, no Job running.
    ShardGone,
    /// Gone from the spec, but vtctld still has it (a reshard not yet cleaned up).
    StillInVtctld,
    /// Gone from the spec; vtctld could not say.
    VtctldUnknown,
    /// One of its Jobs runs.
    JobRunning,
    /// Its cluster's VitessCluster could not be read.
    SpecUnread,
    /// Its cluster is not in the config any more.
    ClusterNotConfigured,
    /// The name is held by a CronJob this reconciler did not make.
    NotOurs,
    /// The shard's schedule or stagger cannot be used.
    BadPolicy,
    /// Ours, but its shard annotation cannot be read.
    UnreadableRecord,
    /// The name is held by a CronJob of ours whose record names another shard or kind.
    NameTaken,
    /// Two shards of the spec would get this one name: neither is made.
    NameCollision,
    /// Ours, and its shard is in the spec, but another CronJob of ours is that shard's:
    /// kept (both run; the fence lets one snapshot at a time) for a person to remove.
    Duplicate,
    /// A drill CronJob while drills are off (the chart's, or the shard's policy).
    DrillsOff,
    /// An archive CronJob while the binlog archive is off (the chart's, or the shard's
    /// `pitr.enabled`).
    PitrOff,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub name: String,
    /// `namespace/cluster/keyspace/shard`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    pub action: Action,
    pub reason: Reason,
    /// Details: the schedule chosen, what vtctld said, the error.
    pub message: String,
    /// Create and update: the object to write.
    #[serde(skip)]
    pub desired: Option<Value>,
    /// Update and delete: the version read (a precondition of the write).
    #[serde(skip)]
    pub resource_version: Option<String>,
    #[serde(skip)]
    pub uid: Option<String>,
}

/// The plan, and the reads that failed (the run exits 1 when there are any).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Plan {
    pub decisions: Vec<Decision>,
    pub problems: Vec<String>,
}

impl Plan {
    pub fn count(&self, a: Action) -> usize {
        self.decisions.iter().filter(|d| d.action == a).count()
    }
}

fn decision(
    name: &str,
    shard: Option<&ShardRef>,
    action: Action,
    reason: Reason,
    message: impl Into<String>,
) -> Decision {
    Decision {
        name: name.to_owned(),
        shard: shard.map(ToString::to_string),
        action,
        reason,
        message: message.into(),
        desired: None,
        resource_version: None,
        uid: None,
    }
}

/// A kind that can be turned off: the reason its CronJobs are deleted then, and what the
/// messages call the chart's switch and the shard's.
struct Switch {
    reason: Reason,
    chart_off: &'static str,
    field: &'static str,
}

/// `None` for snapshots, which are always on.
fn switch(kind: Kind) -> Option<Switch> {
    match kind {
        Kind::Snapshot => None,
        Kind::Drill => Some(Switch {
            reason: Reason::DrillsOff,
            chart_off: "the chart's drills are off",
            field: "drill.enabled",
        }),
        Kind::Archive => Some(Switch {
            reason: Reason::PitrOff,
            chart_off: "the chart's binlog archive is off",
            field: "pitr.enabled",
        }),
    }
}

/// The shard's (schedule, stagger, suspension) for a CronJob of `kind`, or `None` when
/// its policy has the kind off.
fn timing(kind: Kind, p: &ResolvedPolicy) -> Option<(String, Option<GoDuration>, bool)> {
    match kind {
        Kind::Snapshot => Some((
            p.snapshot.schedule.clone(),
            p.snapshot.stagger,
            p.snapshot.suspend,
        )),
        Kind::Drill => p
            .drill
            .enabled
            .then(|| (p.drill.schedule.clone(), p.drill.stagger, p.drill.suspend)),
        Kind::Archive => p
            .pitr
            .enabled
            .then(|| (p.pitr.schedule.clone(), p.pitr.stagger, p.pitr.suspend)),
    }
}

/// What one shard's CronJob should be (before its offset is known).
struct Want<'a> {
    kind: Kind,
    key: ShardRef,
    /// Its CronJob's name: the adopted one's, else the name rule's.
    name: String,
    /// The CronJob of ours whose record names this shard and kind, if there is one.
    cron: Option<&'a CronSeen>,
    staggered: Staggered,
    schedule_text: String,
    suspend: bool,
    mode: Option<Mode>,
    /// Whether its cluster's name is in more than one namespace (the name rule's and the
    /// Job's `--cluster-namespace`).
    form: NameForm,
}

/// The whole decision.
pub fn plan(config: &Config, seen: &Observed) -> Plan {
    let mut out = Plan::default();
    let template = match &seen.template {
        Ok(t) => t,
        Err(e) => {
            out.problems
                .push(format!("template: {e}: no CronJob is changed"));
            return out;
        }
    };
    let mut wants: Vec<Want<'_>> = Vec::new();
    // Clusters whose shards are known: (namespace, cluster) → spec shards.
    let mut known: BTreeMap<ObjectKey, &BTreeSet<KeyspaceShard>> = BTreeMap::new();
    let mut unread: BTreeSet<ObjectKey> = BTreeSet::new();
    for c in &seen.clusters {
        let id = ObjectKey::new(&c.namespace, &c.cluster);
        let shards = match &c.shards {
            Ok(s) => s,
            Err(e) => {
                out.problems.push(format!(
                    "VitessCluster {}/{}: {e}: its CronJobs are kept as they are",
                    c.namespace, c.cluster
                ));
                unread.insert(id);
                continue;
            }
        };
        known.insert(id.clone(), shards);
        let Some(cl) = config.cluster_in(&c.namespace, &c.cluster) else {
            continue;
        };
        for in_cluster in shards {
            let key = ShardRef::new(&id, in_cluster.clone());
            let (keyspace, shard) = (&key.keyspace, key.shard.to_string());
            let resolved = resolve_in(cl, keyspace, &shard);
            for kind in Kind::ALL {
                let Some(kt) = template.of_kind(kind) else {
                    continue;
                };
                // A drill or an archive the shard has off is not wanted.
                let Some((schedule, stagger, suspend)) = timing(kind, &resolved) else {
                    continue;
                };
                let form = name_form(config, &key);
                let name = names::cronjob_name(&template.fullname, kind, &key, form);
                let over = kt.overrides.iter().find(|o| {
                    o.cluster == c.cluster
                        && o.keyspace == *keyspace
                        && same_shard(&o.shard, &key.shard)
                });
                // A chart override's schedule is the shard's own line: run as written.
                let (schedule_text, stagger) = match over.and_then(|o| o.schedule.clone()) {
                    Some(s) if !s.is_empty() => (s, Some(std::time::Duration::ZERO)),
                    _ => (schedule, stagger.map(|d| d.get())),
                };
                let suspend = over.and_then(|o| o.suspend).unwrap_or(suspend);
                let mode = over.and_then(|o| o.mode);
                match Staggered::new(&schedule_text, stagger) {
                    Ok(staggered) => wants.push(Want {
                        kind,
                        key: key.clone(),
                        name,
                        cron: None,
                        staggered,
                        schedule_text,
                        suspend,
                        mode,
                        form,
                    }),
                    Err(e) => {
                        out.problems.push(format!("{key}: {e}"));
                        out.decisions.push(decision(
                            &name,
                            Some(&key),
                            Action::Keep,
                            Reason::BadPolicy,
                            format!("schedule {schedule_text:?}: {e}"),
                        ));
                    }
                }
            }
        }
    }
    let by_name: BTreeMap<&str, &CronSeen> =
        seen.cronjobs.iter().map(|c| (c.name.as_str(), c)).collect();
    let records = records(&seen.cronjobs);
    adopt(&mut wants, &records);
    let collisions = collisions(&wants);
    // Offsets: per kind, cluster and schedule, those recorded kept, new ones spread.
    let mut groups: BTreeMap<(Kind, String, String, String, u32), Vec<usize>> = BTreeMap::new();
    for (i, w) in wants.iter().enumerate() {
        groups
            .entry((
                w.kind,
                w.key.namespace.clone(),
                w.key.cluster.clone(),
                w.schedule_text.clone(),
                w.staggered.window(),
            ))
            .or_default()
            .push(i);
    }
    let mut offsets = vec![0u32; wants.len()];
    for ((_, _, _, _, window), members) in &groups {
        let list: Vec<(String, Option<u32>)> = members
            .iter()
            .map(|&i| {
                (
                    wants[i].key.to_string(),
                    wants[i].cron.and_then(|c| c.offset),
                )
            })
            .collect();
        for (&i, o) in members.iter().zip(assign(*window, &list)) {
            offsets[i] = o;
        }
    }
    let mut wanted_names: BTreeSet<&str> = BTreeSet::new();
    for (w, offset) in wants.iter().zip(offsets) {
        wanted_names.insert(w.name.as_str());
        let schedule = w.staggered.at(offset);
        let Some(desired) = names::desired(
            template,
            names::Run {
                kind: w.kind,
                key: &w.key,
                name: &w.name,
                schedule: &schedule,
                suspend: w.suspend,
                offset,
                mode: w.mode,
                form: w.form,
            },
        ) else {
            continue;
        };
        let hash = names::spec_hash(&desired);
        let what = format!(
            "schedule {schedule:?} ({} moved {offset} min){}",
            w.schedule_text,
            if w.suspend { ", suspended" } else { "" }
        );
        let d = match (w.cron, by_name.get(w.name.as_str())) {
            (Some(c), _) if c.spec_hash.as_deref() == Some(hash.as_str()) => {
                decision(&w.name, Some(&w.key), Action::Keep, Reason::UpToDate, what)
            }
            (Some(c), _) => Decision {
                desired: Some(names::with_hash(desired, &hash)),
                resource_version: Some(c.resource_version.clone()),
                uid: Some(c.uid.clone()),
                ..decision(&w.name, Some(&w.key), Action::Update, Reason::Changed, what)
            },
            (None, None) if collisions.contains(w.name.as_str()) => {
                let others: Vec<String> = wants
                    .iter()
                    .filter(|o| o.cron.is_none() && o.name == w.name && o.key != w.key)
                    .map(|o| o.key.to_string())
                    .collect();
                let message = format!(
                    "the name is also {}'s: neither is made (rename one, or name the namespace's cluster apart)",
                    others.join(", ")
                );
                out.problems
                    .push(format!("{}: {} {message}", w.key, w.name));
                decision(
                    &w.name,
                    Some(&w.key),
                    Action::Keep,
                    Reason::NameCollision,
                    message,
                )
            }
            (None, None) => Decision {
                desired: Some(names::with_hash(desired, &hash)),
                ..decision(
                    &w.name,
                    Some(&w.key),
                    Action::Create,
                    Reason::NewShard,
                    what,
                )
            },
            (None, Some(c)) if !c.ours => decision(
                &w.name,
                Some(&w.key),
                Action::Keep,
                Reason::NotOurs,
                "a CronJob of this name was not made by the reconciler (a person's, or the chart's): left alone",
            ),
            (None, Some(c)) => match &c.shard {
                Err(e) => decision(
                    &w.name,
                    Some(&w.key),
                    Action::Keep,
                    Reason::UnreadableRecord,
                    format!("{e}: left alone"),
                ),
                Ok(other) => {
                    let message = format!(
                        "its record says {} {other}, not this shard's {}: left alone, and this shard has none",
                        c.kind.container(),
                        w.kind.container()
                    );
                    out.problems
                        .push(format!("{}: {} {message}", w.key, w.name));
                    decision(
                        &w.name,
                        Some(&w.key),
                        Action::Keep,
                        Reason::NameTaken,
                        message,
                    )
                }
            },
        };
        out.decisions.push(d);
    }
    // CronJobs of ours that no shard of the spec wants.
    let bad_policy: BTreeSet<String> = out
        .decisions
        .iter()
        .filter(|d| d.reason == Reason::BadPolicy)
        .map(|d| d.name.clone())
        .collect();
    // A name another shard's CronJob has taken stays taken only while that CronJob would
    // be kept on its own: once its shard is gone (under the gate), or it is a drill of
    // drills turned off, it is deleted, and the shard that wanted the name gets it at the
    // next run.
    for d in out
        .decisions
        .iter_mut()
        .filter(|d| d.reason == Reason::NameTaken)
    {
        if let Some(c) = by_name.get(d.name.as_str()) {
            let own = unwanted(
                config,
                c,
                &known,
                &unread,
                (&records, &wanted_names),
                template,
            );
            // Deleted under the gate (its shard gone), or as a drill of drills turned off:
            // whatever would delete it unshielded by the name deletes it.
            if own.action == Action::Delete {
                *d = own;
            }
        }
    }
    for c in seen.cronjobs.iter().filter(|c| c.ours) {
        if wanted_names.contains(c.name.as_str()) || bad_policy.contains(&c.name) {
            continue;
        }
        out.decisions.push(unwanted(
            config,
            c,
            &known,
            &unread,
            (&records, &wanted_names),
            template,
        ));
    }
    out.decisions.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// `-`, `x-x` and `-80`/`x-80` name the same shard.
fn same_shard(written: &str, shard: &KeyRange) -> bool {
    KeyRange::from_safe_name(written).map_or_else(|_| written.to_owned(), |k| k.to_string())
        == shard.to_string()
}

/// A cluster name configured in more than one namespace puts the namespace in its shards'
/// CronJob names: the short names would be one name (docs/design.md §5.8).
fn name_form(config: &Config, key: &ShardRef) -> NameForm {
    let namespaces: BTreeSet<&str> = config
        .clusters
        .iter()
        .filter(|c| c.name == key.cluster)
        .map(|c| c.namespace.as_str())
        .collect();
    if namespaces.len() > 1 {
        NameForm::WithNamespace
    } else {
        NameForm::Short
    }
}

/// The CronJobs of ours by what their record names (kind and shard), each list sorted by
/// name.
type Records<'a> = BTreeMap<(Kind, &'a ShardRef), Vec<&'a CronSeen>>;

fn records(cronjobs: &[CronSeen]) -> Records<'_> {
    let mut out: Records<'_> = BTreeMap::new();
    for c in cronjobs.iter().filter(|c| c.ours) {
        if let Ok(key) = &c.shard {
            out.entry((c.kind, key)).or_default().push(c);
        }
    }
    for list in out.values_mut() {
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out
}

/// Each shard's CronJob is the one of ours whose record names it: the one under the name
/// rule's name if that is one of them, else the first by name. A CronJob made under an
/// older name rule stays the shard's, so a change of the rule makes no second one.
fn adopt<'a>(wants: &mut [Want<'a>], records: &Records<'a>) {
    for w in wants.iter_mut() {
        let Some(list) = records.get(&(w.kind, &w.key)) else {
            continue;
        };
        let chosen = list
            .iter()
            .find(|c| c.name == w.name)
            .or_else(|| list.first());
        if let Some(c) = chosen {
            w.name.clone_from(&c.name);
            w.cron = Some(c);
        }
    }
}

/// Names the name rule gives to more than one shard that has no CronJob yet.
fn collisions(wants: &[Want<'_>]) -> BTreeSet<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for w in wants.iter().filter(|w| w.cron.is_none()) {
        *count.entry(w.name.as_str()).or_default() += 1;
    }
    count
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// The decision on a CronJob of ours that no shard of the spec wants.
fn unwanted(
    config: &Config,
    c: &CronSeen,
    known: &BTreeMap<ObjectKey, &BTreeSet<KeyspaceShard>>,
    unread: &BTreeSet<ObjectKey>,
    (records, wanted_names): (&Records<'_>, &BTreeSet<&str>),
    template: &Template,
) -> Decision {
    let keep = |key: Option<&ShardRef>, reason, message: String| {
        decision(&c.name, key, Action::Keep, reason, message)
    };
    let key = match &c.shard {
        Ok(k) => k,
        Err(e) => return keep(None, Reason::UnreadableRecord, format!("{e}: left alone")),
    };
    if c.active_jobs > 0 {
        return keep(
            Some(key),
            Reason::JobRunning,
            format!("{} Job(s) of it still run", c.active_jobs),
        );
    }
    let kind_off = |reason: Reason, message: &str| Decision {
        resource_version: Some(c.resource_version.clone()),
        uid: Some(c.uid.clone()),
        ..decision(&c.name, Some(key), Action::Delete, reason, message)
    };
    let off = switch(c.kind);
    if let Some(s) = &off
        && template.of_kind(c.kind).is_none()
    {
        return kind_off(s.reason, &format!("{}, no Job running", s.chart_off));
    }
    let id = key.cluster_key();
    if unread.contains(&id) {
        return keep(
            Some(key),
            Reason::SpecUnread,
            "its VitessCluster could not be read".into(),
        );
    }
    if config.cluster_in(&key.namespace, &key.cluster).is_none() {
        return keep(
            Some(key),
            Reason::ClusterNotConfigured,
            "its cluster is not in the config: delete it by hand if that is meant".into(),
        );
    }
    let Some(spec) = known.get(&id) else {
        return keep(
            Some(key),
            Reason::SpecUnread,
            "its VitessCluster was not read".into(),
        );
    };
    let in_spec = spec.contains(&key.keyspace_shard());
    if in_spec {
        let resolved = config
            .cluster_in(&key.namespace, &key.cluster)
            .map(|cl| resolve_in(cl, &key.keyspace, &key.shard.to_string()));
        if let (Some(s), Some(r)) = (&off, resolved)
            && timing(c.kind, &r).is_none()
        {
            return kind_off(
                s.reason,
                &format!("{} is false for this shard, no Job running", s.field),
            );
        }
        // Another CronJob of ours is this shard's (adopted first by name): this one is a
        // second. Deleting either is not under the gate (docs/design.md §5.8): kept.
        if let Some(first) = records
            .get(&(c.kind, key))
            .and_then(|list| list.iter().find(|o| wanted_names.contains(o.name.as_str())))
        {
            return keep(
                Some(key),
                Reason::Duplicate,
                format!(
                    "{} is this shard's {} CronJob too; both run: delete one by hand",
                    first.name,
                    c.kind.container()
                ),
            );
        }
        return keep(
            Some(key),
            Reason::BadPolicy,
            "its shard's policy cannot be used".into(),
        );
    }
    match &c.vtctld {
        InVtctld::Present => keep(
            Some(key),
            Reason::StillInVtctld,
            "gone from the spec, but vtctld still has the shard".into(),
        ),
        InVtctld::Unknown(why) => keep(
            Some(key),
            Reason::VtctldUnknown,
            format!("gone from the spec; vtctld could not say: {why}"),
        ),
        InVtctld::Absent => Decision {
            resource_version: Some(c.resource_version.clone()),
            uid: Some(c.uid.clone()),
            ..decision(
                &c.name,
                Some(key),
                Action::Delete,
                Reason::ShardGone,
                "gone from the spec and from vtctld, no Job running",
            )
        },
    }
}

/// A JSON form of the plan for `--output json`.
pub fn to_json(plan: &Plan) -> Value {
    json!({
        "created": plan.count(Action::Create),
        "updated": plan.count(Action::Update),
        "kept": plan.count(Action::Keep),
        "deleted": plan.count(Action::Delete),
        "decisions": plan.decisions,
        "problems": plan.problems,
    })
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
