//! The shards a VitessCluster's spec defines (for `whenScaled`).
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

/// `(keyspace, shard name)` pairs of a VitessCluster object's spec.
pub fn cluster_shards(cluster: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for ks in cluster
        .pointer("/spec/keyspaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = ks.get("name").and_then(Value::as_str) else {
            continue;
        };
        for p in ks
            .get("partitionings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(parts) = p.pointer("/equal/parts").and_then(Value::as_u64) {
                for s in equal_shards(parts) {
                    out.insert((name.to_owned(), s));
                }
            }
            for sh in p
                .pointer("/custom/shards")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let start = sh
                    .pointer("/keyRange/start")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let end = sh
                    .pointer("/keyRange/end")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                out.insert((name.to_owned(), format!("{start}-{end}")));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
