//! Kubernetes Events (on a tablet Pod, a VolumeSnapshot, a VitessCluster), so `kubectl
//! describe` tells the story. Best effort: an event that cannot be written is logged,
//! never fatal.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};

/// The object an event is about.
#[derive(Debug, Clone)]
pub struct Subject {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: Option<String>,
}

impl Subject {
    pub fn pod(name: &str, uid: &str) -> Self {
        Self {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: name.into(),
            uid: Some(uid.into()).filter(|u: &String| !u.is_empty()),
        }
    }

    pub fn vitess_cluster(name: &str, uid: Option<&str>) -> Self {
        Self {
            api_version: "planetscale.com/v2".into(),
            kind: "VitessCluster".into(),
            name: name.into(),
            uid: uid.map(str::to_owned),
        }
    }

    pub fn snapshot(name: &str) -> Self {
        Self {
            api_version: "snapshot.storage.k8s.io/v1".into(),
            kind: "VolumeSnapshot".into(),
            name: name.into(),
            uid: None,
        }
    }
}

/// Records an event; `warning` for failures.
pub async fn emit(
    kube: &kube::Client,
    component: &str,
    namespace: &str,
    about: &Subject,
    reason: &str,
    message: &str,
    warning: bool,
) {
    let now = Timestamp::now();
    let ev = Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:x}", about.name, now.as_nanosecond())),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some(about.api_version.clone()),
            kind: Some(about.kind.clone()),
            name: Some(about.name.clone()),
            namespace: Some(namespace.into()),
            uid: about.uid.clone(),
            ..ObjectReference::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some(if warning { "Warning" } else { "Normal" }.into()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        source: Some(EventSource {
            component: Some(component.into()),
            host: None,
        }),
        ..Event::default()
    };
    let api: Api<Event> = Api::namespaced(kube.clone(), namespace);
    if let Err(e) = api.create(&PostParams::default(), &ev).await {
        tracing::warn!(error = %e, reason, "cannot record an event");
    }
}
