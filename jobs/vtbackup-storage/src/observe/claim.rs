//! A PVC spec read as far as matching one against a template goes ([`crate::decide::effective`]):
//! the fields Kubernetes fills in after creation read apart, everything else kept as its
//! canonical JSON text, compared as written.

use std::collections::BTreeMap;

use serde_json::Value;
use vtsnap_core::config::pvc_spec::json_kind;
use vtsnap_core::quantity;
use vtsnap_core::vtbackup::canonical;

/// The PV controller's mark on a claim it bound itself.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";

/// A spec's `storageClassName` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassField {
    /// Absent or null: the template names no class.
    Unset,
    Named(String),
    /// Anything else, as JSON.
    NotAString(String),
}

impl ClassField {
    /// The class, when it is a string.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Named(n) => Some(n),
            Self::Unset | Self::NotAString(_) => None,
        }
    }
}

/// A PVC spec (a claim's `spec`, or a template).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimSpec {
    pub storage_class: ClassField,
    /// `volumeMode`; absent or not a string: `Filesystem`, the default.
    pub volume_mode: String,
    /// `volumeName`, when a string.
    pub volume_name: Option<String>,
    /// `resources.requests.storage` in bytes (`Ok(None)`: absent), or why it does not read.
    pub size: Result<Option<u128>, String>,
    /// `dataSourceRef`, canonical JSON (absent or null: `None`).
    pub data_source_ref: Option<String>,
    /// `dataSource`, canonical JSON (absent or null: `None`).
    pub data_source: Option<String>,
    /// Every other field, canonical JSON by key (nulls left out; `resources` without its
    /// storage request): compared as written.
    pub rest: BTreeMap<String, String>,
}

/// Kubernetes' fields read apart; the rest is compared as written.
const READ_APART: [&str; 4] = [
    "storageClassName",
    "volumeMode",
    "volumeName",
    "dataSourceRef",
];

fn field<'a>(spec: &'a Value, key: &str) -> Option<&'a Value> {
    spec.get(key).filter(|v| !v.is_null())
}

impl ClaimSpec {
    /// Reads `spec` (not an object: every field absent).
    pub fn read(spec: &Value) -> Self {
        let text = |key: &str| field(spec, key).and_then(Value::as_str).map(str::to_owned);
        let json = |key: &str| field(spec, key).map(|v| canonical(v).to_string());
        let storage_class = match field(spec, "storageClassName") {
            None => ClassField::Unset,
            Some(Value::String(s)) => ClassField::Named(s.clone()),
            Some(other) => ClassField::NotAString(other.to_string()),
        };
        let size = spec
            .pointer("/resources/requests/storage")
            .filter(|v| !v.is_null())
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| {
                        format!(
                            "resources.requests.storage is {} where a quantity string (such as \"10Gi\") is expected",
                            json_kind(v)
                        )
                    })
                    .and_then(|q| quantity::bytes(q).map_err(|e| e.to_string()))
            })
            .transpose();
        let mut rest = spec.as_object().cloned().unwrap_or_default();
        for k in READ_APART {
            rest.remove(k);
        }
        if let Some(Value::Object(r)) = rest.get_mut("resources")
            && let Some(Value::Object(req)) = r.get_mut("requests")
        {
            req.remove("storage");
        }
        Self {
            volume_mode: text("volumeMode").unwrap_or_else(|| "Filesystem".to_owned()),
            volume_name: text("volumeName"),
            data_source_ref: json("dataSourceRef"),
            data_source: json("dataSource"),
            rest: rest
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), canonical(v).to_string()))
                .collect(),
            storage_class,
            size,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn kubernetes_fields_are_read_apart_and_the_rest_kept_as_written() {
        let c = ClaimSpec::read(&json!({
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}, "limits": null},
            "storageClassName": 3, "volumeMode": null, "selector": null,
            "dataSource": {"name": "s", "kind": "VolumeSnapshot"}}));
        assert_eq!(c.storage_class, ClassField::NotAString("3".into()));
        assert_eq!(c.volume_mode, "Filesystem");
        assert_eq!(c.size, Ok(Some(10 << 30)));
        assert_eq!(c.data_source_ref, None);
        assert_eq!(
            c.data_source.as_deref(),
            Some(r#"{"kind":"VolumeSnapshot","name":"s"}"#)
        );
        assert_eq!(
            c.rest,
            BTreeMap::from([
                ("accessModes".to_owned(), r#"["ReadWriteOnce"]"#.to_owned()),
                (
                    "dataSource".to_owned(),
                    r#"{"kind":"VolumeSnapshot","name":"s"}"#.to_owned()
                ),
                ("resources".to_owned(), r#"{"requests":{}}"#.to_owned()),
            ])
        );
        assert_eq!(ClaimSpec::read(&json!("not a spec")).rest, BTreeMap::new());
    }
}
