//! The schedule reconciler's objects: a shard's key and CronJob name, the CronJob built
//! from the chart's template, and the template read from its ConfigMap (hostile until
//! checked: bounded, typed, one `snapshot` container; one `drill` container in the drill
//! template, when the chart's drills are on; one `archive` container in the binlog-archive
//! template, when the chart's archive is on).

use serde_json::{Value, json};
use vtsnap_core::config::Mode;
use vtsnap_core::k8s_names::{dns_label, escape_controls};
use vtsnap_core::shard::ShardRef;

/// The chart's rendered CronJobs and the per-shard overrides of their values.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// The ConfigMap that carries it: owner of every CronJob made from it.
    pub configmap: String,
    pub configmap_uid: String,
    /// Where the CronJobs are made (the ConfigMap's namespace).
    pub namespace: String,
    /// The release's full name: the CronJobs are `<fullname>-snap-<cluster>-<keyspace>-<shard>`
    /// and `<fullname>-drill-…`.
    pub fullname: String,
    pub snapshot: KindTemplate,
    /// `None`: the chart's drills are off.
    pub drill: Option<KindTemplate>,
    /// `None`: the chart's binlog archive is off (docs/pitr.md §6).
    pub archive: Option<KindTemplate>,
}

impl Template {
    pub fn of_kind(&self, kind: Kind) -> Option<&KindTemplate> {
        match kind {
            Kind::Snapshot => Some(&self.snapshot),
            Kind::Drill => self.drill.as_ref(),
            Kind::Archive => self.archive.as_ref(),
        }
    }
}

/// One kind's CronJob as the chart renders it, and the chart's per-shard overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct KindTemplate {
    pub cronjob: Value,
    pub overrides: Vec<Override>,
}

/// `snapshot.shards[]` (or `drill.shards[]`) of the chart's values: one shard's mode,
/// schedule or suspension.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Override {
    pub cluster: String,
    pub keyspace: String,
    pub shard: String,
    #[serde(default)]
    pub mode: Option<Mode>,
    #[serde(default)]
    pub schedule: Option<String>,
    #[serde(default)]
    pub suspend: Option<bool>,
}

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
/// What a CronJob runs: `drill`, `archive`, or absent for a snapshot (as CronJobs made
/// before drills were reconciled have it).
pub const ANN_KIND: &str = "vtsnap.io/schedule-kind";
/// Keys of the template ConfigMap.
pub const KEY_CRONJOB: &str = "cronjob.json";
pub const KEY_OVERRIDES: &str = "overrides.json";
pub const KEY_FULLNAME: &str = "fullname";
/// The drill CronJob template and its per-shard overrides: absent when drills are off.
pub const KEY_DRILL_CRONJOB: &str = "drill-cronjob.json";
pub const KEY_DRILL_OVERRIDES: &str = "drill-overrides.json";
/// The binlog-archive CronJob template and its per-shard overrides: absent when the
/// chart's archive is off.
pub const KEY_ARCHIVE_CRONJOB: &str = "archive-cronjob.json";
pub const KEY_ARCHIVE_OVERRIDES: &str = "archive-overrides.json";

/// What a reconciled CronJob runs: one of each per shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `vtsnap-snapshot run`.
    Snapshot,
    /// `vtsnap-drill run` (docs/design.md §5.9).
    Drill,
    /// `vtsnap-pitr archive`: the shard's next binlog-archive increment (docs/pitr.md §6).
    Archive,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Snapshot, Kind::Drill, Kind::Archive];

    /// The name of the template's container that runs it, which gets the shard's
    /// arguments.
    pub fn container(self) -> &'static str {
        match self {
            Kind::Snapshot => "snapshot",
            Kind::Drill => "drill",
            Kind::Archive => "archive",
        }
    }

    /// The word in its CronJob's name, as the chart names its own.
    fn name_part(self) -> &'static str {
        match self {
            Kind::Snapshot => "snap",
            Kind::Drill => "drill",
            Kind::Archive => "pitr",
        }
    }

    /// "a drill", as a message names one CronJob of the kind.
    pub fn article(self) -> &'static str {
        match self {
            Kind::Snapshot => "a snapshot",
            Kind::Drill => "a drill",
            Kind::Archive => "an archive",
        }
    }

    /// Reads [`ANN_KIND`]: absent is a snapshot CronJob.
    pub fn from_annotation(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("snapshot") => Ok(Kind::Snapshot),
            Some("drill") => Ok(Kind::Drill),
            Some("archive") => Ok(Kind::Archive),
            Some(other) => Err(format!(
                "{ANN_KIND} {:?}: not snapshot, drill or archive",
                escape_controls(other)
            )),
        }
    }
}
/// The most bytes of one key read.
const MAX_KEY_BYTES: usize = 256 << 10;

