//! What vtsnap reads of a VitessCluster's spec: the shards it defines (for `whenScaled`)
//! and each shard's template (its first tablet pool's `dataVolumeClaimTemplate` is what
//! vtbackup Pods inherit: vitess-operator `pkg/operator/vttablet/vtbackup_pod.go`).
//!
//! Equal partitionings follow vitess-operator `pkg/operator/partitioning/partitioning.go`
//! (`EqualKeyRanges`): `interval = (2^64 - parts) / parts + 1`, cut points `(i+1)·interval`
//! big-endian, truncated to the bytes needed to count `parts - 1`.

use std::collections::BTreeSet;

use serde_json::Value;

/// The shard names (`-80`, `80-`, `-` …) of `parts` equal parts.
pub fn equal_shards(parts: u64) -> Vec<String> {
    if parts <= 1 {
        return vec!["-".into()];
    }
    let mut num_bytes = 0;
    let mut q = parts - 1;
    while q != 0 {
        num_bytes += 1;
        q >>= 8;
    }
    let interval = (u64::MAX - parts + 1) / parts + 1;
    let mut out = Vec::with_capacity(usize::try_from(parts).unwrap_or(0));
    let mut start = String::new();
    for i in 0..parts {
        let end = if i < parts - 1 {
            let b = ((i + 1).wrapping_mul(interval)).to_be_bytes();
            b[..num_bytes].iter().map(|x| format!("{x:02x}")).collect()
        } else {
            String::new()
        };
        out.push(format!("{start}-{end}"));
        start = end;
    }
    out
}

/// Why a VitessCluster's spec cannot tell its shards: the JSON path and what it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub path: String,
    pub expected: &'static str,
}

fn array<'a>(v: Option<&'a Value>, path: &str) -> Result<&'a [Value], SpecError> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(SpecError {
            path: path.to_owned(),
            expected: "a list",
        }),
    }
}

fn key_range_end(sh: &Value, path: &str, end: &str) -> Result<String, SpecError> {
    match sh.pointer(&format!("/keyRange/{end}")) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) if s.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(s.to_ascii_lowercase())
        }
        Some(_) => Err(SpecError {
            path: format!("{path}.keyRange.{end}"),
            expected: "a hex string",
        }),
    }
}

/// Every shard a VitessCluster object's spec defines: `(keyspace, shard name, its shard
/// template)`. The template is `equal.shardTemplate`, or the custom shard itself (its
/// template fields are inline: `pkg/apis/planetscale/v2/vitesskeyspace_types.go`). A field
/// of the wrong type is an error, never a shard less: a shard missed here would count as
/// removed.
pub fn shards_with_templates(cluster: &Value) -> Result<Vec<(String, String, &Value)>, SpecError> {
    let mut out = Vec::new();
    let keyspaces = array(cluster.pointer("/spec/keyspaces"), "spec.keyspaces")?;
    for (k, ks) in keyspaces.iter().enumerate() {
        let at = format!("spec.keyspaces[{k}]");
        let Some(name) = ks
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            return Err(SpecError {
                path: format!("{at}.name"),
                expected: "a non-empty string",
            });
        };
        let parts = array(ks.get("partitionings"), &format!("{at}.partitionings"))?;
        for (i, p) in parts.iter().enumerate() {
            let at = format!("{at}.partitionings[{i}]");
            match (p.get("equal"), p.get("custom")) {
                (Some(eq), None) => {
                    let n = eq.get("parts").and_then(Value::as_u64).filter(|n| *n >= 1);
                    let Some(n) = n else {
                        return Err(SpecError {
                            path: format!("{at}.equal.parts"),
                            expected: "a whole number of at least 1",
                        });
                    };
                    let template = eq.get("shardTemplate").unwrap_or(&Value::Null);
                    for s in equal_shards(n) {
                        out.push((name.to_owned(), s, template));
                    }
                }
                (None, Some(custom)) => {
                    let shards = array(custom.get("shards"), &format!("{at}.custom.shards"))?;
                    for (j, sh) in shards.iter().enumerate() {
                        let at = format!("{at}.custom.shards[{j}]");
                        let start = key_range_end(sh, &at, "start")?;
                        let end = key_range_end(sh, &at, "end")?;
                        out.push((name.to_owned(), format!("{start}-{end}"), sh));
                    }
                }
                _ => {
                    return Err(SpecError {
                        path: at,
                        expected: "exactly one of equal or custom",
                    });
                }
            }
        }
    }
    Ok(out)
}

/// `(keyspace, shard name)` pairs of a VitessCluster object's spec.
pub fn cluster_shards(cluster: &Value) -> Result<BTreeSet<(String, String)>, SpecError> {
    Ok(shards_with_templates(cluster)?
        .into_iter()
        .map(|(k, s, _)| (k, s))
        .collect())
}

/// The shard's first tablet pool (what vtbackup Pods are built from), if the spec defines
/// the shard and it has a pool. `shard` is the key range as Vitess prints it (`-80`).
pub fn first_pool<'a>(
    cluster: &'a Value,
    keyspace: &str,
    shard: &str,
) -> Result<Option<&'a Value>, SpecError> {
    Ok(shards_with_templates(cluster)?
        .into_iter()
        .find(|(k, s, _)| k == keyspace && s == shard)
        .and_then(|(_, _, t)| t.pointer("/tabletPools/0")))
}

