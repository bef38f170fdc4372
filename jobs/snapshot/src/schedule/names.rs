//! The schedule reconciler's objects: a shard's key and CronJob name, the CronJob built
//! from the chart's template, and the template read from its ConfigMap (hostile until
//! checked: bounded, typed, one `snapshot` container).

use std::fmt;

use serde_json::{Value, json};
use vtsnap_core::config::Mode;
use vtsnap_core::k8s_names::{dns_label, escape_controls};
use vtsnap_core::naming::KeyRange;
use vtsnap_core::snapshot::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};

use super::decide::{Override, Template};

/// The label every CronJob of the reconciler carries (with the ownerReference to the
/// template, what makes it "ours").
pub const MANAGED_BY: &str = vtsnap_core::labels::MANAGED_BY;
pub const MANAGED_BY_SCHEDULE: &str = "vtsnap-schedule";
/// `namespace/cluster/keyspace/shard` of the shard a CronJob snapshots.
pub const ANN_SHARD: &str = "vtsnap.io/schedule-shard";
/// Minutes its runs are moved by (the stagger offset).
pub const ANN_OFFSET: &str = "vtsnap.io/stagger-minutes";
/// A hash of everything the reconciler sets: unchanged means nothing to write.
pub const ANN_HASH: &str = "vtsnap.io/spec-hash";
/// The container of the template that runs `vtsnap-snapshot`.
pub const CONTAINER: &str = "snapshot";
/// Keys of the template ConfigMap.
pub const KEY_CRONJOB: &str = "cronjob.json";
pub const KEY_OVERRIDES: &str = "overrides.json";
pub const KEY_FULLNAME: &str = "fullname";
/// The most bytes of one key read.
const MAX_KEY_BYTES: usize = 256 << 10;

/// One shard of one configured cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShardKey {
    pub namespace: String,
    pub cluster: String,
    pub keyspace: String,
    /// As Vitess prints it (`-80`).
    pub shard: String,
}

impl fmt::Display for ShardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            self.namespace, self.cluster, self.keyspace, self.shard
        )
    }
}

impl ShardKey {
    /// Reads the [`ANN_SHARD`] annotation strictly: four parts, names as the API and
    /// Vitess have them.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("{ANN_SHARD} {:?}: {why}", escape_controls(text));
        let parts: Vec<&str> = text.split('/').collect();
        let [namespace, cluster, keyspace, shard] = parts.as_slice() else {
            return Err(bad("not namespace/cluster/keyspace/shard"));
        };
        dns_label(namespace).map_err(|e| bad(&format!("namespace: {e}")))?;
        if cluster.is_empty() || keyspace.is_empty() || !text.is_ascii() || text.len() > 512 {
            return Err(bad("empty or not ASCII"));
        }
        shard
            .parse::<KeyRange>()
            .map_err(|e| bad(&format!("shard: {e}")))?;
        Ok(Self {
            namespace: (*namespace).to_owned(),
            cluster: (*cluster).to_owned(),
            keyspace: (*keyspace).to_owned(),
            shard: (*shard).to_owned(),
        })
    }

    fn safe_shard(&self) -> String {
        vtsnap_core::naming::safe_shard_name(&self.shard)
    }
}

/// The chart's name rule (`vtsnap.dnsName` with max 52, so the CronJob controller's
/// 11-character Job suffix fits 63): lower case, other characters `-`, trimmed; a longer
/// name is cut to 43 characters and ends with 8 hex digits of the SHA-256 of the whole.
pub fn dns_name(name: &str, max: usize) -> String {
    let lowered: String = name
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let n = lowered.trim_matches('-');
    if n.len() <= max {
        return n.to_owned();
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, name.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let cut = &n[..max - 9];
    format!("{}-{}", cut.strip_suffix('-').unwrap_or(cut), &hex[..8])
}

/// `<fullname>-snap-<cluster>-<keyspace>-<shard safe name>`, as the chart names its own.
pub fn cronjob_name(fullname: &str, key: &ShardKey) -> String {
    dns_name(
        &format!(
            "{fullname}-snap-{}-{}-{}",
            key.cluster,
            key.keyspace,
            key.safe_shard()
        ),
        52,
    )
}

fn shard_labels(key: &ShardKey) -> Value {
    json!({
        LABEL_CLUSTER: key.cluster,
        LABEL_KEYSPACE: key.keyspace,
        LABEL_SHARD: key.safe_shard(),
    })
}

fn merge_into(target: &mut Value, ptr: &str, add: &Value) {
    let Some(map) = add.as_object() else { return };
    let mut cur = target.pointer(ptr).cloned().unwrap_or_else(|| json!({}));
    if !cur.is_object() {
        cur = json!({});
    }
    for (k, v) in map {
        cur[k] = v.clone();
    }
    set(target, ptr, cur);
}

/// Sets the value at a JSON pointer of objects, making the objects on the way.
fn set(target: &mut Value, ptr: &str, value: Value) {
    let mut cur = target;
    let parts: Vec<&str> = ptr.split('/').skip(1).collect();
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        if i + 1 == parts.len() {
            cur[*p] = value;
            return;
        }
        cur = &mut cur[*p];
    }
}