/// The chart's name rule (`vtsnap.dnsName` with max 52, so the CronJob controller's
/// 11-character Job suffix fits 63): lower case, other characters `-`, trimmed; a longer
/// name is cut to 43 characters and ends with 8 hex digits of the SHA-256 of the whole.
pub fn dns_name(name: &str, max: usize) -> String {
    // Go's `lower` maps each rune to one rune (`İ` → `i`); Rust's full mapping would
    // give `İ` two (`i` and a combining dot), one `-` more than the chart's name.
    let lowered: String = name
        .chars()
        .map(|c| c.to_lowercase().next().unwrap_or(c))
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

/// Whether a shard's CronJob name carries its namespace (docs/design.md §5.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameForm {
    /// `<fullname>-snap-<cluster>-<keyspace>-<shard>`: its cluster's name is configured
    /// in one namespace (every name made before the namespace was ever needed).
    Short,
    /// `<fullname>-snap-<namespace>-<cluster>-<keyspace>-<shard>`: its cluster's name is
    /// configured in more than one namespace, so the short names of their shards would be
    /// one name.
    WithNamespace,
}

/// `<fullname>-snap-[<namespace>-]<cluster>-<keyspace>-<shard safe name>` (`-drill-` for a
/// drill, `-pitr-` for a binlog archive), as the chart names its own
/// (`vtsnap.shardCronjobName`).
pub fn cronjob_name(fullname: &str, kind: Kind, key: &ShardRef, form: NameForm) -> String {
    let namespace = match form {
        NameForm::Short => String::new(),
        NameForm::WithNamespace => format!("{}-", key.namespace),
    };
    dns_name(
        &format!(
            "{fullname}-{}-{namespace}{}-{}-{}",
            kind.name_part(),
            key.cluster,
            key.keyspace,
            key.safe_name()
        ),
        52,
    )
}

fn shard_labels(key: &ShardRef) -> Value {
    Value::Object(
        key.labels()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::String(v)))
            .collect(),
    )
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

/// What one shard's CronJob runs and when (before its hash).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub kind: Kind,
    pub key: &'a ShardRef,
    pub name: &'a str,
    pub schedule: &'a str,
    pub suspend: bool,
    pub offset: u32,
    pub mode: Option<Mode>,
    /// [`NameForm::WithNamespace`]: the Job names its cluster's namespace too, or the
    /// program's lookup of the cluster by name is ambiguous (docs/design.md §5.8).
    pub form: NameForm,
}

