//! `kubectl vtsnap backup`: a Job from the shard's snapshot CronJob (what `kubectl create
//! job --from=cronjob/…` does, with vtsnap's labels), optionally followed to its end.

use std::time::Duration;

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ListParams, LogParams, PostParams};
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::api_error::message;
use vtsnap_core::config::Mode;
use vtsnap_core::k8s_names::{NameError, dns_label, escape_controls, label_value};
use vtsnap_core::naming::KeyRange;
use vtsnap_core::reconcile::{ObjectKey, Waited, list, wait_until};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::shard::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};
use vtsnap_core::snapshot::mode_label;

use crate::decide::doctor::Install;
use crate::decide::schedules::cron_shard;
use crate::observe::read::snapshot_cron_of;

/// Labels the ad-hoc Job carries besides its CronJob's.
pub const LABEL_TRIGGER: &str = "vtsnap.io/trigger";
pub const TRIGGER_KUBECTL: &str = "kubectl-vtsnap";

/// `CLUSTER/KEYSPACE/SHARD`, e.g. `example/commerce/-80`: each part checked as the name it
/// is before it goes into a label selector or a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardArg {
    pub cluster: String,
    pub keyspace: String,
    pub shard: KeyRange,
}

/// Why a `CLUSTER/KEYSPACE/SHARD` argument was refused. The argument and its parts are
/// kept with their control characters escaped: the message may reach a terminal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardArgError {
    #[error("\"{0}\" is not CLUSTER/KEYSPACE/SHARD (e.g. example/commerce/-80)")]
    Shape(String),
    #[error("\"{arg}\": the cluster \"{part}\" is not a VitessCluster name: {why}")]
    Cluster {
        arg: String,
        part: String,
        why: NameError,
    },
    #[error("\"{arg}\": the keyspace \"{part}\" is not a Vitess keyspace name: {why}")]
    Keyspace {
        arg: String,
        part: String,
        why: KeyspaceNameError,
    },
    #[error("\"{arg}\": the shard \"{part}\" is not a key range: {why}")]
    Shard {
        arg: String,
        part: String,
        why: String,
    },
}

/// What Vitess's topology server accepts as a keyspace name (ASCII letters, digits, `-`
/// and `_`: `go/vt/topo/server.go` `validateObjectName`), which vtsnap also puts in a
/// label value (`vtsnap.io/keyspace`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyspaceNameError {
    #[error("it is empty")]
    Empty,
    #[error("{0:?} is not an ASCII letter, a digit, '-' or '_'")]
    Character(char),
    #[error("as a label value: {0}")]
    Label(NameError),
}

/// `Ok` when `s` is a Vitess keyspace name vtsnap can label objects with.
pub fn keyspace_name(s: &str) -> Result<(), KeyspaceNameError> {
    if s.is_empty() {
        return Err(KeyspaceNameError::Empty);
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(KeyspaceNameError::Character(c));
    }
    label_value(s).map_err(KeyspaceNameError::Label)
}

impl std::str::FromStr for ShardArg {
    type Err = ShardArgError;

    fn from_str(s: &str) -> Result<Self, ShardArgError> {
        let arg = escape_controls(s).into_owned();
        let part = |p: &str| escape_controls(p).into_owned();
        let parts: Vec<&str> = s.split('/').collect();
        let [cluster, keyspace, shard] = parts.as_slice() else {
            return Err(ShardArgError::Shape(arg));
        };
        dns_label(cluster).map_err(|why| ShardArgError::Cluster {
            arg: arg.clone(),
            part: part(cluster),
            why,
        })?;
        keyspace_name(keyspace).map_err(|why| ShardArgError::Keyspace {
            arg: arg.clone(),
            part: part(keyspace),
            why,
        })?;
        let shard = shard
            .parse::<KeyRange>()
            .map_err(|why| ShardArgError::Shard {
                arg: arg.clone(),
                part: part(shard),
                why: escape_controls(&why.to_string()).into_owned(),
            })?;
        Ok(Self {
            cluster: (*cluster).to_owned(),
            keyspace: (*keyspace).to_owned(),
            shard,
        })
    }
}

