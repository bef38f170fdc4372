//! What vtsnap reads of a VitessCluster's spec: the shards it defines (for `whenScaled`)
//! and each shard's template (its first tablet pool's `dataVolumeClaimTemplate` is what
//! vtbackup Pods inherit: vitess-operator `pkg/operator/vttablet/vtbackup_pod.go`).
//!
//! Equal partitionings follow vitess-operator `pkg/operator/partitioning/partitioning.go`
//! (`EqualKeyRanges`): `interval = (2^64 - parts) / parts + 1`, cut points `(i+1)·interval`
//! big-endian, truncated to the bytes needed to count `parts - 1`.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

use crate::naming::{KeyRange, MAX_SAFE_NAME_LEN, safe_name_len};
use crate::shard::KeyspaceShard;

/// The most shards one partitioning, and one VitessCluster in all, may define. The operator's
/// CRD allows `parts` up to 2^31 - 1, but every shard is at least one tablet Pod and a
/// shard name of 2 bytes (`-0001` … `ffff-`) counts 65,536 of them; a larger spec is refused
/// before a shard list is allocated for it (docs/design.md §2).
pub const MAX_SHARDS: u64 = 65_536;

/// Why `equal.parts` cannot be split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("equal.parts {parts} is outside 1..={MAX_SHARDS}")]
pub struct PartsOutOfRange {
    pub parts: u64,
}

/// The shard names (`-80`, `80-`, `-` …) of `parts` equal parts, `parts` at most
/// [`MAX_SHARDS`].
pub fn equal_shards(parts: u64) -> Result<Vec<String>, PartsOutOfRange> {
    if parts == 0 || parts > MAX_SHARDS {
        return Err(PartsOutOfRange { parts });
    }
    Ok(split(parts))
}

fn split(parts: u64) -> Vec<String> {
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

/// Why a VitessCluster's spec cannot tell its shards: the JSON path, what it should be and,
/// for a value out of bounds, what it is (short: a count, a length, a keyspace name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub path: String,
    pub expected: &'static str,
    pub found: Option<String>,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.found {
            None => write!(f, "{} is not {}", self.path, self.expected),
            Some(v) => write!(f, "{} is {v}, not {}", self.path, self.expected),
        }
    }
}

impl std::error::Error for SpecError {}

const EXPECTED_PARTS: &str = "a whole number from 1 to 65536 (vtsnap's bound on shards)";
const EXPECTED_TOTAL: &str = "within 65536 shards for the whole cluster (vtsnap's bound)";
const EXPECTED_BOUNDS: &str =
    "a key range whose label-safe name fits a label value (63 characters)";

/// A name as a message shows it: quoted, and cut when longer than a label value.
fn quoted(name: &str) -> String {
    match name.char_indices().nth(MAX_SAFE_NAME_LEN) {
        None => format!("{name:?}"),
        Some((at, _)) => format!("{:?}… ({} bytes)", &name[..at], name.len()),
    }
}

/// Counts the spec's shards against [`MAX_SHARDS`] before any is listed.
struct Budget(u64);

impl Budget {
    fn take(&mut self, n: u64, at: &str, keyspace: &str) -> Result<(), SpecError> {
        match self.0.checked_add(n).filter(|t| *t <= MAX_SHARDS) {
            Some(t) => {
                self.0 = t;
                Ok(())
            }
            None => Err(SpecError {
                path: at.to_owned(),
                expected: EXPECTED_TOTAL,
                found: Some(format!(
                    "{n} more shards of keyspace {} after {} before it",
                    quoted(keyspace),
                    self.0
                )),
            }),
        }
    }
}

