//! `kubectl vtsnap recover`: point-in-time recovery of one shard as a Job of the chart's
//! recovery template (decided in `decide::recover`), optionally followed to the run's JSON
//! line.

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::Value;
use vtsnap_core::api_error::message;
use vtsnap_core::pitr::run::RunVerdict;
use vtsnap_core::reconcile::{Waited, wait_until};

use crate::act::{job_condition, job_ended, newest_pod_log};
use crate::decide::doctor::Install;
pub use crate::decide::recover::*;

fn api_err(doing: impl Into<String>) -> impl FnOnce(kube::Error) -> RecoverError {
    let doing = doing.into();
    move |e| RecoverError::Api {
        doing,
        cause: message(&e),
    }
}

/// What the Job did: its name, and with a wait, the run's line (or why it is missing).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub job: String,
    /// `created` (not followed), `succeeded` or `failed`.
    pub result: &'static str,
    /// The run's line as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<Value>,
    /// What the plugin read of that line.
    #[serde(skip)]
    pub verdict: Option<RunVerdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_unavailable: Option<String>,
    /// What removes a served recovery when its user is done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<String>,
}

/// Reads the template, creates the Job; with `wait`, follows it to its end.
pub async fn recover(
    kube: &kube::Client,
    install: &Install,
    r: &Request,
    wait: Option<Duration>,
) -> Result<Outcome, RecoverError> {
    let where_ = format!(
        "ConfigMap {}/{}-snapshot-schedule",
        install.namespace, install.fullname
    );
    let maps: Api<ConfigMap> = Api::namespaced(kube.clone(), &install.namespace);
    let map = maps
        .get_opt(&format!("{}-snapshot-schedule", install.fullname))
        .await
        .map_err(api_err(format!("read {where_}")))?
        .ok_or_else(|| RecoverError::NoTemplate(where_.clone()))?;
    let text = map
        .data
        .as_ref()
        .and_then(|d| d.get(TEMPLATE_KEY))
        .ok_or_else(|| RecoverError::NoTemplate(where_.clone()))?;
    let template: CronJob = serde_json::from_str(text)
        .map_err(|e| RecoverError::BadTemplate(where_.clone(), e.to_string()))?;
    let job = job(&template, &install.fullname, r)
        .map_err(|e| RecoverError::BadTemplate(where_.clone(), e))?;
    let jobs: Api<Job> = Api::namespaced(kube.clone(), &install.namespace);
    let created = jobs
        .create(&PostParams::default(), &job)
        .await
        .map_err(api_err("create the recovery Job"))?;
    let name = created.metadata.name.unwrap_or_default();
    let Some(limit) = wait else {
        return Ok(Outcome {
            job: name,
            result: "created",
            run: None,
            verdict: None,
            log_unavailable: None,
            cleanup: None,
        });
    };
    let done = match wait_until(&jobs, &name, limit, job_ended).await {
        Waited::Met(j) => j,
        Waited::TimedOut { .. } => return Err(RecoverError::Timeout { job: name, limit }),
        Waited::Refused(refusal) => {
            return Err(RecoverError::Api {
                doing: format!("watch Job {name}"),
                cause: refusal.to_string(),
            });
        }
    };
    let mut out = Outcome {
        result: if job_condition(done.as_ref(), "Complete") {
            "succeeded"
        } else {
            "failed"
        },
        job: name,
        run: None,
        verdict: None,
        log_unavailable: None,
        cleanup: None,
    };
    match newest_pod_log(kube, &install.namespace, &out.job, CONTAINER)
        .await
        .and_then(|(_, log)| log)
    {
        Ok(log) => match run_line(&log, &r.shard.at(&r.namespace)) {
            Some((verdict, line)) => {
                out.cleanup = cleanup(&verdict, &r.namespace, &install.namespace, &out.job);
                out.run = Some(line);
                out.verdict = Some(verdict);
            }
            None => out.log_unavailable = Some("no run line in the Job's log".into()),
        },
        Err(e) => out.log_unavailable = Some(e),
    }
    Ok(out)
}
