//! A tablet's data volume as its Pod and PVC name it, read where the admission webhook
//! and the throwaway restores (drills, recoveries) read them: the claim the Pod's data
//! volume names (vitess-operator's `persistent-volume-claim`), the storage the PVC
//! requests (read from its JSON so that a size of the wrong type is named rather than
//! lost in a parse error), and what a restore copies of a tablet Pod.

use k8s_openapi::api::core::v1::{PodSecurityContext, Volume};
use serde::Deserialize;
use serde_json::Value;

use crate::k8s_names::json_kind;
use crate::labels;
use crate::quantity::{self, QuantityError};
use crate::shard::ShardRef;

/// The claim a Pod's data volume (`persistent-volume-claim`) names.
pub fn data_claim(volumes: &[Volume]) -> Option<&str> {
    volumes
        .iter()
        .find(|v| v.name == labels::DATA_VOLUME)?
        .persistent_volume_claim
        .as_ref()
        .map(|c| c.claim_name.as_str())
}

/// [`data_claim`] of a Pod's JSON; `None` also when its volumes do not read.
pub fn data_claim_of(pod: &Value) -> Option<String> {
    let volumes = Vec::<Volume>::deserialize(pod.pointer("/spec/volumes")?).ok()?;
    data_claim(&volumes).map(str::to_owned)
}

/// Why a PVC's requested storage is not a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("spec.resources.requests.storage is missing")]
    Missing,
    #[error(
        "spec.resources.requests.storage is the number {number}, not a quantity string (\"{number}\")"
    )]
    Number { number: String },
    #[error("spec.resources.requests.storage is {found}, not a quantity string")]
    NotText { found: &'static str },
    #[error("spec.resources.requests.storage: {source}")]
    Quantity { source: QuantityError },
}

/// A PVC's requested storage in bytes, read from its JSON.
pub fn requested_size(pvc: &Value) -> Result<u128, SizeError> {
    match pvc.pointer("/spec/resources/requests/storage") {
        None | Some(Value::Null) => Err(SizeError::Missing),
        Some(Value::String(q)) => {
            quantity::bytes(q).map_err(|source| SizeError::Quantity { source })
        }
        Some(Value::Number(n)) => Err(SizeError::Number {
            number: n.to_string(),
        }),
        Some(other) => Err(SizeError::NotText {
            found: json_kind(other),
        }),
    }
}

/// `planetscale.com/cluster=…,keyspace=…,shard=…` of the shard's tablet objects.
pub fn tablet_selector(s: &ShardRef) -> String {
    format!(
        "{}={},{}={},{}={},{}={}",
        labels::COMPONENT,
        labels::COMPONENT_VTTABLET,
        labels::CLUSTER,
        s.cluster,
        labels::KEYSPACE,
        s.keyspace,
        labels::SHARD,
        s.shard.safe_name()
    )
}

/// What a throwaway restore (a drill, a recovery) takes of a tablet's data PVC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabletPvc {
    /// `spec.resources.requests.storage`, in bytes.
    pub requested: Result<u128, SizeError>,
    /// `spec.storageClassName` (`None`: the cluster's default).
    pub storage_class: Option<String>,
}

impl TabletPvc {
    pub fn read(pvc: &Value) -> Self {
        Self {
            requested: requested_size(pvc),
            storage_class: pvc
                .pointer("/spec/storageClassName")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }
}

/// A field of the tablet Pod that does not read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TabletPodUnreadable {
    #[error("spec.securityContext is not a Pod's security context: {0}")]
    SecurityContext(String),
}

/// What a throwaway restore takes of a tablet's Pod.
#[derive(Debug, Clone, PartialEq)]
pub struct TabletPod {
    /// The image of its `mysqld` container, if it has one with an image.
    pub mysqld_image: Option<String>,
    /// Its `securityContext` (the data's owner); `Ok(None)`: none, or not an object.
    pub security: Result<Option<PodSecurityContext>, TabletPodUnreadable>,
}

impl TabletPod {
    pub fn read(pod: &Value) -> Self {
        let mysqld_image = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter().find(|c| {
                    c.get("name").and_then(Value::as_str) == Some(labels::MYSQLD_CONTAINER)
                })
            })
            .and_then(|c| c.get("image"))
            .and_then(Value::as_str)
            .filter(|i| !i.is_empty())
            .map(str::to_owned);
        let security = match pod
            .pointer("/spec/securityContext")
            .filter(|v| v.is_object())
        {
            None => Ok(None),
            Some(s) => serde_json::from_value(s.clone())
                .map(Some)
                .map_err(|e| TabletPodUnreadable::SecurityContext(e.to_string())),
        };
        Self {
            mysqld_image,
            security,
        }
    }
}