impl ShardArg {
    /// The shard, once the namespace of its cluster is known.
    pub fn at(&self, namespace: &str) -> ShardRef {
        ShardRef {
            namespace: namespace.to_owned(),
            cluster: self.cluster.clone(),
            keyspace: self.keyspace.clone(),
            shard: self.shard.clone(),
        }
    }
}

impl std::fmt::Display for ShardArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.cluster, self.keyspace, self.shard)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(
        "no snapshot CronJob for {0} in namespace {1}: add the shard to snapshot.shards in the chart's values"
    )]
    NoCronJob(String, String),
    #[error("{n} snapshot CronJobs for {shard}: {names}")]
    SeveralCronJobs {
        n: usize,
        shard: String,
        names: String,
    },
    #[error("{doing}: {cause}")]
    Api { doing: String, cause: String },
    /// `watch_error`: empty, or why the watches were failing (said after the limit).
    #[error("the Job {job} did not end within {limit:?}{watch_error}")]
    Timeout {
        job: String,
        limit: Duration,
        watch_error: String,
    },
}

fn api_err(doing: impl Into<String>) -> impl FnOnce(kube::Error) -> BackupError {
    let doing = doing.into();
    move |e| BackupError::Api {
        doing,
        cause: message(&e),
    }
}

/// How a Job ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub job: String,
    /// `created` (not followed), `succeeded` or `failed`.
    pub result: &'static str,
    /// The snapshot container's exit code, when it ended.
    pub exit_code: Option<i32>,
    /// The run's steps, from its summary line, when its log could be read.
    pub steps: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_unavailable: Option<String>,
}

/// The Job a CronJob would start now, as pure data: its template, vtsnap's trigger
/// label, the manual-instantiation annotation, an ownerReference to the CronJob and, with
/// `mode`, `--mode` on the snapshot container.
pub fn job_from(cron: &CronJob, mode: Option<Mode>) -> Job {
    let name = cron.metadata.name.clone().unwrap_or_default();
    let template = cron.spec.as_ref().map(|s| &s.job_template);
    let mut meta = template
        .and_then(|t| t.metadata.clone())
        .unwrap_or_default();
    // `<cron>-<suffix>`: at most 63 characters with the API server's 5.
    let prefix: String = name.chars().take(52).collect();
    meta.generate_name = Some(format!("{}-", prefix.trim_end_matches('-')));
    meta.namespace.clone_from(&cron.metadata.namespace);
    meta.labels
        .get_or_insert_default()
        .insert(LABEL_TRIGGER.into(), TRIGGER_KUBECTL.into());
    meta.annotations
        .get_or_insert_default()
        .insert("cronjob.kubernetes.io/instantiate".into(), "manual".into());
    meta.owner_references = Some(vec![OwnerReference {
        api_version: "batch/v1".into(),
        kind: "CronJob".into(),
        uid: cron.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
        name,
    }]);
    let mut spec = template.and_then(|t| t.spec.clone()).unwrap_or_default();
    if let Some(mode) = mode
        && let Some(pod) = spec.template.spec.as_mut()
    {
        for c in pod.containers.iter_mut().filter(|c| c.name == "snapshot") {
            let mut args = c.args.take().unwrap_or_default();
            if let Some(i) = args.iter().position(|a| a == "--mode") {
                args.drain(i..(i + 2).min(args.len()));
            }
            args.retain(|a| !a.starts_with("--mode="));
            args.extend(["--mode".to_owned(), mode_label(mode).to_owned()]);
            c.args = Some(args);
        }
    }
    Job {
        metadata: meta,
        spec: Some(spec),
        status: None,
    }
}

/// Which of a cluster's namespaces `backup` means, when the config names its cluster in
/// more than one: the CronJob whose record places it there.
#[derive(Debug, Clone, Copy)]
pub struct InNamespace<'a> {
    pub namespace: &'a str,
    pub config: &'a vtsnap_core::config::Config,
}