/// The CronJob of one shard, from the template (without its hash).
pub fn desired(
    t: &Template,
    key: &ShardKey,
    name: &str,
    schedule: &str,
    suspend: bool,
    offset: u32,
    mode: Option<Mode>,
) -> Value {
    let mut o = t.cronjob.clone();
    let mut meta = json!({
        "name": name,
        "namespace": t.namespace,
        "labels": o.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
        "annotations": {ANN_SHARD: key.to_string(), ANN_OFFSET: offset.to_string()},
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": t.configmap,
                             "uid": t.configmap_uid}],
    });
    merge_into(&mut meta, "/labels", &shard_labels(key));
    meta["labels"][MANAGED_BY] = json!(MANAGED_BY_SCHEDULE);
    o["metadata"] = meta;
    o["apiVersion"] = json!("batch/v1");
    o["kind"] = json!("CronJob");
    set(&mut o, "/spec/schedule", json!(schedule));
    set(&mut o, "/spec/suspend", json!(suspend));
    merge_into(
        &mut o,
        "/spec/jobTemplate/metadata/labels",
        &shard_labels(key),
    );
    merge_into(
        &mut o,
        "/spec/jobTemplate/spec/template/metadata/labels",
        &shard_labels(key),
    );
    let mut args = vec![
        "--cluster".to_owned(),
        key.cluster.clone(),
        "--keyspace".to_owned(),
        key.keyspace.clone(),
        format!("--shard={}", key.shard),
    ];
    if let Some(m) = mode {
        let m = match m {
            Mode::Cold => "cold",
            Mode::Online => "online",
        };
        args.extend(["--mode".to_owned(), m.to_owned()]);
    }
    if let Some(containers) = o
        .pointer_mut("/spec/jobTemplate/spec/template/spec/containers")
        .and_then(Value::as_array_mut)
    {
        for c in containers.iter_mut().filter(|c| c["name"] == CONTAINER) {
            let mut all: Vec<Value> = c["args"].as_array().cloned().unwrap_or_default();
            all.extend(args.iter().map(|a| json!(a)));
            c["args"] = Value::Array(all);
        }
    }
    o
}

/// A hash of the object the reconciler writes: 16 hex digits of SHA-256 of its JSON
/// (serde_json's maps are sorted, so equal objects hash equal).
pub fn spec_hash(desired: &Value) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, desired.to_string().as_bytes());
    digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn with_hash(mut desired: Value, hash: &str) -> Value {
    desired["metadata"]["annotations"][ANN_HASH] = json!(hash);
    desired
}

