//! `kubectl vtsnap doctor`'s checks, pure: what was read ([`World`]) → one line per check,
//! `pass`, `warn` or `fail`, with the fix in one line. A read that failed is never taken
//! as a pass: its check says what could not be read.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::SignedDuration;
use vtsnap_core::config::{Lifecycle, resolve_in};

use super::storage;
pub use super::world::{
    Access, Check, Install, Level, NotRead, Read, ShardMysql, WebhookSeen, World,
};

/// The CRDs vtsnap needs (external-snapshotter's).
pub const SNAPSHOT_CRDS: [&str; 3] = [
    "volumesnapshots.snapshot.storage.k8s.io",
    "volumesnapshotclasses.snapshot.storage.k8s.io",
    "volumesnapshotcontents.snapshot.storage.k8s.io",
];

/// A vtsnap snapshot this old without any status means no snapshot-controller acted on it.
const UNHANDLED_AFTER: SignedDuration = SignedDuration::from_mins(5);
/// A webhook certificate that expires sooner is warned about.
const CERT_WARN_BEFORE: SignedDuration = SignedDuration::from_hours(30 * 24);
const PSA_ENFORCE: &str = "pod-security.kubernetes.io/enforce";

/// Every check, in a fixed order.
pub fn checks(w: &World) -> Vec<Check> {
    let mut out = vec![install(w), config(w), crds(w), snapshot_controller(w)];
    out.extend(storage::snapshot_classes(w));
    out.extend(storage::binding_mode(w));
    out.extend(storage::topology(w));
    out.extend(rbac(&w.access));
    out.push(webhook(w));
    out.extend(webhook_cert(w));
    out.push(pod_security(w));
    out.push(node_helpers(w));
    out.push(super::schedules::schedules(w));
    out.push(binlog_expiry(&w.mysql));
    out.push(crash_safety(&w.mysql));
    out.push(deletion_policy(w));
    out
}

fn hours(d: Duration) -> String {
    format!("{:.1}h", d.as_secs_f64() / 3600.0)
}

/// A shard's binlogs must outlive `restore.maxSnapshotAge`: a snapshot the webhook may
/// still offer has to be able to catch up.
fn binlog_expiry(shards: &[ShardMysql]) -> Check {
    const ID: &str = "binlog-expiry";
    if shards.is_empty() {
        return Check::pass(ID, "no shard with tablets yet");
    }
    let short: Vec<String> = shards
        .iter()
        .filter_map(|s| match &s.expiry {
            Ok(Some(e)) if !e.is_zero() && *e <= s.max_snapshot_age => Some(format!(
                "{} keeps binlogs {} (restore.maxSnapshotAge {})",
                s.shard,
                hours(*e),
                hours(s.max_snapshot_age)
            )),
            _ => None,
        })
        .collect();
    let unknown: Vec<String> = shards
        .iter()
        .filter_map(|s| match &s.expiry {
            Err(e) => Some(format!("{}: {e}", s.shard)),
            Ok(None) => Some(format!("{}: the primary did not say", s.shard)),
            Ok(Some(_)) => None,
        })
        .collect();
    if !short.is_empty() {
        Check::fail(
            ID,
            format!(
                "{}: a snapshot older than that cannot catch up",
                short.join("; ")
            ),
            "raise binlog_expire_logs_seconds (MariaDB: expire_logs_days) above restore.maxSnapshotAge, or lower restore.maxSnapshotAge",
        )
    } else if !unknown.is_empty() {
        Check::warn(
            ID,
            format!(
                "not checked for {} shard(s), e.g. {}",
                unknown.len(),
                unknown[0]
            ),
            "run doctor where vtctld is reachable (in the cluster, or config vtctld through a port-forward)",
        )
    } else {
        Check::pass(
            ID,
            format!(
                "{} shard(s): binlogs outlive restore.maxSnapshotAge",
                shards.len()
            ),
        )
    }
}

