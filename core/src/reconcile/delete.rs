//! Deleting an object a run made: only that very one (its UID as a precondition), so that
//! an object of the same name made since by someone else is never touched.

use kube::Resource;
use kube::api::{Api, DeleteParams, Preconditions};

/// How a delete of a made object ended.
#[derive(Debug)]
pub enum Deleted {
    /// The server took the delete (the object may linger behind finalizers).
    Accepted,
    /// It was already gone.
    Gone,
    /// The server refused or could not be reached: the object may still be there.
    Failed(kube::Error),
}

/// Deletes `name` in the background if its UID is still `uid` (any UID when `None`).
pub async fn delete_made<K>(api: &Api<K>, name: &str, uid: Option<&str>) -> Deleted
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: uid.map(str::to_owned),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &dp).await {
        Ok(_) => Deleted::Accepted,
        Err(kube::Error::Api(e)) if e.code == 404 => Deleted::Gone,
        Err(e) => Deleted::Failed(e),
    }
}
