//! `kubectl vtsnap recover`, decided: the target and the shard's namespace checked, the
//! Job made from the chart's recovery template (`recover-cronjob.json` in the schedule
//! ConfigMap: `vtsnap-pitr run` as the `pitr-recover` account, docs/pitr.md §8), and the
//! run's line read back. Pure; the requests are in `crate::recover`.

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_core::k8s_names::{dns_label, dns_subdomain, escape_controls};
use vtsnap_core::pitr::chain;
use vtsnap_core::pitr::run::{After, RunVerdict};
use vtsnap_core::shard::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD, ShardRef};

use crate::act::{LABEL_TRIGGER, ShardArg, TRIGGER_KUBECTL};

/// The key of the recovery template in the schedule ConfigMap.
pub const TEMPLATE_KEY: &str = "recover-cronjob.json";
/// The container of the template that runs `vtsnap-pitr run`.
pub const CONTAINER: &str = "recover";
/// A GTID set as long as any shard's `@@gtid_executed` may reasonably be.
const GTID_MAX: usize = 64 * 1024;

/// What to recover to: a time (RFC 3339) or a GTID set, as `vtsnap-pitr run` takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Time(String),
    Gtid(String),
}

/// One recovery, as asked on the command line (checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub shard: ShardArg,
    /// The shard's namespace (the config's, or `-n` among several).
    pub namespace: String,
    pub target: Target,
    pub snapshot: Option<String>,
    pub after: After,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecoverError {
    /// The target as the run would refuse it (the flag named).
    #[error("{0}")]
    Target(String),
    #[error("--to-gtid: {0}")]
    Gtid(String),
    #[error("--snapshot \"{0}\": not a snapshot name: {1}")]
    Snapshot(String, String),
    #[error("no cluster {0:?} in the install's config")]
    NoCluster(String),
    #[error("cluster {cluster:?} is in {namespaces} namespaces of the config: name one with -n")]
    SeveralNamespaces { cluster: String, namespaces: usize },
    #[error("cluster {cluster:?} is not in namespace {namespace:?} of the config")]
    NotInNamespace { cluster: String, namespace: String },
    #[error(
        "no recovery template in {0}: install the chart with pitr.enabled (and snapshot.reconcile.enabled)"
    )]
    NoTemplate(String),
    #[error("the recovery template in {0} is not a CronJob with a `recover` container: {1}")]
    BadTemplate(String, String),
    #[error("{doing}: {cause}")]
    Api { doing: String, cause: String },
    #[error("the Job {job} did not end within {limit:?}")]
    Timeout { job: String, limit: Duration },
}

/// The target as `vtsnap-pitr run` checks it (`PitrTargetArgs::target`: a time not after
/// `now`, or a GTID set of the server's form), a GTID set first bounded in size and
/// refused with a control character, before it goes into a Job's args as the server
/// would print it.
pub fn target(
    to: &vtsnap_core::cli::PitrTargetArgs,
    now: k8s_openapi::jiff::Timestamp,
) -> Result<Target, RecoverError> {
    if let Some(g) = to.to_gtid.as_deref() {
        if g.is_empty() || g.len() > GTID_MAX {
            return Err(RecoverError::Gtid(format!(
                "{} bytes; a GTID set of 1 to {GTID_MAX} bytes is expected",
                g.len()
            )));
        }
        if g.chars().any(char::is_control) {
            return Err(RecoverError::Gtid(format!(
                "\"{}\" holds a control character",
                escape_controls(g)
            )));
        }
    }
    match to.target(now).map_err(RecoverError::Target)? {
        chain::Target::Before(at) => Ok(Target::Time(at.to_string())),
        // the set as the server prints it, which the run parses as it was checked here
        chain::Target::Through(set) => Ok(Target::Gtid(set.to_string())),
    }
}

/// The shard's namespace from the config: its one cluster of that name, or the one in
/// `namespace` (`-n`) when it names the cluster in several.
pub fn shard_namespace(
    config: &Config,
    cluster: &str,
    namespace: Option<&str>,
) -> Result<String, RecoverError> {
    let found: Vec<&str> = config
        .clusters
        .iter()
        .filter(|c| c.name == cluster)
        .map(|c| c.namespace.as_str())
        .collect();
    match (found.as_slice(), namespace) {
        ([], _) => Err(RecoverError::NoCluster(cluster.to_owned())),
        (_, Some(ns)) if found.contains(&ns) => Ok(ns.to_owned()),
        (_, Some(ns)) => Err(RecoverError::NotInNamespace {
            cluster: cluster.to_owned(),
            namespace: ns.to_owned(),
        }),
        ([one], None) => Ok((*one).to_owned()),
        (many, None) => Err(RecoverError::SeveralNamespaces {
            cluster: cluster.to_owned(),
            namespaces: many.len(),
        }),
    }
}