fn array<'a>(v: Option<&'a Value>, path: &str) -> Result<&'a [Value], SpecError> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(SpecError {
            path: path.to_owned(),
            expected: "a list",
            found: None,
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
            found: None,
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
    let mut budget = Budget(0);
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
                found: None,
            });
        };
        let parts = array(ks.get("partitionings"), &format!("{at}.partitionings"))?;
        for (i, p) in parts.iter().enumerate() {
            let at = format!("{at}.partitionings[{i}]");
            match (p.get("equal"), p.get("custom")) {
                (Some(eq), None) => {
                    let path = format!("{at}.equal.parts");
                    let n = eq.get("parts").and_then(Value::as_u64).filter(|n| *n >= 1);
                    let Some(n) = n else {
                        return Err(SpecError {
                            path,
                            expected: "a whole number of at least 1",
                            found: None,
                        });
                    };
                    let too_many = |_| SpecError {
                        path: path.clone(),
                        expected: EXPECTED_PARTS,
                        found: Some(format!("{n} (keyspace {})", quoted(name))),
                    };
                    let shards = equal_shards(n).map_err(too_many)?;
                    budget.take(n, &path, name)?;
                    let template = eq.get("shardTemplate").unwrap_or(&Value::Null);
                    for s in shards {
                        out.push((name.to_owned(), s, template));
                    }
                }
                (None, Some(custom)) => {
                    let path = format!("{at}.custom.shards");
                    let shards = array(custom.get("shards"), &path)?;
                    budget.take(u64::try_from(shards.len()).unwrap_or(u64::MAX), &path, name)?;
                    for (j, sh) in shards.iter().enumerate() {
                        let at = format!("{at}.custom.shards[{j}]");
                        let start = key_range_end(sh, &at, "start")?;
                        let end = key_range_end(sh, &at, "end")?;
                        let len = safe_name_len(&start, &end);
                        if len > MAX_SAFE_NAME_LEN {
                            return Err(SpecError {
                                path: format!("{at}.keyRange"),
                                expected: EXPECTED_BOUNDS,
                                found: Some(format!(
                                    "{} + {} hex digits (keyspace {})",
                                    start.len(),
                                    end.len(),
                                    quoted(name)
                                )),
                            });
                        }
                        out.push((name.to_owned(), format!("{start}-{end}"), sh));
                    }
                }
                _ => {
                    return Err(SpecError {
                        path: at,
                        expected: "exactly one of equal or custom",
                        found: None,
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

/// The shards of a VitessCluster object's spec, typed. A shard name that is not a key range
/// (never one the operator's partitionings produce) refuses the spec like any malformed part.
pub fn spec_shards(cluster: &Value) -> Result<BTreeSet<KeyspaceShard>, SpecError> {
    shards_with_templates(cluster)?
        .into_iter()
        .map(|(keyspace, shard, _)| match shard.parse::<KeyRange>() {
            Ok(shard) => Ok(KeyspaceShard { keyspace, shard }),
            Err(e) => Err(SpecError {
                path: "spec.keyspaces".into(),
                expected: "key ranges as Vitess prints them",
                found: Some(format!(
                    "{} (keyspace {}): {e}",
                    quoted(&shard),
                    quoted(&keyspace)
                )),
            }),
        })
        .collect()
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
        assert_eq!(equal_shards(1).unwrap(), ["-"]);
        assert_eq!(equal_shards(2).unwrap(), ["-80", "80-"]);
        assert_eq!(equal_shards(3).unwrap(), ["-55", "55-aa", "aa-"]);
        assert_eq!(equal_shards(4).unwrap(), ["-40", "40-80", "80-c0", "c0-"]);
        assert_eq!(
            equal_shards(5).unwrap(),
            ["-33", "33-66", "66-99", "99-cc", "cc-"]
        );
        assert_eq!(
            equal_shards(10).unwrap(),
            [
                "-19", "19-33", "33-4c", "4c-66", "66-7f", "7f-99", "99-b3", "b3-cc", "cc-e6",
                "e6-"
            ]
        );
        let s = equal_shards(500).unwrap();
        assert_eq!((s[0].as_str(), s[499].as_str()), ("-0083", "ff7c-"));
        let s = equal_shards(65536).unwrap();
        assert_eq!((s[0].as_str(), s[65535].as_str()), ("-0001", "ffff-"));
    }

    #[test]
    fn parts_beyond_the_bound_are_refused_before_a_shard_is_listed() {
        assert_eq!(equal_shards(0), Err(PartsOutOfRange { parts: 0 }));
        assert_eq!(equal_shards(MAX_SHARDS).map(|s| s.len()), Ok(65_536));
        assert_eq!(
            equal_shards(MAX_SHARDS + 1),
            Err(PartsOutOfRange { parts: 65_537 })
        );
        // Round three item 8: the operator's CRD allows 2^31 - 1, which aborted every reader
        // with "memory allocation of 51539607528 bytes failed".
        let huge = json!({"spec": {"keyspaces": [
            {"name": "commerce", "partitionings": [{"equal": {"parts": 2}}]},
            {"name": "customer", "partitionings": [
                {"equal": {"parts": 4}},
                {"equal": {"parts": 2_147_483_647u64}}]}
        ]}});
        for e in [
            cluster_shards(&huge).unwrap_err(),
            first_pool_template(&huge, "commerce", "-80").unwrap_err(),
        ] {
            assert_eq!(e.path, "spec.keyspaces[1].partitionings[1].equal.parts");
            assert_eq!(e.expected, EXPECTED_PARTS);
            assert_eq!(
                e.to_string(),
                "spec.keyspaces[1].partitionings[1].equal.parts is 2147483647 (keyspace \
                 \"customer\"), not a whole number from 1 to 65536 (vtsnap's bound on shards)"
            );
        }
    }

    #[test]
    fn the_whole_cluster_is_bounded_not_only_each_partitioning() {
        let ks = |i: usize, parts: u64| json!({"name": format!("k{i}"), "partitionings": [{"equal": {"parts": parts}}]});
        let at_bound = json!({"spec": {"keyspaces": [ks(0, 32_768), ks(1, 32_767), ks(2, 1)]}});
        assert_eq!(cluster_shards(&at_bound).unwrap().len(), 65_536);
        let many: Vec<Value> = (0..1000).map(|i| ks(i, 65_536)).collect();
        let e = cluster_shards(&json!({"spec": {"keyspaces": many}})).unwrap_err();
        assert_eq!(e.path, "spec.keyspaces[1].partitionings[0].equal.parts");
        assert_eq!(
            e.found.as_deref(),
            Some("65536 more shards of keyspace \"k1\" after 65536 before it")
        );
        let custom = |n: usize| {
            let shards: Vec<Value> = (0..n).map(|_| json!({"keyRange": {}})).collect();
            json!({"spec": {"keyspaces": [ks(0, 65_535), {"name": "c", "partitionings": [{"custom": {"shards": shards}}]}]}})
        };
        assert!(cluster_shards(&custom(1)).is_ok());
        let e = cluster_shards(&custom(2)).unwrap_err();
        assert_eq!(e.path, "spec.keyspaces[1].partitionings[0].custom.shards");
    }

    #[test]
    fn a_custom_key_range_longer_than_a_label_is_refused_by_its_length() {
        // Round three item 7: a 65,536-digit custom bound reached `hex_cmp`'s panic.
        let c = json!({"spec": {"keyspaces": [{"name": "commerce", "partitionings": [{"custom": {"shards": [
            {"keyRange": {"start": "aa".repeat(32_768), "end": "bb"}}]}}]}]}});
        let e = cluster_shards(&c).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.keyspaces[0].partitionings[0].custom.shards[0].keyRange is 65536 + 2 hex \
             digits (keyspace \"commerce\"), not a key range whose label-safe name fits a \
             label value (63 characters)"
        );
        let long_name = "k".repeat(100_000);
        let c = json!({"spec": {"keyspaces": [{"name": long_name, "partitionings": [{"equal": {"parts": 70_000}}]}]}});
        let m = cluster_shards(&c).unwrap_err().to_string();
        assert!(m.contains("(100000 bytes)") && m.len() < 300, "{m}");
    }

    #[test]
    fn typed_shards_are_the_same_shards_and_a_bad_range_refuses_the_spec() {
        let c = serde_json::json!({"spec": {"keyspaces": [
            {"name": "commerce", "partitionings": [{"equal": {"parts": 4}}]},
            {"name": "customer", "partitionings": [{"custom": {"shards": [{"keyRange": {"start": "", "end": "40"}}, {"keyRange": {"start": "40", "end": ""}}]}}]}
        ]}});
        let typed: Vec<String> = spec_shards(&c)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        let plain: Vec<String> = cluster_shards(&c)
            .unwrap()
            .into_iter()
            .map(|(k, s)| format!("{k}/{s}"))
            .collect();
        assert_eq!(typed, plain);
        // A start after its end is no key range, though each bound is hex.
        let c = serde_json::json!({"spec": {"keyspaces": [
            {"name": "customer", "partitionings": [{"custom": {"shards": [{"keyRange": {"start": "80", "end": "40"}}]}}]}
        ]}});
        assert!(cluster_shards(&c).is_ok());
        let e = spec_shards(&c).unwrap_err().to_string();
        assert!(e.contains("\"80-40\"") && e.contains("customer"), "{e}");
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
