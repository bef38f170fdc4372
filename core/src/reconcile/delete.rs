//! Deleting an object a run made: only that very one (its UID as a precondition), so that
//! an object of the same name made since by someone else is never touched.

use kube::Resource;
use kube::api::{Api, DeleteParams, Preconditions};

/// Deletes `name` in the background if its UID is still `uid` (any UID when `None`), and
/// notes it as a run reports it: `<kind>-deleted` among `steps`; nothing when it was
/// already gone; `<Kind>/<name>` among `left` when the server refused or could not be
/// reached, logged (its owner's garbage collection removes it, if it has an owner: a Job
/// of another namespace is only named on it, `restore_pod::JobOwner::mark`).
pub async fn remove_made<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<&str>,
    (steps, left): (&mut Vec<String>, &mut Vec<String>),
) where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let kind = K::kind(&()).into_owned();
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: uid.map(str::to_owned),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &dp).await {
        Ok(_) => steps.push(format!("{}-deleted", kind.to_lowercase())),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => {
            tracing::warn!(object = %format!("{kind}/{name}"), error = %e, "not deleted; its owner's garbage collection will, if it has an owner");
            left.push(format!("{kind}/{name}"));
        }
    }
}