/// The template from its ConfigMap (`data`: [`KEY_CRONJOB`], [`KEY_OVERRIDES`],
/// [`KEY_FULLNAME`]), checked: a CronJob with one container named `snapshot`, overrides
/// of known fields, a release name that is a DNS label.
pub fn template_from(cm: &Value) -> Result<Template, String> {
    let name = cm
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let data = |key: &str| -> Result<&str, String> {
        let v = cm
            .pointer(&format!("/data/{key}"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("ConfigMap {name} has no {key}"))?;
        if v.len() > MAX_KEY_BYTES {
            return Err(format!(
                "ConfigMap {name} {key}: {} bytes, more than {MAX_KEY_BYTES}",
                v.len()
            ));
        }
        Ok(v)
    };
    let cronjob: Value = serde_json::from_str(data(KEY_CRONJOB)?)
        .map_err(|e| format!("ConfigMap {name} {KEY_CRONJOB}: {e}"))?;
    if cronjob["kind"] != "CronJob" {
        return Err(format!("ConfigMap {name} {KEY_CRONJOB}: not a CronJob"));
    }
    let containers = cronjob
        .pointer("/spec/jobTemplate/spec/template/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter(|c| c["name"] == CONTAINER).count());
    if containers != Some(1) {
        return Err(format!(
            "ConfigMap {name} {KEY_CRONJOB}: needs exactly one container named {CONTAINER}"
        ));
    }
    let overrides: Vec<Override> = serde_json::from_str(data(KEY_OVERRIDES)?)
        .map_err(|e| format!("ConfigMap {name} {KEY_OVERRIDES}: {e}"))?;
    for o in &overrides {
        if let Some(s) = &o.schedule
            && !s.is_empty()
        {
            vtsnap_core::cron::Schedule::parse(s).map_err(|e| {
                format!(
                    "ConfigMap {name} {KEY_OVERRIDES}: {}/{}/{}: schedule {s:?}: {e}",
                    o.cluster, o.keyspace, o.shard
                )
            })?;
        }
    }
    let fullname = data(KEY_FULLNAME)?.trim().to_owned();
    dns_label(&fullname).map_err(|e| format!("ConfigMap {name} {KEY_FULLNAME}: {e}"))?;
    Ok(Template {
        configmap: name.to_owned(),
        configmap_uid: cm
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        namespace: cm
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        fullname,
        cronjob,
        overrides,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn key(shard: &str) -> ShardKey {
        ShardKey {
            namespace: "vitess".into(),
            cluster: "main".into(),
            keyspace: "commerce".into(),
            shard: shard.into(),
        }
    }

    #[test]
    fn names_are_the_chart_s() {
        // What `helm template` renders for these shards with a 48-character release (the
        // chart cuts its full name to 40): the same 43 characters and SHA-256 prefix.
        let full = "vtsnap-production-databases-eu-west-1-bl";
        assert_eq!(
            cronjob_name(full, &key("-80")),
            "vtsnap-production-databases-eu-west-1-bl-sn-3f15378f"
        );
        assert_eq!(
            cronjob_name(full, &key("80-")),
            "vtsnap-production-databases-eu-west-1-bl-sn-2de518d4"
        );
        assert_eq!(
            cronjob_name("vtsnap", &key("-")),
            "vtsnap-snap-main-commerce-x-x"
        );
        // Other characters become '-', hyphens stay, ends are trimmed, 52 fits as is.
        assert_eq!(dns_name("-Ab_c-d.e-", 52), "ab-c-d-e");
        let exactly = "a".repeat(52);
        assert_eq!(dns_name(&exactly, 52), exactly);
        assert_eq!(dns_name(&"a".repeat(53), 52).len(), 52);
    }

    #[test]
    fn a_shard_record_is_read_strictly() {
        assert_eq!(
            ShardKey::parse("vitess/main/commerce/-80").unwrap(),
            key("-80")
        );
        for bad in [
            "vitess/main/commerce",
            "vitess/main/commerce/-80/x",
            "Vitess/main/commerce/-80",
            "vitess//commerce/-80",
            "vitess/main//-80",
            "vitess/mäin/commerce/-80",
            "vitess/main/commerce/zz",
        ] {
            assert!(ShardKey::parse(bad).is_err(), "{bad}");
        }
        // At most 512 bytes.
        let long = |n: usize| format!("vitess/{}/commerce/-80", "c".repeat(n));
        let fits = 512 - long(0).len();
        assert!(ShardKey::parse(&long(fits)).is_ok());
        assert!(ShardKey::parse(&long(fits + 1)).is_err());
    }

    #[test]
    fn a_template_is_checked_before_it_is_used() {
        let cm = |cronjob: String| {
            serde_json::json!({"metadata": {"name": "t", "namespace": "vtsnap", "uid": "u"},
                "data": {"fullname": "vtsnap", "overrides.json": "[]", "cronjob.json": cronjob}})
        };
        let good = serde_json::json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "snapshot"}]}}}}}});
        let t = template_from(&cm(good.to_string())).unwrap();
        assert_eq!(
            (t.fullname.as_str(), t.configmap_uid.as_str()),
            ("vtsnap", "u")
        );
        // Exactly the bound is read; over it is refused by its size.
        let mut padded = good.clone();
        padded["metadata"] = serde_json::json!({"annotations": {"pad": ""}});
        let room = MAX_KEY_BYTES - padded.to_string().len();
        padded["metadata"]["annotations"]["pad"] = serde_json::json!("x".repeat(room));
        assert_eq!(padded.to_string().len(), MAX_KEY_BYTES);
        assert!(template_from(&cm(padded.to_string())).is_ok());
        padded["metadata"]["annotations"]["pad"] = serde_json::json!("x".repeat(MAX_KEY_BYTES));
        let e = template_from(&cm(padded.to_string())).unwrap_err();
        assert!(e.contains("bytes, more than"), "{e}");
        let two = serde_json::json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "snapshot"}, {"name": "snapshot"}]}}}}}});
        assert!(template_from(&cm(two.to_string())).is_err());
        let mut bad_name = cm(good.to_string());
        bad_name["data"]["fullname"] = serde_json::json!("Not_A_Label");
        assert!(template_from(&bad_name).is_err());
        let mut bad_override = cm(good.to_string());
        bad_override["data"]["overrides.json"] = serde_json::json!(
            r#"[{"cluster": "c", "keyspace": "k", "shard": "-", "schedule": "61 * * * *"}]"#
        );
        assert!(
            template_from(&bad_override)
                .unwrap_err()
                .contains("schedule")
        );
        // An empty schedule is no override of it.
        bad_override["data"]["overrides.json"] = serde_json::json!(
            r#"[{"cluster": "c", "keyspace": "k", "shard": "-", "schedule": ""}]"#
        );
        assert!(template_from(&bad_override).is_ok());
        // Not a CronJob at all.
        assert!(template_from(&cm(r#"{"kind": "Job"}"#.into())).is_err());
    }
}