/// The `dataVolumeClaimTemplate` of the shard's first tablet pool (what vtbackup Pods
/// inherit), if the spec defines the shard and the pool has one.
pub fn first_pool_template<'a>(
    cluster: &'a Value,
    keyspace: &str,
    shard: &str,
) -> Result<Option<&'a Value>, SpecError> {
    Ok(first_pool(cluster, keyspace, shard)?
        .and_then(|p| p.get("dataVolumeClaimTemplate"))
        .filter(|t| !t.is_null()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matches_the_operator_test_vectors() {
        // pkg/operator/partitioning/partitioning_test.go
        assert_eq!(equal_shards(1), ["-"]);
        assert_eq!(equal_shards(2), ["-80", "80-"]);
        assert_eq!(equal_shards(3), ["-55", "55-aa", "aa-"]);
        assert_eq!(equal_shards(4), ["-40", "40-80", "80-c0", "c0-"]);
        assert_eq!(equal_shards(5), ["-33", "33-66", "66-99", "99-cc", "cc-"]);
        assert_eq!(
            equal_shards(10),
            [
                "-19", "19-33", "33-4c", "4c-66", "66-7f", "7f-99", "99-b3", "b3-cc", "cc-e6",
                "e6-"
            ]
        );
        let s = equal_shards(500);
        assert_eq!((s[0].as_str(), s[499].as_str()), ("-0083", "ff7c-"));
        let s = equal_shards(65536);
        assert_eq!((s[0].as_str(), s[65535].as_str()), ("-0001", "ffff-"));
    }

    #[test]
    fn reads_equal_and_custom_partitionings() {
        let c = serde_json::json!({"spec": {"keyspaces": [
            {"name": "commerce", "partitionings": [{"equal": {"parts": 2}}]},
            {"name": "customer", "partitionings": [{"custom": {"shards": [{"keyRange": {"start": "", "end": "40"}}, {"keyRange": {"start": "40", "end": ""}}]}}]},
            {"name": "lookup", "partitionings": [{"equal": {"parts": 1}}]}
        ]}});
        let got: Vec<String> = cluster_shards(&c)
            .unwrap()
            .into_iter()
            .map(|(k, s)| format!("{k}/{s}"))
            .collect();
        assert_eq!(
            got,
            [
                "commerce/-80",
                "commerce/80-",
                "customer/-40",
                "customer/40-",
                "lookup/-"
            ]
        );
    }

    #[test]
    fn the_first_pools_template_is_found_for_equal_and_custom_shards() {
        let tmpl = |size: &str| json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}});
        let c = json!({"spec": {"keyspaces": [
            {"name": "commerce", "partitionings": [{"equal": {"parts": 2, "shardTemplate": {"tabletPools": [
                {"type": "replica", "dataVolumeClaimTemplate": tmpl("100Gi")},
                {"type": "rdonly", "dataVolumeClaimTemplate": tmpl("5Gi")}]}}}]},
            {"name": "customer", "partitionings": [{"custom": {"shards": [
                {"keyRange": {"end": "40"}, "tabletPools": [{"type": "rdonly", "dataVolumeClaimTemplate": tmpl("7Gi")}]},
                {"keyRange": {"start": "40"}, "tabletPools": [{"type": "replica"}]}]}}]}
        ]}});
        assert_eq!(
            first_pool_template(&c, "commerce", "80-").unwrap(),
            Some(&tmpl("100Gi"))
        );
        assert_eq!(
            first_pool_template(&c, "customer", "-40").unwrap(),
            Some(&tmpl("7Gi"))
        );
        assert_eq!(first_pool_template(&c, "customer", "40-").unwrap(), None);
        assert_eq!(first_pool_template(&c, "commerce", "-").unwrap(), None);
        assert_eq!(first_pool_template(&c, "lookup", "-").unwrap(), None);
        let bad = json!({"spec": {"keyspaces": [{"name": "c", "partitionings": [{}]}]}});
        assert!(first_pool_template(&bad, "c", "-").is_err());
    }

    #[test]
    fn a_spec_of_the_wrong_shape_is_an_error_naming_the_field() {
        let bad = [
            (
                json!({"spec": {"keyspaces": {"name": "x"}}}),
                "spec.keyspaces",
            ),
            (
                json!({"spec": {"keyspaces": [{"partitionings": []}]}}),
                "spec.keyspaces[0].name",
            ),
            (
                json!({"spec": {"keyspaces": [{"name": "c", "partitionings": [{"equal": {"parts": "2"}}]}]}}),
                "spec.keyspaces[0].partitionings[0].equal.parts",
            ),
            (
                json!({"spec": {"keyspaces": [{"name": "c", "partitionings": [{"equal": {"parts": 0}}]}]}}),
                "spec.keyspaces[0].partitionings[0].equal.parts",
            ),
            (
                json!({"spec": {"keyspaces": [{"name": "c", "partitionings": [{}]}]}}),
                "spec.keyspaces[0].partitionings[0]",
            ),
            (
                json!({"spec": {"keyspaces": [{"name": "c", "partitionings": [{"equal": {"parts": 2}, "custom": {}}]}]}}),
                "spec.keyspaces[0].partitionings[0]",
            ),
            (
                json!({"spec": {"keyspaces": [{"name": "c", "partitionings": [{"custom": {"shards": [{"keyRange": {"start": 80}}]}}]}]}}),
                "spec.keyspaces[0].partitionings[0].custom.shards[0].keyRange.start",
            ),
            (
                json!({"spec": {"keyspaces": [{"name": "c", "partitionings": [{"custom": {"shards": [{"keyRange": {"end": "8z"}}]}}]}]}}),
                "spec.keyspaces[0].partitionings[0].custom.shards[0].keyRange.end",
            ),
        ];
        for (spec, path) in bad {
            let e = cluster_shards(&spec).unwrap_err();
            assert_eq!(e.path, path, "{spec}");
        }
        // No keyspaces at all is a readable spec with no shards.
        assert!(cluster_shards(&json!({"spec": {}})).unwrap().is_empty());
    }
}
