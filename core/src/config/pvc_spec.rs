//! A PersistentVolumeClaim spec, strictly: the fields Kubernetes has
//! (`k8s.io/api/core/v1` `PersistentVolumeClaimSpec`), unknown keys refused. The API server
//! would refuse a bad spec only when the operator creates a PVC from it, long after the
//! config was loaded: then no backup gets a PVC.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::k8s_names;
use crate::quantity;

/// What the spec is for: scratch storage must start empty, so a data source (a volume
/// filled from a snapshot or another claim) is refused there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `vtbackup.dataVolumeClaimTemplate`: vtbackup's data directory must start empty.
    Scratch,
    /// A template vtsnap did not write (a tablet pool's): as Kubernetes takes it.
    AsKubernetesTakesIt,
}

// Kubernetes' own names, prefix and all.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Deserialize)]
enum AccessMode {
    ReadWriteOnce,
    ReadOnlyMany,
    ReadWriteMany,
    ReadWriteOncePod,
}

#[derive(Debug, Deserialize)]
enum VolumeMode {
    Filesystem,
    Block,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Requests {
    storage: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Resources {
    requests: Option<Requests>,
    limits: Option<Requests>,
}

#[derive(Debug, Deserialize)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Requirement {
    key: String,
    operator: Operator,
    values: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Selector {
    match_labels: Option<BTreeMap<String, String>>,
    match_expressions: Option<Vec<Requirement>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    access_modes: Option<Vec<AccessMode>>,
    resources: Option<Resources>,
    storage_class_name: Option<String>,
    /// Read for its check only (Filesystem or Block).
    #[serde(rename = "volumeMode")]
    _volume_mode: Option<VolumeMode>,
    selector: Option<Selector>,
    volume_name: Option<String>,
    volume_attributes_class_name: Option<String>,
    data_source: Option<Value>,
    data_source_ref: Option<Value>,
}

/// One problem: the path below the spec (`resources.requests.storage`, empty for the spec
/// itself) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

fn problem(path: &str, message: impl Into<String>) -> Problem {
    Problem {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// Every problem of `spec` as a PVC spec for `purpose` (none: it is one).
pub fn problems(spec: &Value, purpose: Purpose) -> Vec<Problem> {
    if !spec.is_object() {
        return vec![problem(
            "",
            format!(
                "is {}, not a PersistentVolumeClaim spec (a mapping)",
                json_kind(spec)
            ),
        )];
    }
    let parsed: Spec = match serde_path_to_error::deserialize(spec) {
        Ok(s) => s,
        Err(e) => return vec![parse_problem(&e)],
    };
    let mut found = Vec::new();
    match parsed
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.storage.as_deref())
    {
        None => found.push(problem(
            "resources.requests.storage",
            "is required: the size of the volume (e.g. 10Gi)",
        )),
        Some(q) => size(&mut found, "resources.requests.storage", q),
    }
    if let Some(q) = parsed
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|r| r.storage.as_deref())
    {
        size(&mut found, "resources.limits.storage", q);
    }
    if parsed.access_modes.as_ref().is_some_and(Vec::is_empty) {
        found.push(problem(
            "accessModes",
            "is empty: name at least one (ReadWriteOnce for a scratch volume)",
        ));
    }
    for (field, name) in [
        ("storageClassName", &parsed.storage_class_name),
        (
            "volumeAttributesClassName",
            &parsed.volume_attributes_class_name,
        ),
        ("volumeName", &parsed.volume_name),
    ] {
        // An empty storageClassName is Kubernetes' "no class at all".
        if let Some(n) = name.as_deref().filter(|n| !n.is_empty())
            && let Err(why) = k8s_names::dns_subdomain(n)
        {
            found.push(problem(
                field,
                format!("{n:?} is not an object name: {why}"),
            ));
        }
    }
    if let Some(s) = &parsed.selector {
        for k in s.match_labels.iter().flat_map(BTreeMap::keys) {
            if let Err(why) = k8s_names::qualified_name(k) {
                found.push(problem(
                    "selector.matchLabels",
                    format!("key {k:?} is not a label key: {why}"),
                ));
            }
        }
        for (i, r) in s.match_expressions.iter().flatten().enumerate() {
            let has_values = r.values.as_ref().is_some_and(|v| !v.is_empty());
            let wants_values = matches!(r.operator, Operator::In | Operator::NotIn);
            if has_values != wants_values {
                found.push(problem(
                    &format!("selector.matchExpressions[{i}].values"),
                    if wants_values {
                        "must name at least one value for In and NotIn"
                    } else {
                        "must be empty for Exists and DoesNotExist"
                    },
                ));
            }
            if let Err(why) = k8s_names::qualified_name(&r.key) {
                found.push(problem(
                    &format!("selector.matchExpressions[{i}].key"),
                    format!("{:?} is not a label key: {why}", r.key),
                ));
            }
        }
    }
    if purpose == Purpose::Scratch {
        for (field, v) in [
            ("dataSource", &parsed.data_source),
            ("dataSourceRef", &parsed.data_source_ref),
        ] {
            if v.as_ref().is_some_and(|v| !v.is_null()) {
                found.push(problem(
                    field,
                    "is refused: vtbackup's scratch volume must start empty, not filled from another volume",
                ));
            }
        }
    }
    found
}

fn size(found: &mut Vec<Problem>, path: &str, q: &str) {
    match quantity::bytes(q) {
        Ok(0) => found.push(problem(
            path,
            format!("{q:?} is zero: a volume needs a size"),
        )),
        Ok(_) => {}
        Err(e) => found.push(problem(path, e.to_string())),
    }
}

/// What a JSON value is, for messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A serde error as a path and a message that names what is wrong.
fn parse_problem(e: &serde_path_to_error::Error<serde_json::Error>) -> Problem {
    let path = e.path().to_string();
    let path = if path == "." { String::new() } else { path };
    let message = e.inner().to_string();
    let message = match unknown_field(&message) {
        // The size written where the spec's other fields are.
        Some(_) if path == "storage" => {
            "unknown field, did you mean resources.requests.storage?".to_owned()
        }
        Some((_, Some(near))) => format!("unknown field, did you mean {near}?"),
        // Every struct here has fields, so serde always lists them.
        Some((expected, None)) => {
            format!("unknown field (the fields are {})", expected.join(", "))
        }
        None => message,
    };
    Problem { path, message }
}

/// The candidates of serde's "unknown field `x`, expected one of `a`, `b`" and the one
/// nearest `x`, if any is near.
fn unknown_field(message: &str) -> Option<(Vec<String>, Option<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected: Vec<String> = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    let near = expected
        .iter()
        .map(|c| (distance(&field.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, c)| {
            *d <= 2 || c.to_lowercase().starts_with(&field.to_lowercase()) && field.len() >= 4
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.clone());
    Some((expected, near))
}

/// Levenshtein distance, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(spec: Value) -> Vec<String> {
        problems(&spec, Purpose::Scratch)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_full_spec_with_every_field_kubernetes_has_passes() {
        let spec = json!({
            "accessModes": ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"],
            "resources": {"requests": {"storage": "10Gi"}, "limits": {"storage": "20Gi"}},
            "storageClassName": "fast-ssd", "volumeMode": "Block", "volumeName": "pv-1",
            "volumeAttributesClassName": "gold",
            "selector": {"matchLabels": {"vtsnap.io/placeholder": "never"},
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                     {"key": "tier", "operator": "Exists"}]},
        });
        assert_eq!(messages(spec), Vec::<String>::new());
        assert_eq!(
            messages(crate::vtbackup::placeholder_spec()),
            Vec::<String>::new()
        );
        // Kubernetes' "no class at all", and nulls, are fine.
        assert_eq!(
            messages(
                json!({"resources": {"requests": {"storage": "1"}}, "storageClassName": "", "volumeMode": null})
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn distance_is_levenshteins() {
        for (a, b, d) in [
            ("kitten", "sitting", 3),
            ("flaw", "lawn", 2),
            ("", "abc", 3),
            ("abc", "", 3),
            ("abc", "ab", 1),
            ("ab", "abc", 1),
            ("ab", "ba", 2),
            ("storageclass", "storageclassname", 4),
        ] {
            assert_eq!(distance(a, b), d, "{a:?} to {b:?}");
        }
    }

    #[test]
    fn the_probes_inputs_are_refused_by_path() {
        assert_eq!(
            messages(json!({})),
            ["resources.requests.storage: is required: the size of the volume (e.g. 10Gi)"]
        );
        assert_eq!(
            messages(json!({"resources": {"requests": {"storage": "abc"}}})),
            [
                "resources.requests.storage: \"abc\" is not a quantity (digits, then a suffix such as Gi or G)"
            ]
        );
        assert_eq!(
            messages(json!({"storage": "10Gi"})),
            ["storage: unknown field, did you mean resources.requests.storage?"]
        );
        assert_eq!(
            messages(
                json!({"storageClass": "fast", "resources": {"requests": {"storage": "1Gi"}}})
            ),
            ["storageClass: unknown field, did you mean storageClassName?"]
        );
        // Near no field: every field is listed.
        assert_eq!(
            messages(json!({"zzz": 1, "resources": {"requests": {"storage": "1Gi"}}})),
            [
                "zzz: unknown field (the fields are accessModes, resources, storageClassName, volumeMode, selector, volumeName, volumeAttributesClassName, dataSource, dataSourceRef)"
            ]
        );
        let bogus = messages(
            json!({"accessModes": ["ReadWriteSometimes"], "resources": {"requests": {"storage": "1Gi"}}}),
        );
        assert_eq!(bogus.len(), 1);
        assert!(
            bogus[0].starts_with("accessModes[0]: unknown variant `ReadWriteSometimes`"),
            "{bogus:?}"
        );
        assert_eq!(
            messages(json!("10Gi")),
            ["is a string, not a PersistentVolumeClaim spec (a mapping)"]
        );
    }

    #[test]
    fn every_value_is_checked_and_each_problem_named() {
        let m = messages(json!({
            "accessModes": [],
            "resources": {"requests": {"storage": "0"}, "limits": {"storage": "-1Gi"}},
            "storageClassName": "Fast_SSD", "volumeAttributesClassName": "a b", "volumeName": "PV",
            "selector": {"matchLabels": {"bad key!": "x"},
                "matchExpressions": [{"key": "zone", "operator": "In"},
                                     {"key": "-", "operator": "Exists", "values": ["x"]}]},
            "dataSource": {"kind": "VolumeSnapshot", "name": "s"},
            "dataSourceRef": {"kind": "VolumeSnapshot", "name": "s"},
        }));
        let paths: Vec<&str> = m.iter().map(|l| l.split(':').next().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "resources.requests.storage",
                "resources.limits.storage",
                "accessModes",
                "storageClassName",
                "volumeAttributesClassName",
                "volumeName",
                "selector.matchLabels",
                "selector.matchExpressions[0].values",
                "selector.matchExpressions[1].values",
                "selector.matchExpressions[1].key",
                "dataSource",
                "dataSourceRef",
            ],
            "{m:#?}"
        );
        assert!(m[0].contains("is zero"), "{m:?}");
        assert!(m[1].contains("negative"), "{m:?}");
        // A template vtsnap did not write may fill its volume from a data source.
        let sourced = json!({"resources": {"requests": {"storage": "1Gi"}}, "dataSource": {"kind": "PersistentVolumeClaim", "name": "x"}});
        assert!(problems(&sourced, Purpose::AsKubernetesTakesIt).is_empty());
        assert_eq!(problems(&sourced, Purpose::Scratch).len(), 1);
        // A null source is no source.
        assert!(
            problems(
                &json!({"resources": {"requests": {"storage": "1Gi"}}, "dataSource": null}),
                Purpose::Scratch
            )
            .is_empty()
        );
    }

    #[test]
    fn a_size_written_as_a_number_is_called_a_number() {
        let m = messages(json!({"resources": {"requests": {"storage": 10}}}));
        assert_eq!(m.len(), 1);
        assert!(
            m[0].starts_with(
                "resources.requests.storage: invalid type: integer `10`, expected a string"
            ),
            "{m:?}"
        );
        assert!(
            messages(json!({"resources": {"requests": {"cpu": "1"}}}))[0]
                .starts_with("resources.requests.cpu: unknown field")
        );
    }

    #[test]
    fn near_misses_are_suggested_and_far_ones_listed() {
        let near = |f: &str| {
            unknown_field(&format!(
                "unknown field `{f}`, expected one of `accessModes`, `storageClassName`, `volumeMode`"
            ))
            .and_then(|(_, n)| n)
        };
        assert_eq!(near("storageClass").as_deref(), Some("storageClassName"));
        assert_eq!(near("accesModes").as_deref(), Some("accessModes"));
        assert_eq!(near("VolumeMode").as_deref(), Some("volumeMode"));
        assert_eq!(near("sto"), None, "a prefix of three letters is too short");
        assert_eq!(near("stor").as_deref(), Some("storageClassName"));
        assert_eq!(near("nothingLikeIt"), None);
        assert_eq!(unknown_field("invalid type: string"), None);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("abc", "abc"), 0);
    }
}