/// `mode: online` needs every tablet crash-safe (the snapshot job refuses otherwise).
fn crash_safety(shards: &[ShardMysql]) -> Check {
    const ID: &str = "crash-safety";
    let online: Vec<&ShardMysql> = shards.iter().filter(|s| s.online).collect();
    if online.is_empty() {
        return Check::pass(ID, "no shard takes online snapshots");
    }
    let mut unsafe_tablets = Vec::new();
    let mut unknown = Vec::new();
    for s in &online {
        match &s.crash_safety {
            Ok(tablets) => unsafe_tablets.extend(
                tablets
                    .iter()
                    .filter(|(_, v)| !v.is_empty())
                    .map(|(alias, v)| format!("{} {alias}: {}", s.shard, v.join(", "))),
            ),
            Err(e) => unknown.push(format!("{}: {e}", s.shard)),
        }
    }
    if !unsafe_tablets.is_empty() {
        Check::fail(
            ID,
            format!(
                "mode: online on tablets that are not crash-safe: {} (their online snapshots are refused)",
                unsafe_tablets.join("; ")
            ),
            "set sync_binlog=1 and innodb_flush_log_at_trx_commit=1 in the tablets' my.cnf, or use mode: cold",
        )
    } else if !unknown.is_empty() {
        Check::warn(
            ID,
            format!(
                "not checked for {} shard(s), e.g. {}",
                unknown.len(),
                unknown[0]
            ),
            "run doctor where vtctld is reachable",
        )
    } else {
        Check::pass(
            ID,
            format!("{} online shard(s): every tablet crash-safe", online.len()),
        )
    }
}

/// Whether any check failed (the exit code is 1 then).
pub fn any_failed(checks: &[Check]) -> bool {
    checks.iter().any(|c| c.level == Level::Fail)
}

fn install(w: &World) -> Check {
    match &w.install {
        Some(i) => Check::pass(
            "install",
            format!("release {} in namespace {}", i.fullname, i.namespace),
        ),
        None => Check::fail(
            "install",
            "no vtsnap install found: no ConfigMap labelled app.kubernetes.io/name=vtsnap named <release>-config",
            "install the chart (helm install vtsnap charts/vtsnap -n <namespace>) or pass -n with its namespace",
        ),
    }
}

fn config(w: &World) -> Check {
    match &w.config {
        Ok(c) => Check::pass(
            "config",
            format!("valid; {} cluster(s) configured", c.clusters.len()),
        ),
        Err(e) => Check::fail(
            "config",
            format!("the install's config is not valid: {e}"),
            "fix config: in the chart's values and helm upgrade (vtsnap-snapshot validate --config checks a file)",
        ),
    }
}

fn crds(w: &World) -> Check {
    let present = match &w.crds {
        Ok(p) => p,
        Err(e) => {
            return Check::warn(
                "snapshot-crds",
                format!("cannot list CustomResourceDefinitions: {e}"),
                "run doctor as a user who may list customresourcedefinitions",
            );
        }
    };
    let missing: Vec<&str> = SNAPSHOT_CRDS
        .iter()
        .copied()
        .filter(|c| !present.contains(*c))
        .collect();
    if missing.is_empty() {
        Check::pass("snapshot-crds", "the VolumeSnapshot CRDs are installed")
    } else {
        Check::fail(
            "snapshot-crds",
            format!("missing: {}", missing.join(", ")),
            "install the external-snapshotter CRDs and snapshot-controller (kubernetes-csi/external-snapshotter)",
        )
    }
}

fn snapshot_controller(w: &World) -> Check {
    let snaps = match &w.snapshots {
        Ok(s) => s,
        Err(e) => {
            return Check::warn(
                "snapshot-controller",
                format!("cannot list vtsnap's VolumeSnapshots: {e}"),
                "run doctor as a user who may list volumesnapshots",
            );
        }
    };
    let unhandled: Vec<&str> = snaps
        .iter()
        .filter(|v| !v.has_status)
        .filter(|v| {
            v.created
                .is_some_and(|t| w.now.duration_since(t) > UNHANDLED_AFTER)
        })
        .map(|v| v.name.as_str())
        .collect();
    match (snaps.len(), unhandled.len()) {
        (0, _) => Check::warn(
            "snapshot-controller",
            "no vtsnap snapshot yet: cannot tell whether a snapshot-controller runs",
            "take one: kubectl vtsnap backup CLUSTER/KEYSPACE/SHARD --wait",
        ),
        (_, 0) => Check::pass(
            "snapshot-controller",
            "every vtsnap snapshot older than 5 minutes has a status",
        ),
        (_, n) => Check::fail(
            "snapshot-controller",
            format!(
                "{n} vtsnap snapshot(s) older than 5 minutes have no status, e.g. {}: no snapshot-controller handles them",
                unhandled[0]
            ),
            "deploy the snapshot-controller (kubernetes-csi/external-snapshotter) and the CSI driver's csi-snapshotter sidecar",
        ),
    }
}

