//! Checks a parsed config and reports every problem with its path.

use std::collections::BTreeSet;

use super::model::*;
use super::resolve::{ResolvedPolicy, merge, with_defaults};
use super::{ConfigError, GoDuration};
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

/// DNS-1123 label: what Kubernetes accepts for a namespace or a VitessCluster name.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn positive(e: &mut Errors, path: &str, field: &str, d: Option<GoDuration>) {
    if let Some(d) = d
        && d.get().is_zero()
    {
        e.at(path, field, "must be greater than 0");
    }
}

const RESERVED_LABEL_PREFIX: &str = "vtsnap.io/";

fn block(e: &mut Errors, path: &str, b: &PolicyBlocks) {
    if let Some(s) = &b.snapshot {
        let p = format!("{path}.snapshot");
        if s.volume_snapshot_class_name.as_deref() == Some("") {
            e.at(
                &p,
                "volumeSnapshotClassName",
                "must not be empty (leave it out for the default class)",
            );
        }
        positive(e, &p, "cutTimeout", s.cut_timeout);
        positive(e, &p, "readyTimeout", s.ready_timeout);
        positive(e, &p, "maxHold", s.max_hold);
        if let Some(t) = &s.target {
            positive(e, &format!("{p}.target"), "maxLag", t.max_lag);
        }
        for (field, map) in [("labels", &s.labels), ("annotations", &s.annotations)] {
            for k in map.iter().flatten().map(|(k, _)| k) {
                if k.starts_with(RESERVED_LABEL_PREFIX) || k == crate::labels::MANAGED_BY {
                    e.at(
                        &format!("{p}.{field}"),
                        k,
                        "is set by vtsnap itself and cannot be configured",
                    );
                }
            }
        }
    }
    if let Some(r) = &b.retention {
        let p = format!("{path}.retention");
        if let Some(n) = r.max_count
            && !(1..=i64::from(u32::MAX)).contains(&n)
        {
            e.at(&p, "maxCount", "must be ≥ 1");
        }
        positive(e, &p, "maxAge", r.max_age);
        positive(e, &p, "failedMaxAge", r.failed_max_age);
    }
    if let Some(r) = &b.restore {
        let p = format!("{path}.restore");
        positive(e, &p, "maxSnapshotAge", r.max_snapshot_age);
        for (i, pool) in r.pools.iter().flatten().enumerate() {
            if pool.is_empty() {
                e.at(&p, &format!("pools[{i}]"), "must not be empty");
            }
        }
    }
    if let Some(v) = &b.vtbackup {
        let p = format!("{path}.vtbackup");
        if v.use_empty_dir_for_initial_backup == Some(true)
            && v.data_volume_claim_template.is_some()
        {
            e.at(&p, "", "useEmptyDirForInitialBackup: true and dataVolumeClaimTemplate are mutually exclusive");
        }
        if let Some(t) = &v.data_volume_claim_template
            && !t.is_object()
        {
            e.at(
                &p,
                "dataVolumeClaimTemplate",
                "must be a PersistentVolumeClaim spec (a mapping)",
            );
        }
    }
}

/// Rules that span fields, checked on the policy each level resolves to. `levels` are
/// this level and the ones above it: the values it inherits come from there.
fn resolved(e: &mut Errors, levels: &[&str], r: &ResolvedPolicy) {
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
}

/// Every rule on a config that parsed whole.
pub fn validate(c: &Config) -> Vec<ConfigError> {
    validate_partial(c, &Unparsed::default())
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
        resolved(&mut e, &[&path], &with_defaults(&cluster_blocks));
        for (ks, k) in &cl.keyspaces {
            let kpath = format!("{path}.keyspaces.{ks}");
            if ks.is_empty() {
                e.at(&kpath, "", "keyspace name must not be empty");
            }
            let ks_blocks = merge(&k.policy(), &cluster_blocks);
            block(&mut e, &kpath, &k.policy());
            resolved(&mut e, &[&path, &kpath], &with_defaults(&ks_blocks));
            for (sh, s) in &k.shards {
                let spath = format!("{kpath}.shards.{sh}");
                if let Err(m) = sh.parse::<KeyRange>() {
                    e.at(&spath, "", m);
                }
                block(&mut e, &spath, &s.policy());
                resolved(
                    &mut e,
                    &[&path, &kpath, &spath],
                    &with_defaults(&merge(&s.policy(), &ks_blocks)),
                );
            }
        }
    }
    e.found
}
