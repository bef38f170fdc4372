//! Whether an existing PVC already is what a template asks for, counting what Kubernetes
//! fills in after creation: the default StorageClass (the DefaultStorageClass admission
//! plugin, when the template names none), `volumeMode: Filesystem`, the `volumeName` the
//! PV controller binds, `dataSourceRef` mirrored from `dataSource`, and quantities written
//! another way (`10Gi` and `10737418240`). What is not a default is not excused: an
//! explicit `storageClassName: ""` (no class at all) is not the default class, and a
//! `volumeName` the user set (no `pv.kubernetes.io/bound-by-controller`) must be in the
//! template.

use serde_json::{Map, Value};
use vtsnap_core::config::pvc_spec::json_kind;
use vtsnap_core::quantity;
use vtsnap_core::vtbackup::canonical;

/// The PV controller's mark on a claim it bound itself.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";

fn field<'a>(spec: &'a Value, key: &str) -> Option<&'a Value> {
    spec.get(key).filter(|v| !v.is_null())
}

/// `Ok(())` when `pvc` (a whole object) matches `template` (a PVC spec); otherwise the first
/// difference, in words. `default_class` is the cluster's default StorageClass (`None`:
/// there is none).
pub fn pvc_matches(
    pvc: &Value,
    template: &Value,
    default_class: Option<&str>,
) -> Result<(), String> {
    let empty = Value::Object(Map::new());
    let actual = pvc.get("spec").unwrap_or(&empty);
    let bound_by_controller = pvc
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(BOUND_BY_CONTROLLER))
        .and_then(Value::as_str)
        == Some("yes");

    // storageClassName
    let a_class = field(actual, "storageClassName").and_then(Value::as_str);
    match field(template, "storageClassName") {
        Some(Value::String(want)) => {
            if a_class != Some(want.as_str()) {
                return Err(format!(
                    "storageClassName is {a_class:?}, the template asks for {want:?}"
                ));
            }
        }
        Some(other) => {
            return Err(format!(
                "the template's storageClassName is not a string: {other}"
            ));
        }
        None => {
            let filled = default_class.is_some() && a_class == default_class;
            if a_class.is_some() && !filled {
                return Err(format!(
                    "storageClassName is {a_class:?}; the template names none and the default class is {default_class:?}"
                ));
            }
        }
    }
    // volumeMode: Filesystem is the default.
    let mode = |s: &Value| {
        field(s, "volumeMode")
            .and_then(Value::as_str)
            .unwrap_or("Filesystem")
            .to_owned()
    };
    if mode(actual) != mode(template) {
        return Err(format!(
            "volumeMode is {}, the template asks for {}",
            mode(actual),
            mode(template)
        ));
    }
    // volumeName: the template's, or one the PV controller bound.
    let a_volume = field(actual, "volumeName").and_then(Value::as_str);
    match field(template, "volumeName").and_then(Value::as_str) {
        Some(want) if a_volume != Some(want) => {
            return Err(format!(
                "volumeName is {a_volume:?}, the template asks for {want:?}"
            ));
        }
        Some(_) => {}
        None if a_volume.is_some() && !bound_by_controller => {
            return Err(format!(
                "volumeName {a_volume:?} was set by hand (not bound by the controller); the template names none"
            ));
        }
        None => {}
    }
    // Sizes by value.
    let size = |s: &Value| -> Result<Option<u128>, String> {
        s.pointer("/resources/requests/storage")
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
            .transpose()
    };
    let (a_size, t_size) = (size(actual)?, size(template)?);
    if a_size != t_size {
        return Err(format!(
            "the requested storage is {a_size:?} bytes, the template asks for {t_size:?}"
        ));
    }
    // dataSourceRef is filled in from dataSource.
    let a_ref = field(actual, "dataSourceRef");
    let t_ref = field(template, "dataSourceRef").or_else(|| field(template, "dataSource"));
    if canonical(a_ref.unwrap_or(&Value::Null)) != canonical(t_ref.unwrap_or(&Value::Null)) {
        return Err("dataSourceRef differs from the template's".into());
    }
    // Everything else as written.
    let rest = |s: &Value| {
        let mut m = s.as_object().cloned().unwrap_or_default();
        for k in [
            "storageClassName",
            "volumeMode",
            "volumeName",
            "dataSourceRef",
        ] {
            m.remove(k);
        }
        if let Some(Value::Object(r)) = m.get_mut("resources")
            && let Some(Value::Object(req)) = r.get_mut("requests")
        {
            req.remove("storage");
        }
        canonical(&Value::Object(m))
    };
    let (a, t) = (rest(actual), rest(template));
    if a != t {
        let keys: Vec<&String> = a
            .as_object()
            .into_iter()
            .chain(t.as_object())
            .flat_map(|m| m.keys())
            .filter(|k| a.get(k.as_str()) != t.get(k.as_str()))
            .collect();
        return Err(format!(
            "{} differ from the template",
            keys.first().map_or("fields", |k| k.as_str())
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pvc(spec: Value, bound_by_controller: bool) -> Value {
        let mut p = json!({"metadata": {"name": "p", "annotations": {}}, "spec": spec});
        if bound_by_controller {
            p["metadata"]["annotations"][BOUND_BY_CONTROLLER] = json!("yes");
        }
        p
    }

    fn template() -> Value {
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}})
    }

    #[test]
    fn the_defaults_kubernetes_fills_in_count_as_matching() {
        let defaulted = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10737418240"}},
                   "storageClassName": "standard", "volumeMode": "Filesystem", "volumeName": "pvc-1234"}),
            true,
        );
        assert_eq!(
            pvc_matches(&defaulted, &template(), Some("standard")),
            Ok(())
        );
        // dataSourceRef mirrored from dataSource.
        let mut t = template();
        t["dataSource"] =
            json!({"kind": "VolumeSnapshot", "name": "s", "apiGroup": "snapshot.storage.k8s.io"});
        let mut a = t.clone();
        a["dataSourceRef"] = t["dataSource"].clone();
        assert_eq!(pvc_matches(&pvc(a, false), &t, None), Ok(()));
    }

    #[test]
    fn what_is_not_a_default_is_a_difference() {
        // Another class than the default, or no default class at all.
        let other = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "storageClassName": "fast"}),
            false,
        );
        assert!(
            pvc_matches(&other, &template(), Some("standard"))
                .unwrap_err()
                .contains("storageClassName")
        );
        let filled = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "storageClassName": "standard"}),
            false,
        );
        assert!(
            pvc_matches(&filled, &template(), None).is_err(),
            "no default class: a class was chosen"
        );
        // An explicit empty class is not the default class, either way round.
        let mut none = template();
        none["storageClassName"] = json!("");
        assert!(pvc_matches(&filled, &none, Some("standard")).is_err());
        let empty = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "storageClassName": ""}),
            false,
        );
        assert_eq!(pvc_matches(&empty, &none, Some("standard")), Ok(()));
        assert!(pvc_matches(&empty, &template(), Some("standard")).is_err());
        // A volume the user prebound is not the controller's.
        let prebound = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "volumeName": "pv-mine"}),
            false,
        );
        assert!(
            pvc_matches(&prebound, &template(), None)
                .unwrap_err()
                .contains("set by hand")
        );
        let mut t = template();
        t["volumeName"] = json!("pv-mine");
        assert_eq!(pvc_matches(&prebound, &t, None), Ok(()));
        t["volumeName"] = json!("pv-other");
        assert!(pvc_matches(&prebound, &t, None).is_err());
        // Size, mode, access modes, selector.
        let bigger = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "11Gi"}}}),
            false,
        );
        assert!(
            pvc_matches(&bigger, &template(), None)
                .unwrap_err()
                .contains("requested storage")
        );
        let block = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "volumeMode": "Block"}),
            false,
        );
        assert!(
            pvc_matches(&block, &template(), None)
                .unwrap_err()
                .contains("volumeMode")
        );
        let rwx = pvc(
            json!({"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}}),
            false,
        );
        assert!(
            pvc_matches(&rwx, &template(), None)
                .unwrap_err()
                .contains("accessModes")
        );
        let unreadable = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "lots"}}}),
            false,
        );
        assert!(pvc_matches(&unreadable, &template(), None).is_err());
        // A size written as a JSON number is called one, not missing.
        let number = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": 10_737_418_240_u64}}}),
            false,
        );
        assert_eq!(
            pvc_matches(&number, &template(), None),
            Err("resources.requests.storage is a number where a quantity string (such as \"10Gi\") is expected".to_owned())
        );
        let mut t = template();
        t["storageClassName"] = json!(3);
        assert!(
            pvc_matches(&bigger, &t, None)
                .unwrap_err()
                .contains("not a string")
        );
        let with_ref = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
            "dataSourceRef": {"kind": "VolumeSnapshot", "name": "s"}}),
            false,
        );
        assert!(
            pvc_matches(&with_ref, &template(), None)
                .unwrap_err()
                .contains("dataSourceRef")
        );
    }
}