/// The CronJob of one shard, from the template of its kind (without its hash); `None`
/// when the template has none of that kind.
pub fn desired(t: &Template, run: Run<'_>) -> Option<Value> {
    let Run {
        kind,
        key,
        name,
        schedule,
        suspend,
        offset,
        mode,
        form,
    } = run;
    let mut o = t.of_kind(kind)?.cronjob.clone();
    let mut annotations = json!({ANN_SHARD: key.to_string(), ANN_OFFSET: offset.to_string()});
    match kind {
        Kind::Snapshot => {}
        Kind::Drill | Kind::Archive => annotations[ANN_KIND] = json!(kind.container()),
    }
    let mut meta = json!({
        "name": name,
        "namespace": t.namespace,
        "labels": o.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
        "annotations": annotations,
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
    let mut args = vec!["--cluster".to_owned(), key.cluster.clone()];
    // Only when needed: the args of every other CronJob, and so its hash, stay as they
    // were, and an upgrade rewrites none of them.
    if form == NameForm::WithNamespace {
        args.extend([
            vtsnap_core::config::CLUSTER_NAMESPACE_FLAG.to_owned(),
            key.namespace.clone(),
        ]);
    }
    args.extend([
        "--keyspace".to_owned(),
        key.keyspace.clone(),
        format!("--shard={}", key.shard),
    ]);
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
        for c in containers
            .iter_mut()
            .filter(|c| c["name"] == kind.container())
        {
            let mut all: Vec<Value> = c["args"].as_array().cloned().unwrap_or_default();
            all.extend(args.iter().map(|a| json!(a)));
            c["args"] = Value::Array(all);
        }
    }
    Some(o)
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
/// [`KEY_FULLNAME`], [`KEY_DRILL_CRONJOB`] with [`KEY_DRILL_OVERRIDES`] when drills are
/// on, [`KEY_ARCHIVE_CRONJOB`] with [`KEY_ARCHIVE_OVERRIDES`] when the archive is), checked:
/// a CronJob with one container of its kind's name, overrides of known fields (a mode for
/// a snapshot only), a release name that is a DNS label.
pub fn template_from(cm: &Value) -> Result<Template, String> {
    let name = cm
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let data = |key: &str| -> Result<Option<&str>, String> {
        let Some(v) = cm.pointer(&format!("/data/{key}")) else {
            return Ok(None);
        };
        let v = v
            .as_str()
            .ok_or_else(|| format!("ConfigMap {name} {key}: not a string"))?;
        if v.len() > MAX_KEY_BYTES {
            return Err(format!(
                "ConfigMap {name} {key}: {} bytes, more than {MAX_KEY_BYTES}",
                v.len()
            ));
        }
        Ok(Some(v))
    };
    let needed = |key: &str| -> Result<&str, String> {
        data(key)?.ok_or_else(|| format!("ConfigMap {name} has no {key}"))
    };
    let kind_template = |kind: Kind, cron_text: &str, overrides_text: &str, keys: (&str, &str)| {
        let (cron_key, overrides_key) = keys;
        let cronjob: Value = serde_json::from_str(cron_text)
            .map_err(|e| format!("ConfigMap {name} {cron_key}: {e}"))?;
        if cronjob["kind"] != "CronJob" {
            return Err(format!("ConfigMap {name} {cron_key}: not a CronJob"));
        }
        let container = kind.container();
        let containers = cronjob
            .pointer("/spec/jobTemplate/spec/template/spec/containers")
            .and_then(Value::as_array)
            .map(|cs| cs.iter().filter(|c| c["name"] == container).count());
        if containers != Some(1) {
            return Err(format!(
                "ConfigMap {name} {cron_key}: needs exactly one container named {container}"
            ));
        }
        let overrides: Vec<Override> = serde_json::from_str(overrides_text)
            .map_err(|e| format!("ConfigMap {name} {overrides_key}: {e}"))?;
        for o in &overrides {
            let at = format!(
                "ConfigMap {name} {overrides_key}: {}/{}/{}",
                o.cluster, o.keyspace, o.shard
            );
            if let Some(s) = &o.schedule
                && !s.is_empty()
            {
                vtsnap_core::cron::Schedule::parse(s)
                    .map_err(|e| format!("{at}: schedule {s:?}: {e}"))?;
            }
            if kind != Kind::Snapshot && o.mode.is_some() {
                return Err(format!("{at}: {} has no mode", kind.article()));
            }
        }
        Ok(KindTemplate { cronjob, overrides })
    };
    let snapshot = kind_template(
        Kind::Snapshot,
        needed(KEY_CRONJOB)?,
        needed(KEY_OVERRIDES)?,
        (KEY_CRONJOB, KEY_OVERRIDES),
    )?;
    let optional = |kind: Kind, keys: (&str, &str)| -> Result<Option<KindTemplate>, String> {
        match data(keys.0)? {
            None => Ok(None),
            Some(text) => Ok(Some(kind_template(
                kind,
                text,
                data(keys.1)?.unwrap_or("[]"),
                keys,
            )?)),
        }
    };
    let drill = optional(Kind::Drill, (KEY_DRILL_CRONJOB, KEY_DRILL_OVERRIDES))?;
    let archive = optional(Kind::Archive, (KEY_ARCHIVE_CRONJOB, KEY_ARCHIVE_OVERRIDES))?;
    let fullname = needed(KEY_FULLNAME)?.trim().to_owned();
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
        snapshot,
        drill,
        archive,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn key(shard: &str) -> ShardRef {
        ShardRef {
            namespace: "vitess".into(),
            cluster: "main".into(),
            keyspace: "commerce".into(),
            shard: shard.parse().unwrap(),
        }
    }

    #[test]
    fn names_are_the_chart_s() {
        // What `helm template` renders for these shards with a 48-character release (the
        // chart cuts its full name to 40): the same 43 characters and SHA-256 prefix.
        let full = "vtsnap-production-databases-eu-west-1-bl";
        assert_eq!(
            cronjob_name(full, Kind::Snapshot, &key("-80"), NameForm::Short),
            "vtsnap-production-databases-eu-west-1-bl-sn-3f15378f"
        );
        assert_eq!(
            cronjob_name(full, Kind::Snapshot, &key("80-"), NameForm::Short),
            "vtsnap-production-databases-eu-west-1-bl-sn-2de518d4"
        );
        assert_eq!(
            cronjob_name("vtsnap", Kind::Snapshot, &key("-"), NameForm::Short),
            "vtsnap-snap-main-commerce-x-x"
        );
        assert_eq!(
            cronjob_name("vtsnap", Kind::Drill, &key("-"), NameForm::Short),
            "vtsnap-drill-main-commerce-x-x"
        );
        // A cluster name configured in two namespaces: the namespace follows the kind, as
        // `vtsnap.shardCronjobName` renders it with `namespace` given.
        assert_eq!(
            cronjob_name("vtsnap", Kind::Snapshot, &key("-"), NameForm::WithNamespace),
            "vtsnap-snap-vitess-main-commerce-x-x"
        );
        assert_eq!(
            cronjob_name("vtsnap", Kind::Drill, &key("-80"), NameForm::WithNamespace),
            "vtsnap-drill-vitess-main-commerce-x-80"
        );
        assert_eq!(
            cronjob_name(full, Kind::Snapshot, &key("-80"), NameForm::WithNamespace),
            "vtsnap-production-databases-eu-west-1-bl-sn-a10ca0df"
        );
        // Other characters become '-', hyphens stay, ends are trimmed, 52 fits as is.
        assert_eq!(dns_name("-Ab_c-d.e-", 52), "ab-c-d-e");
        // One character for one, as Go's `lower` maps runes (found by tests/chart_names.rs).
        assert_eq!(dns_name("84İ-K", 52), "84i-k");
        let exactly = "a".repeat(52);
        assert_eq!(dns_name(&exactly, 52), exactly);
        assert_eq!(dns_name(&"a".repeat(53), 52).len(), 52);
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
        // No drill template: drills are off. One: checked as the snapshot's is.
        assert_eq!(t.drill, None);
        let drill = serde_json::json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "drill"}]}}}}}});
        let mut with = cm(good.to_string());
        with["data"]["drill-cronjob.json"] = serde_json::json!(drill.to_string());
        let t = template_from(&with).unwrap();
        assert_eq!(t.drill.as_ref().map(|d| d.overrides.len()), Some(0));
        with["data"]["drill-overrides.json"] = serde_json::json!(
            r#"[{"cluster": "c", "keyspace": "k", "shard": "-", "mode": "online"}]"#
        );
        let e = template_from(&with).unwrap_err();
        assert!(e.contains("a drill has no mode"), "{e}");
        with["data"]["drill-overrides.json"] = serde_json::json!(
            r#"[{"cluster": "c", "keyspace": "k", "shard": "-", "suspend": true}]"#
        );
        assert!(template_from(&with).is_ok());
        // A drill template without its `drill` container, or not text.
        with["data"]["drill-cronjob.json"] = serde_json::json!(good.to_string());
        let e = template_from(&with).unwrap_err();
        assert!(e.contains("named drill"), "{e}");
        with["data"]["drill-cronjob.json"] = serde_json::json!(7);
        assert!(template_from(&with).unwrap_err().contains("not a string"));
    }

    #[test]
    fn an_archive_template_is_read_and_checked_as_a_drill_s() {
        let good = serde_json::json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "snapshot"}]}}}}}});
        let mut with = serde_json::json!({"metadata": {"name": "t", "uid": "u"}, "data": {
            "cronjob.json": good.to_string(), "overrides.json": "[]", "fullname": "vtsnap"}});
        assert_eq!(template_from(&with).unwrap().archive, None, "off");
        let archive = serde_json::json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "archive"}]}}}}}});
        with["data"]["archive-cronjob.json"] = serde_json::json!(archive.to_string());
        let t = template_from(&with).unwrap();
        assert_eq!(t.archive.as_ref().map(|a| a.overrides.len()), Some(0));
        assert_eq!(t.of_kind(Kind::Archive), t.archive.as_ref());
        assert_eq!(t.drill, None, "the archive is not a drill");
        with["data"]["archive-overrides.json"] = serde_json::json!(
            r#"[{"cluster": "c", "keyspace": "k", "shard": "-", "mode": "cold"}]"#
        );
        let e = template_from(&with).unwrap_err();
        assert!(
            e.contains("archive-overrides.json: c/k/-: an archive has no mode"),
            "{e}"
        );
        with["data"]["archive-overrides.json"] = serde_json::json!(
            r#"[{"cluster": "c", "keyspace": "k", "shard": "-", "schedule": "*/5 * * * *"}]"#
        );
        assert_eq!(
            template_from(&with)
                .unwrap()
                .archive
                .unwrap()
                .overrides
                .len(),
            1
        );
        with["data"]["archive-cronjob.json"] = serde_json::json!(good.to_string());
        let e = template_from(&with).unwrap_err();
        assert!(
            e.contains("archive-cronjob.json: needs exactly one container named archive"),
            "{e}"
        );
        // Its record reads back; a kind it does not know is named.
        assert_eq!(Kind::from_annotation(Some("archive")), Ok(Kind::Archive));
        assert_eq!(Kind::from_annotation(Some("drill")), Ok(Kind::Drill));
        assert_eq!(Kind::from_annotation(None), Ok(Kind::Snapshot));
        let e = Kind::from_annotation(Some("pitr")).unwrap_err();
        assert!(
            e.contains("\"pitr\": not snapshot, drill or archive"),
            "{e}"
        );
        let key = ShardRef::parse_path("vitess/main/commerce/-").unwrap();
        assert_eq!(
            cronjob_name("vtsnap", Kind::Archive, &key, NameForm::Short),
            "vtsnap-pitr-main-commerce-x-x"
        );
    }
}
