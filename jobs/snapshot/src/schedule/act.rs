//! The schedule reconciler's writes, each guarded by what was read:
//! - create: a POST, which fails if a CronJob of that name appeared since the read (a
//!   person's is never overwritten);
//! - update: a server-side apply with its own field manager, carrying the resourceVersion
//!   read as its precondition;
//! - delete: with the uid and resourceVersion read as preconditions (a Job started since
//!   the read changes the CronJob's status, and the delete is refused).

use k8s_openapi::api::batch::v1::CronJob;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde::Serialize;

use super::decide::{Action, Plan};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "vtsnap-schedule";

/// What happened to one decision that writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub name: String,
    pub action: Action,
    /// `None`: done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Carries out the plan's writes in `namespace`, each on its own (one failure does not
/// stop the others).
pub async fn act(kube: &kube::Client, namespace: &str, plan: &Plan) -> Vec<Outcome> {
    let api: Api<CronJob> = Api::namespaced(kube.clone(), namespace);
    let mut out = Vec::new();
    for d in &plan.decisions {
        let result = match d.action {
            Action::Keep => continue,
            Action::Create => match d.desired.clone().map(serde_json::from_value::<CronJob>) {
                Some(Ok(cj)) => api
                    .create(
                        &PostParams {
                            field_manager: Some(FIELD_MANAGER.into()),
                            ..PostParams::default()
                        },
                        &cj,
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                Some(Err(e)) => Err(format!("the CronJob built is not one: {e}")),
                None => Err("nothing to create".into()),
            },
            Action::Update => match d.desired.clone() {
                Some(mut obj) => {
                    obj["metadata"]["resourceVersion"] =
                        serde_json::json!(d.resource_version.clone().unwrap_or_default());
                    api.patch(
                        &d.name,
                        &PatchParams::apply(FIELD_MANAGER).force(),
                        &Patch::Apply(&obj),
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
                }
                None => Err("nothing to apply".into()),
            },
            Action::Delete => api
                .delete(
                    &d.name,
                    &DeleteParams {
                        preconditions: Some(Preconditions {
                            uid: d.uid.clone(),
                            resource_version: d.resource_version.clone(),
                        }),
                        ..DeleteParams::background()
                    },
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
        };
        if let Err(e) = &result {
            tracing::warn!(cronjob = %d.name, action = ?d.action, error = %e, "not done");
        } else {
            tracing::info!(cronjob = %d.name, action = ?d.action, reason = d.reason.as_str(), "done");
        }
        out.push(Outcome {
            name: d.name.clone(),
            action: d.action,
            error: result.err(),
        });
    }
    out
}