/// Which of the shard's tablet Pods a throwaway restore takes its shape from: the first
/// by name that has a data PVC. One rule for the API and for a dump.
pub fn shape_tablet<'a>(pods: impl IntoIterator<Item = &'a Value>) -> Option<&'a Value> {
    pods.into_iter()
        .filter(|p| data_claim_of(p).is_some())
        .min_by_key(|p| p.pointer("/metadata/name").and_then(Value::as_str))
}

/// The tablet a throwaway restore takes its shape from, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct TabletShape {
    pub pod: TabletPod,
    /// Its data PVC's name, and the PVC (`None`: not found).
    pub claim: String,
    pub pvc: Option<TabletPvc>,
}

/// A read of the shard's tablets that failed: what was being read, and why.
#[derive(Debug, thiserror::Error)]
#[error("reading {reading}: {source}")]
pub struct TabletReadError {
    pub reading: &'static str,
    #[source]
    pub source: kube::Error,
}

/// [`shape_tablet`] of the shard's tablet Pods and its data PVC, from the API; `None`
/// when no tablet Pod of the shard has a data PVC.
pub async fn read_shape_tablet(
    kube: &kube::Client,
    shard: &ShardRef,
) -> Result<Option<TabletShape>, TabletReadError> {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
    use kube::api::{Api, ListParams};
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &shard.namespace);
    let listed = crate::reconcile::list::all(
        &pods,
        &ListParams::default().labels(&tablet_selector(shard)),
    )
    .await
    .map_err(|source| TabletReadError {
        reading: "the shard's tablet Pods",
        source,
    })?;
    let pods: Vec<Value> = listed
        .into_iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .collect();
    let Some(tablet) = shape_tablet(&pods) else {
        return Ok(None);
    };
    let claim = data_claim_of(tablet).unwrap_or_default();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), &shard.namespace);
    let pvc = pvcs
        .get_opt(&claim)
        .await
        .map_err(|source| TabletReadError {
            reading: "the tablet's data PVC",
            source,
        })?
        .and_then(|p| serde_json::to_value(p).ok())
        .map(|p| TabletPvc::read(&p));
    Ok(Some(TabletShape {
        pod: TabletPod::read(tablet),
        claim,
        pvc,
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_shape_comes_from_the_first_tablet_by_name_with_a_data_pvc() {
        let pod = |name: &str, claim: Option<&str>| {
            let volumes: Vec<Value> = claim
                .map(|c| json!({"name": labels::DATA_VOLUME, "persistentVolumeClaim": {"claimName": c}}))
                .into_iter()
                .collect();
            json!({"metadata": {"name": name}, "spec": {"volumes": volumes}})
        };
        let pods = [
            pod("t-3", Some("pvc-3")),
            pod("t-1", None),
            pod("t-2", Some("pvc-2")),
        ];
        let chosen = shape_tablet(&pods).unwrap();
        assert_eq!(chosen["metadata"]["name"], "t-2");
        assert!(shape_tablet(&[pod("t-1", None)]).is_none());
        assert!(shape_tablet(&[]).is_none());
    }

    fn pvc(storage: Value) -> Value {
        json!({"spec": {"resources": {"requests": {"storage": storage}}}})
    }

    #[test]
    fn a_requested_size_reads_as_bytes_or_says_what_it_is() {
        assert_eq!(requested_size(&pvc(json!("2Gi"))), Ok(2 << 30));
        for (storage, want) in [
            (
                json!(5),
                "spec.resources.requests.storage is the number 5, not a quantity string (\"5\")",
            ),
            (
                json!(["1Gi"]),
                "spec.resources.requests.storage is a list, not a quantity string",
            ),
            (
                json!({"a": 1}),
                "spec.resources.requests.storage is an object, not a quantity string",
            ),
            (json!(null), "spec.resources.requests.storage is missing"),
        ] {
            assert_eq!(requested_size(&pvc(storage)).unwrap_err().to_string(), want);
        }
        assert_eq!(
            requested_size(&json!({"spec": {}})),
            Err(SizeError::Missing)
        );
        assert!(matches!(
            requested_size(&pvc(json!("much"))),
            Err(SizeError::Quantity { .. })
        ));
    }

    #[test]
    fn a_pods_data_claim_is_its_data_volumes_claim() {
        let pod = json!({"spec": {"volumes": [
            {"name": "other", "persistentVolumeClaim": {"claimName": "not-this"}},
            {"name": labels::DATA_VOLUME, "persistentVolumeClaim": {"claimName": "data-1"}},
        ]}});
        assert_eq!(data_claim_of(&pod).as_deref(), Some("data-1"));
        assert_eq!(data_claim_of(&json!({"spec": {}})), None);
        assert_eq!(
            data_claim_of(&json!({"spec": {"volumes": [{"name": 7}]}})),
            None,
            "volumes that do not read"
        );
        let no_claim =
            json!({"spec": {"volumes": [{"name": labels::DATA_VOLUME, "emptyDir": {}}]}});
        assert_eq!(data_claim_of(&no_claim), None);
    }
}