/// One line per program: every verb of the chart's list is granted, or which are not.
fn rbac(access: &[Access]) -> Vec<Check> {
    const ID: &str = "rbac";
    let mut by_program: BTreeMap<&str, Vec<&Access>> = BTreeMap::new();
    for a in access {
        by_program.entry(a.program.as_str()).or_default().push(a);
    }
    if by_program.is_empty() {
        return vec![Check::warn(
            ID,
            "not checked: no install or no configured namespace",
            "fix what the lines above say",
        )];
    }
    by_program
        .into_iter()
        .map(|(program, answers)| {
            let scope = |a: &Access| {
                a.namespace
                    .as_deref()
                    .map_or_else(|| "cluster-wide".to_owned(), |n| format!("in {n}"))
            };
            let what = |a: &Access| {
                let group = if a.group.is_empty() { "core" } else { &a.group };
                format!("{} {}/{} {}", a.verb, group, a.resource, scope(a))
            };
            let denied: Vec<String> = answers
                .iter()
                .filter(|a| a.allowed == Ok(false))
                .map(|a| what(a))
                .collect();
            let unknown: Vec<String> = answers
                .iter()
                .filter_map(|a| a.allowed.as_ref().err().map(|e| format!("{}: {e}", what(a))))
                .collect();
            if !denied.is_empty() {
                let watch = denied.iter().any(|d| d.starts_with("watch "));
                let effect = if watch {
                    " (without watch the program falls back to polling: longer fence windows)"
                } else {
                    ""
                };
                Check::fail(
                    ID,
                    format!("{program} may not {}{effect}", denied.join("; ")),
                    "helm upgrade the chart (its Roles grant each verb the code uses) and do not edit its Roles",
                )
            } else if !unknown.is_empty() {
                Check::warn(
                    ID,
                    format!("{program}: could not ask the authorizer: {}", unknown[0]),
                    "run doctor as a user who may create subjectaccessreviews",
                )
            } else {
                Check::pass(
                    ID,
                    format!("{program}: all {} request(s) its code makes are granted", answers.len()),
                )
            }
        })
        .collect()
}

fn webhook(w: &World) -> Check {
    const ID: &str = "webhook";
    // Restores on at the cluster's level or any keyspace's.
    let restore_on = w.config.as_ref().is_ok_and(|c| {
        c.clusters.iter().any(|cl| {
            std::iter::once("")
                .chain(cl.keyspaces.keys().map(String::as_str))
                .any(|ks| resolve_in(cl, ks, "").restore.enabled)
        })
    });
    let seen = match &w.webhook {
        Ok(s) => s,
        Err(e) => {
            return Check::warn(
                ID,
                format!("cannot read the webhook configuration: {e}"),
                "run doctor as a user who may list mutatingwebhookconfigurations",
            );
        }
    };
    let WebhookSeen::Installed {
        name,
        failure_policy,
        service,
        ready_endpoints,
        ..
    } = seen
    else {
        return if restore_on {
            Check::warn(
                ID,
                "the admission webhook is not installed: no new tablet is restored from a snapshot",
                "set admission.enabled=true in the chart's values if restores are wanted",
            )
        } else {
            Check::pass(ID, "the admission webhook is not installed (restores off)")
        };
    };
    match ready_endpoints {
        Ok(0) => {
            let silent = if failure_policy == "Ignore" {
                " and failurePolicy is Ignore: restores silently never happen"
            } else {
                ": every tablet Pod and PVC creation is refused"
            };
            return Check::fail(
                ID,
                format!("{name}: Service {service} has no ready endpoint{silent}"),
                "check the vtsnap-admission Deployment's Pods (kubectl -n <ns> get pods -l app.kubernetes.io/component=admission)",
            );
        }
        Err(e) => {
            return Check::warn(
                ID,
                format!("{name}: cannot read the endpoints of {service}: {e}"),
                "run doctor as a user who may list endpointslices",
            );
        }
        Ok(_) => {}
    }
    Check::pass(ID, format!("{name}: {service} has ready endpoints"))
}