async fn find_cron(
    kube: &kube::Client,
    install: &Install,
    shard: &ShardArg,
    only: Option<&InNamespace<'_>>,
) -> Result<CronJob, BackupError> {
    let api: Api<CronJob> = Api::namespaced(kube.clone(), &install.namespace);
    let selector = format!(
        "app.kubernetes.io/component=snapshot,{LABEL_CLUSTER}={},{LABEL_KEYSPACE}={},{LABEL_SHARD}={}",
        shard.cluster,
        shard.keyspace,
        shard.shard.safe_name()
    );
    let mut found = list::all(&api, &ListParams::default().labels(&selector))
        .await
        .map_err(api_err("list the snapshot CronJobs"))?;
    if let Some(only) = only.filter(|_| found.len() > 1) {
        let clusters: BTreeSet<ObjectKey> = only
            .config
            .clusters
            .iter()
            .map(|c| ObjectKey::new(&c.namespace, &c.name))
            .collect();
        let wanted = shard.at(only.namespace);
        // A CronJob whose shard record does not read stands for no shard.
        found.retain(|c| {
            snapshot_cron_of(c.clone())
                .is_ok_and(|c| cron_shard(&clusters, &c).as_ref() == Some(&wanted))
        });
    }
    match found.len() {
        0 => Err(BackupError::NoCronJob(
            shard.to_string(),
            install.namespace.clone(),
        )),
        1 => Ok(found.remove(0)),
        n => Err(BackupError::SeveralCronJobs {
            n,
            shard: shard.to_string(),
            names: found
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// What `backup --wait` may wait of the command's whole `limit` when `spent` is gone: the
/// rest, less a reserve (a quarter of the limit, at most a minute) for reading the Job's
/// Pod and its log afterwards, so a wait that ends at its limit still reports the Job.
pub fn wait_budget(limit: Duration, spent: Duration) -> Duration {
    let reserve = (limit / 4).min(Duration::from_secs(60));
    limit.saturating_sub(spent).saturating_sub(reserve)
}

/// Creates the Job; with `wait`, follows it to its end (at most `wait`).
pub async fn backup(
    kube: &kube::Client,
    install: &Install,
    shard: &ShardArg,
    mode: Option<Mode>,
    wait: Option<Duration>,
    only: Option<&InNamespace<'_>>,
) -> Result<Outcome, BackupError> {
    let cron = find_cron(kube, install, shard, only).await?;
    let job = job_from(&cron, mode);
    let jobs: Api<Job> = Api::namespaced(kube.clone(), &install.namespace);
    let created = jobs
        .create(&PostParams::default(), &job)
        .await
        .map_err(api_err("create the Job"))?;
    let name = created.metadata.name.unwrap_or_default();
    let Some(limit) = wait else {
        return Ok(Outcome {
            job: name,
            result: "created",
            exit_code: None,
            steps: Vec::new(),
            snapshot: None,
            log_unavailable: None,
        });
    };
    // A cold snapshot keeps the Job quiet for minutes: the shared wait watches again
    // when the connection drops meanwhile.
    let done = match wait_until(&jobs, &name, limit, job_ended).await {
        Waited::Met(job) => job,
        Waited::TimedOut { watch_error, .. } => {
            return Err(BackupError::Timeout {
                job: name.clone(),
                limit,
                watch_error: watch_error
                    .map(|e| format!(" (its watch kept failing: {e})"))
                    .unwrap_or_default(),
            });
        }
        Waited::Refused(refusal) => {
            return Err(BackupError::Api {
                doing: format!("watch Job {name}"),
                cause: refusal.to_string(),
            });
        }
    };
    let succeeded = job_condition(done.as_ref(), "Complete");
    let mut out = Outcome {
        job: name.clone(),
        result: if succeeded { "succeeded" } else { "failed" },
        exit_code: None,
        steps: Vec::new(),
        snapshot: None,
        log_unavailable: None,
    };
    follow_pod(kube, install, &name, &mut out).await;
    Ok(out)
}

/// Whether the Job has condition `kind` (`Complete`, `Failed`) true.
pub fn job_condition(job: Option<&Job>, kind: &str) -> bool {
    job.and_then(|j| j.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == "True"))
}

/// Whether the Job has ended, either way.
pub fn job_ended(job: Option<&Job>) -> bool {
    job_condition(job, "Complete") || job_condition(job, "Failed")
}

/// The Job's newest Pod and `container`'s log in it (at most 256 KiB, the last 200
/// lines): `Err` says why there is no Pod to read; the inner one why its log is not.
pub async fn newest_pod_log(
    kube: &kube::Client,
    namespace: &str,
    job: &str,
    container: &str,
) -> Result<(Pod, Result<String, String>), String> {
    label_value(job).map_err(|e| format!("Job name {job:?}: {e}"))?;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    let found = list::all(
        &pods,
        &ListParams::default().labels(&format!("job-name={job}")),
    )
    .await
    .map_err(|e| format!("cannot list the Job's Pods: {}", message(&e)))?;
    let pod = found
        .into_iter()
        .max_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0))
        .ok_or("the Job has no Pod")?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let params = LogParams {
        container: Some(container.into()),
        limit_bytes: Some(256 * 1024),
        tail_lines: Some(200),
        ..LogParams::default()
    };
    let log = pods
        .logs(&name, &params)
        .await
        .map_err(|e| format!("log of Pod {name}: {}", message(&e)));
    Ok((pod, log))
}

/// The Job's newest Pod: the snapshot container's exit code and its summary line.
async fn follow_pod(kube: &kube::Client, install: &Install, job: &str, out: &mut Outcome) {
    let (pod, log) = match newest_pod_log(kube, &install.namespace, job, "snapshot").await {
        Ok(found) => found,
        Err(e) => {
            out.log_unavailable = Some(e);
            return;
        }
    };
    out.exit_code = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == "snapshot"))
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map(|t| t.exit_code);
    let name = pod.metadata.name.unwrap_or_default();
    match log {
        Ok(text) => match run_summary(&text) {
            Some(summary) => {
                out.steps = summary["steps"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|s| s.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                out.snapshot = summary["snapshot"].as_str().map(str::to_owned);
            }
            None => out.log_unavailable = Some(format!("no run summary in the log of Pod {name}")),
        },
        Err(e) => out.log_unavailable = Some(e),
    }
}