/// The Job the template makes for `r`, as pure data: the template's Job, named after the
/// install, labelled with the shard and vtsnap's trigger, `vtsnap-pitr run`'s args for
/// the shard and the target appended. Owned by nothing: a served recovery lives until its
/// Job is deleted (or its Pod's deadline), not until a CronJob's history is trimmed.
pub fn job(template: &CronJob, fullname: &str, r: &Request) -> Result<Job, String> {
    let spec = template
        .spec
        .as_ref()
        .ok_or("it has no spec")?
        .job_template
        .clone();
    let mut meta = spec.metadata.unwrap_or_default();
    let prefix: String = format!("{fullname}-recover").chars().take(57).collect();
    meta.generate_name = Some(format!("{}-", prefix.trim_end_matches('-')));
    meta.name = None;
    let labels = meta.labels.get_or_insert_default();
    labels.insert(LABEL_TRIGGER.into(), TRIGGER_KUBECTL.into());
    labels.insert(LABEL_CLUSTER.into(), r.shard.cluster.clone());
    labels.insert(LABEL_KEYSPACE.into(), r.shard.keyspace.clone());
    labels.insert(LABEL_SHARD.into(), r.shard.shard.safe_name());
    let mut job_spec = spec.spec.ok_or("its jobTemplate has no spec")?;
    let pod = job_spec
        .template
        .spec
        .as_mut()
        .ok_or("its Pod template has no spec")?;
    let c = pod
        .containers
        .iter_mut()
        .find(|c| c.name == CONTAINER)
        .ok_or("no container named recover")?;
    let args = c.args.get_or_insert_default();
    if args.first().map(String::as_str) != Some("run") {
        return Err("the recover container does not run `run`".into());
    }
    args.extend([
        "--cluster".to_owned(),
        r.shard.cluster.clone(),
        "--cluster-namespace".to_owned(),
        r.namespace.clone(),
        "--keyspace".to_owned(),
        r.shard.keyspace.clone(),
        format!("--shard={}", r.shard.shard),
    ]);
    match &r.target {
        Target::Time(t) => args.extend(["--to-time".to_owned(), t.clone()]),
        Target::Gtid(g) => args.extend(["--to-gtid".to_owned(), g.clone()]),
    }
    if let Some(s) = &r.snapshot {
        args.extend(["--snapshot".to_owned(), s.clone()]);
    }
    args.extend(["--after".to_owned(), r.after.as_arg().to_owned()]);
    Ok(Job {
        metadata: meta,
        spec: Some(job_spec),
        status: None,
    })
}

/// Checks a `--snapshot` name before it goes into the Job's args.
pub fn snapshot_name(name: &str) -> Result<String, RecoverError> {
    dns_subdomain(name)
        .map(|()| name.to_owned())
        .map_err(|e| RecoverError::Snapshot(escape_controls(name).into_owned(), e.to_string()))
}

/// The run's line in the recover container's log: the last JSON line that reads as a
/// run's verdict on `shard` (its JSON log lines share the log with it; a line about any
/// other shard is not this recovery's), with the line as written.
pub fn run_line(log: &str, shard: &ShardRef) -> Option<(RunVerdict, Value)> {
    let shard = shard.to_string();
    log.lines().rev().find_map(|l| {
        let line = serde_json::from_str::<Value>(l).ok()?;
        let verdict = serde_json::from_value::<RunVerdict>(line.clone()).ok()?;
        (verdict.shard == shard).then_some((verdict, line))
    })
}

/// The Pod of a recovery the run says is served, its name and `namespace` checked as names
/// before they go into a command.
fn served_pod<'a>(run: &'a RunVerdict, namespace: &str) -> Option<&'a str> {
    let pod = run.served_pod()?;
    dns_subdomain(pod).ok()?;
    dns_label(namespace).ok()?;
    Some(pod)
}

/// What removes a served recovery once its user is done: its Pod and PVC in the shard's
/// namespace (named, not owned, when its Job is elsewhere), then the Job. Names checked.
pub fn cleanup(
    run: &RunVerdict,
    namespace: &str,
    install_namespace: &str,
    job: &str,
) -> Option<String> {
    let pod = served_pod(run, namespace)?;
    dns_subdomain(job).ok()?;
    dns_label(install_namespace).ok()?;
    Some(format!(
        "kubectl delete pod,pvc -n {namespace} {pod} && kubectl delete job -n {install_namespace} {job}"
    ))
}

/// The `kubectl exec` arguments that open a `mysql` prompt on a served recovery's Pod,
/// in the shard's namespace.
pub fn shell_args(run: &RunVerdict, namespace: &str) -> Option<Vec<String>> {
    let pod = served_pod(run, namespace)?;
    Some(
        [
            "exec",
            "-it",
            "-n",
            namespace,
            pod,
            "-c",
            "mysqld",
            "--",
            "mysql",
            "-S",
            vtsnap_core::restore_pod::throwaway::SOCKET,
            "-u",
            "vt_dba",
        ]
        .map(str::to_owned)
        .to_vec(),
    )
}

#[cfg(test)]
#[path = "recover_tests.rs"]
mod tests;