/// The webhook's serving certificate, apart from its endpoints: a webhook with no Pods
/// today still needs a valid certificate when they come back.
fn webhook_cert(w: &World) -> Option<Check> {
    const ID: &str = "webhook-cert";
    let Ok(WebhookSeen::Installed {
        name,
        cert_not_after,
        ..
    }) = &w.webhook
    else {
        return None;
    };
    let renew = "renew the webhook certificate (helm upgrade regenerates the chart's own)";
    Some(match cert_not_after {
        Ok(t) if *t <= w.now => Check::fail(
            ID,
            format!("{name}: the serving certificate expired at {t}"),
            renew,
        ),
        Ok(t) if t.duration_since(w.now) < CERT_WARN_BEFORE => Check::warn(
            ID,
            format!("{name}: the serving certificate expires at {t}, within 30 days"),
            renew,
        ),
        Ok(t) => Check::pass(ID, format!("{name}: certificate valid until {t}")),
        Err(e) => Check::warn(
            ID,
            format!("{name}: cannot read the serving certificate: {e}"),
            "check the webhook's caBundle and the Secret it was made from",
        ),
    })
}

/// The node helper is privileged: a namespace that enforces `baseline` or `restricted`
/// refuses its Pods.
fn pod_security(w: &World) -> Check {
    const ID: &str = "pod-security";
    let ns = w
        .install
        .as_ref()
        .map_or("?", |i| i.namespace.as_str())
        .to_owned();
    match &w.namespace_labels {
        Err(e) => Check::warn(
            ID,
            format!("cannot read namespace {ns}: {e}"),
            "run doctor as a user who may get namespaces",
        ),
        Ok(l) => match l.get(PSA_ENFORCE).map(String::as_str) {
            Some(level @ ("baseline" | "restricted")) => Check::fail(
                ID,
                format!(
                    "namespace {ns} enforces Pod Security {level:?}: the node helper (privileged) cannot run there"
                ),
                format!("kubectl label namespace {ns} {PSA_ENFORCE}=privileged --overwrite"),
            ),
            Some(level) => Check::pass(
                ID,
                format!("namespace {ns} enforces Pod Security {level:?}"),
            ),
            None => Check::pass(
                ID,
                format!("namespace {ns} sets no Pod Security level (the cluster's default)"),
            ),
        },
    }
}

/// Every node that runs a tablet needs a Ready node helper: without it a fence whose job
/// dies is released only by the GC.
fn node_helpers(w: &World) -> Check {
    const ID: &str = "node-helper";
    let (Ok(tablets), Ok(helpers)) = (&w.tablet_pods, &w.node_helpers) else {
        let e = w
            .tablet_pods
            .as_ref()
            .err()
            .or(w.node_helpers.as_ref().err())
            .map(ToString::to_string)
            .unwrap_or_default();
        return Check::warn(
            ID,
            format!("not checked: {e}"),
            "run doctor as a user who may list pods",
        );
    };
    let tablet_nodes: BTreeSet<&str> = tablets.iter().filter_map(|p| p.node.as_deref()).collect();
    let served: BTreeSet<&str> = helpers
        .iter()
        .filter(|p| p.ready)
        .filter_map(|p| p.node.as_deref())
        .collect();
    let missing: Vec<&str> = tablet_nodes.difference(&served).copied().collect();
    if tablet_nodes.is_empty() {
        Check::pass(ID, "no tablet Pod is on a node yet")
    } else if missing.is_empty() {
        Check::pass(
            ID,
            format!(
                "a Ready node helper on each of the {} node(s) with tablets",
                tablet_nodes.len()
            ),
        )
    } else {
        Check::fail(
            ID,
            format!(
                "no Ready node helper on node(s) with tablets: {}",
                missing.join(", ")
            ),
            "check the vtsnap-node DaemonSet (its tolerations and nodeSelector must cover the tablets' nodes)",
        )
    }
}

fn deletion_policy(w: &World) -> Check {
    const ID: &str = "deletion-policy";
    let Ok(cfg) = &w.config else {
        return Check::warn(ID, "not checked: the config is not valid", "fix the config");
    };
    let deleting: Vec<&str> = cfg
        .clusters
        .iter()
        .filter(|c| resolve_in(c, "", "").deletion_policy.when_deleted == Lifecycle::Delete)
        .map(|c| c.name.as_str())
        .collect();
    if deleting.is_empty() {
        Check::pass(
            ID,
            "snapshots outlive their VitessCluster (whenDeleted: Retain)",
        )
    } else {
        Check::warn(
            ID,
            format!(
                "whenDeleted: Delete for {}: deleting the VitessCluster deletes every snapshot of it",
                deleting.join(", ")
            ),
            "keep it only if that is wanted; whenDeleted: Retain keeps them",
        )
    }
}

#[cfg(test)]
#[path = "doctor_tests.rs"]
mod tests;