/// The run's summary line in a snapshot container's log: the last JSON object with an
/// `outcome` and its `steps`. The container's JSON log lines (stderr) share the log with
/// it (stdout), and the two streams are not ordered with each other: the last JSON line
/// is not always the summary.
pub fn run_summary(log: &str) -> Option<Value> {
    log.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("outcome").is_some() && v.get("steps").is_some_and(Value::is_array))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_summary_is_found_among_log_lines_in_any_order() {
        let summary =
            r#"{"outcome":"done","exit_code":0,"snapshot":"s-1","steps":["fence","cut"]}"#;
        let log_line = r#"{"timestamp":"2026-12-01T12:00:00Z","level":"INFO","fields":{"message":"unfenced"}}"#;
        // The summary (stdout) first, a log line (stderr) after it.
        let log = format!("{log_line}\n{summary}\n{log_line}\nnot json\n");
        let v = run_summary(&log).unwrap();
        assert_eq!(v["snapshot"], "s-1");
        assert_eq!(v["steps"], json!(["fence", "cut"]));
        // No summary: none, rather than a log line taken for it.
        assert_eq!(run_summary(&format!("{log_line}\n{log_line}\n")), None);
        // A line with an outcome but no list of steps is not it either.
        assert_eq!(run_summary(r#"{"outcome":"x","steps":"no"}"#), None);
    }

    fn cron() -> CronJob {
        serde_json::from_value(json!({"metadata": {"name": "vtsnap-snap-example-commerce-x-x", "namespace": "vtsnap", "uid": "u-1"},
            "spec": {"jobTemplate": {"metadata": {"labels": {"vtsnap.io/cluster": "example"}},
                "spec": {"backoffLimit": 0, "template": {"spec": {"containers": [
                    {"name": "snapshot", "args": ["run", "--cluster", "example", "--mode", "cold"]}]}}}}}}))
        .unwrap()
    }

    /// The Job as JSON, as it is sent.
    fn job_json(cron: &CronJob, mode: Option<Mode>) -> Value {
        serde_json::to_value(job_from(cron, mode)).unwrap()
    }

    #[test]
    fn a_shard_argument_is_three_parts_with_a_key_range() {
        let a: ShardArg = "example/commerce/-80"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (a.cluster.as_str(), a.shard.safe_name()),
            ("example", "x-80".to_owned())
        );
        for bad in [
            "example/commerce",
            "a/b/c/d",
            "/commerce/-",
            "example/commerce/zz",
            "e/k/\u{1b}",
        ] {
            assert!(bad.parse::<ShardArg>().is_err(), "{bad}");
        }
        let e = "x\u{1b}y".parse::<ShardArg>().unwrap_err();
        assert!(!e.to_string().contains('\u{1b}'), "{e}");
        let e = "example/com_merce-2/-"
            .parse::<ShardArg>()
            .map(|a| a.keyspace);
        assert_eq!(e, Ok("com_merce-2".to_owned()), "a Vitess keyspace name");
        // Placed in its cluster's namespace, it is the shard every program names.
        assert_eq!(a.at("vitess").to_string(), "vitess/example/commerce/-80");
    }

    #[test]
    fn a_cluster_or_keyspace_that_is_not_a_name_is_refused_escaped() {
        // Round three, item 15: sent into a label selector and echoed raw before.
        let e = "ex\u{1b}]0;owned\u{7}ample/commerce/-"
            .parse::<ShardArg>()
            .unwrap_err();
        assert!(matches!(e, ShardArgError::Cluster { .. }), "{e}");
        let said = e.to_string();
        assert!(
            !said.chars().any(char::is_control) && said.contains("\\u{1b}]0;owned\\u{7}"),
            "{said}"
        );
        for (bad, want) in [
            ("Example/commerce/-", "cluster"),
            ("a.b/commerce/-", "cluster"),
            ("example/com\u{1b}merce/-", "keyspace"),
            ("example/com,merce/-", "keyspace"),
            ("example/com=merce/-", "keyspace"),
            ("example/-commerce/-", "keyspace"),
            ("example//-", "keyspace"),
        ] {
            let e = bad.parse::<ShardArg>().unwrap_err();
            let said = e.to_string();
            assert!(
                said.contains(&format!("the {want} ")) && !said.chars().any(char::is_control),
                "{bad}: {said}"
            );
        }
        assert_eq!(keyspace_name("commerce"), Ok(()));
        assert_eq!(keyspace_name(""), Err(KeyspaceNameError::Empty));
        assert_eq!(keyspace_name("a.b"), Err(KeyspaceNameError::Character('.')));
        assert!(matches!(
            keyspace_name(&"k".repeat(64)),
            Err(KeyspaceNameError::Label(_))
        ));
    }

    #[test]
    fn the_wait_keeps_a_reserve_for_reading_the_job_s_pod() {
        let (m, s) = (Duration::from_secs(60), Duration::from_secs(1));
        // 30m, 10s spent: the wait ends a minute before the limit.
        assert_eq!(wait_budget(30 * m, 10 * s), 30 * m - 10 * s - m);
        // 2s: a quarter is kept.
        assert_eq!(
            wait_budget(2 * s, Duration::ZERO),
            Duration::from_millis(1500)
        );
        // Nothing left: no wait, never a negative one.
        assert_eq!(wait_budget(2 * s, 3 * s), Duration::ZERO);
    }

    #[test]
    fn a_job_from_a_cronjob_is_its_template_with_vtsnap_s_marks() {
        let j = job_json(&cron(), None);
        assert_eq!(
            j["metadata"]["generateName"],
            "vtsnap-snap-example-commerce-x-x-"
        );
        assert_eq!(j["metadata"]["labels"]["vtsnap.io/cluster"], "example");
        assert_eq!(j["metadata"]["labels"][LABEL_TRIGGER], TRIGGER_KUBECTL);
        assert_eq!(
            j["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
            "manual"
        );
        assert_eq!(j["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(j["spec"]["backoffLimit"], 0);
        assert_eq!(
            j["spec"]["template"]["spec"]["containers"][0]["args"],
            json!(["run", "--cluster", "example", "--mode", "cold"])
        );
        // --online replaces the mode, whatever the template said.
        let j = job_json(&cron(), Some(Mode::Online));
        assert_eq!(
            j["spec"]["template"]["spec"]["containers"][0]["args"],
            json!(["run", "--cluster", "example", "--mode", "online"])
        );
        // A long CronJob name still gives a valid name.
        let mut long = cron();
        long.metadata.name = Some("x".repeat(52));
        let g = job_json(&long, None)["metadata"]["generateName"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(g.len() <= 58, "{g}");
    }
}
