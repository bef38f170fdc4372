//! A tablet's data volume as its Pod and PVC name it, read where the admission webhook and
//! the drill read them: the claim the Pod's data volume names (vitess-operator's
//! `persistent-volume-claim`), and the storage the PVC requests, read from its JSON so that
//! a size of the wrong type is named rather than lost in a parse error.

use k8s_openapi::api::core::v1::Volume;
use serde::Deserialize;
use serde_json::Value;

use crate::k8s_names::json_kind;
use crate::labels;
use crate::quantity::{self, QuantityError};

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
