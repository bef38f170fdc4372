//! Whether an existing PVC already is what a template asks for, counting what Kubernetes
//! fills in after creation: the default StorageClass (the DefaultStorageClass admission
//! plugin, when the template names none), `volumeMode: Filesystem`, the `volumeName` the
//! PV controller binds, `dataSourceRef` mirrored from `dataSource`, and quantities written
//! another way (`10Gi` and `10737418240`). What is not a default is not excused: an
//! explicit `storageClassName: ""` (no class at all) is not the default class, and a
//! `volumeName` the user set (no `pv.kubernetes.io/bound-by-controller`) must be in the
//! template.

use crate::observe::{BoundBy, ClaimSpec, ClassField};

/// `Ok(())` when a PVC's spec `actual` (its volume bound as `bound_by` says) matches
/// `template`; otherwise the first difference, in words. `default_class` is the cluster's
/// default StorageClass (`None`: there is none).
pub fn pvc_matches(
    actual: &ClaimSpec,
    bound_by: BoundBy,
    template: &ClaimSpec,
    default_class: Option<&str>,
) -> Result<(), String> {
    // storageClassName
    let a_class = actual.storage_class.name();
    match &template.storage_class {
        ClassField::Named(want) => {
            if a_class != Some(want.as_str()) {
                return Err(format!(
                    "storageClassName is {a_class:?}, the template asks for {want:?}"
                ));
            }
        }
        ClassField::NotAString(other) => {
            return Err(format!(
                "the template's storageClassName is not a string: {other}"
            ));
        }
        ClassField::Unset => {
            let filled = default_class.is_some() && a_class == default_class;
            if a_class.is_some() && !filled {
                return Err(format!(
                    "storageClassName is {a_class:?}; the template names none and the default class is {default_class:?}"
                ));
            }
        }
    }
    // volumeMode: Filesystem is the default.
    if actual.volume_mode != template.volume_mode {
        return Err(format!(
            "volumeMode is {}, the template asks for {}",
            actual.volume_mode, template.volume_mode
        ));
    }
    // volumeName: the template's, or one the PV controller bound.
    let a_volume = actual.volume_name.as_deref();
    match template.volume_name.as_deref() {
        Some(want) if a_volume != Some(want) => {
            return Err(format!(
                "volumeName is {a_volume:?}, the template asks for {want:?}"
            ));
        }
        Some(_) => {}
        None if a_volume.is_some() && bound_by != BoundBy::Controller => {
            return Err(format!(
                "volumeName {a_volume:?} was set by hand (not bound by the controller); the template names none"
            ));
        }
        None => {}
    }
    // Sizes by value.
    let (a_size, t_size) = (actual.size.clone()?, template.size.clone()?);
    if a_size != t_size {
        return Err(format!(
            "the requested storage is {a_size:?} bytes, the template asks for {t_size:?}"
        ));
    }
    // dataSourceRef is filled in from dataSource.
    let t_ref = template
        .data_source_ref
        .as_ref()
        .or(template.data_source.as_ref());
    if actual.data_source_ref.as_ref() != t_ref {
        return Err("dataSourceRef differs from the template's".into());
    }
    // Everything else as written.
    let (a, t) = (&actual.rest, &template.rest);
    if a != t {
        let first = a
            .keys()
            .chain(t.keys())
            .find(|k| a.get(k.as_str()) != t.get(k.as_str()));
        return Err(format!(
            "{} differ from the template",
            first.map_or("fields", String::as_str)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::observe::{BOUND_BY_CONTROLLER, PvcState};

    /// A PVC of this spec, bound by the PV controller or not, as read.
    fn pvc(spec: Value, bound_by_controller: bool) -> PvcState {
        let mut p = json!({"metadata": {"name": "p", "uid": "u", "annotations": {}}, "spec": spec});
        if bound_by_controller {
            p["metadata"]["annotations"][BOUND_BY_CONTROLLER] = json!("yes");
        }
        PvcState::read(&p).unwrap()
    }

    fn template() -> Value {
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}})
    }

    /// [`pvc_matches`] of a PVC and a template as read.
    fn matches(
        pvc: &PvcState,
        template: &Value,
        default_class: Option<&str>,
    ) -> Result<(), String> {
        pvc_matches(
            &pvc.spec,
            pvc.bound_by,
            &ClaimSpec::read(template),
            default_class,
        )
    }

    #[test]
    fn the_defaults_kubernetes_fills_in_count_as_matching() {
        let defaulted = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10737418240"}},
                   "storageClassName": "standard", "volumeMode": "Filesystem", "volumeName": "pvc-1234"}),
            true,
        );
        assert_eq!(matches(&defaulted, &template(), Some("standard")), Ok(()));
        // dataSourceRef mirrored from dataSource.
        let mut t = template();
        t["dataSource"] =
            json!({"kind": "VolumeSnapshot", "name": "s", "apiGroup": "snapshot.storage.k8s.io"});
        let mut a = t.clone();
        a["dataSourceRef"] = t["dataSource"].clone();
        assert_eq!(matches(&pvc(a, false), &t, None), Ok(()));
    }

    #[test]
    fn what_is_not_a_default_is_a_difference() {
        // Another class than the default, or no default class at all.
        let other = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "storageClassName": "fast"}),
            false,
        );
        assert!(
            matches(&other, &template(), Some("standard"))
                .unwrap_err()
                .contains("storageClassName")
        );
        let filled = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "storageClassName": "standard"}),
            false,
        );
        assert!(
            matches(&filled, &template(), None).is_err(),
            "no default class: a class was chosen"
        );
        // An explicit empty class is not the default class, either way round.
        let mut none = template();
        none["storageClassName"] = json!("");
        assert!(matches(&filled, &none, Some("standard")).is_err());
        let empty = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "storageClassName": ""}),
            false,
        );
        assert_eq!(matches(&empty, &none, Some("standard")), Ok(()));
        assert!(matches(&empty, &template(), Some("standard")).is_err());
        // A volume the user prebound is not the controller's.
        let prebound = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "volumeName": "pv-mine"}),
            false,
        );
        assert!(
            matches(&prebound, &template(), None)
                .unwrap_err()
                .contains("set by hand")
        );
        let mut t = template();
        t["volumeName"] = json!("pv-mine");
        assert_eq!(matches(&prebound, &t, None), Ok(()));
        t["volumeName"] = json!("pv-other");
        assert!(matches(&prebound, &t, None).is_err());
        // Size, mode, access modes, selector.
        let bigger = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "11Gi"}}}),
            false,
        );
        assert!(
            matches(&bigger, &template(), None)
                .unwrap_err()
                .contains("requested storage")
        );
        let block = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}, "volumeMode": "Block"}),
            false,
        );
        assert!(
            matches(&block, &template(), None)
                .unwrap_err()
                .contains("volumeMode")
        );
        let rwx = pvc(
            json!({"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}}),
            false,
        );
        assert!(
            matches(&rwx, &template(), None)
                .unwrap_err()
                .contains("accessModes")
        );
        let unreadable = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "lots"}}}),
            false,
        );
        assert!(matches(&unreadable, &template(), None).is_err());
        // A size written as a JSON number is called one, not missing.
        let number = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": 10_737_418_240_u64}}}),
            false,
        );
        assert_eq!(
            matches(&number, &template(), None),
            Err("resources.requests.storage is a number where a quantity string (such as \"10Gi\") is expected".to_owned())
        );
        let mut t = template();
        t["storageClassName"] = json!(3);
        assert!(
            matches(&bigger, &t, None)
                .unwrap_err()
                .contains("not a string")
        );
        let with_ref = pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
            "dataSourceRef": {"kind": "VolumeSnapshot", "name": "s"}}),
            false,
        );
        assert!(
            matches(&with_ref, &template(), None)
                .unwrap_err()
                .contains("dataSourceRef")
        );
    }
}
