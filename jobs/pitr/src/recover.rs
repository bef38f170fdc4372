//! `vtsnap-pitr run`: one recovery of a shard to a point (docs/pitr.md §8): observe (the
//! shard's snapshots, the archive as this Pod mounts it, one tablet Pod and its PVC) →
//! decide (the base and increments: `vtsnap_core::pitr::chain`; the objects:
//! [`crate::decide::recovery`]) → act ([`crate::act::recover`]) → report
//! ([`RecoverLine`]).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;
use vtsnap_core::exit::Exit;
use vtsnap_core::pitr::chain::{self, Target};
use vtsnap_core::quantity;
use vtsnap_core::reconcile::apis;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::tablet_volume::read_shape_tablet;

use crate::act::recover::{ReplayResult, recover as act};
use crate::archive::{Archive, ArchivePlace};
use crate::decide::recovery::{Recovery, Settings, cut, pod, pvc, recovery_name, target_text};
use crate::observe::{bases, named_base, read_archive};

#[derive(Debug, Clone)]
pub struct RecoverOptions {
    pub settings: Settings,
    /// The archive as this process reads it (the Pod mounts it at `settings.archive_root`).
    pub archive: ArchivePlace,
    pub target: Target,
    pub snapshot: Option<String>,
    pub after: After,
    /// The Job this run is (owner of the PVC and the Pod).
    pub owner: Option<vtsnap_core::restore_pod::JobOwner>,
    /// Print the objects, make nothing.
    pub dry_run: bool,
}

use vtsnap_core::pitr::run::{After, RecoverOutcome};

/// The run's one JSON line.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecoverLine {
    pub shard: String,
    pub target: String,
    pub outcome: RecoverOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub increments: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<After>,
    /// How to reach the served server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<ReplayResult>,
    /// The target minus when the last applied transaction began (a time target).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpo_seconds: Option<i64>,
    /// From the first object made to the replay's result (and to the cut being ready).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rto_ms: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objects: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RecoverLine {
    /// A line for `shard` and `target` that says nothing yet (a failure until it does).
    pub fn new(shard: String, target: String) -> Self {
        Self {
            shard,
            target,
            outcome: RecoverOutcome::Failed,
            base: None,
            increments: Vec::new(),
            pod: None,
            after: None,
            shell: None,
            snapshot: None,
            result: None,
            rpo_seconds: None,
            rto_ms: None,
            steps: Vec::new(),
            left: Vec::new(),
            objects: None,
            error: None,
        }
    }

    fn end(mut self, outcome: RecoverOutcome, error: impl ToString) -> Self {
        self.outcome = outcome;
        self.error = Some(error.to_string());
        self
    }

    pub fn exit(&self) -> Exit {
        match self.outcome {
            RecoverOutcome::Recovered | RecoverOutcome::Planned => Exit::Ok,
            RecoverOutcome::Refused => Exit::Refused,
            RecoverOutcome::Usage => Exit::Usage,
            RecoverOutcome::Failed => Exit::Failed,
        }
    }

    pub fn print(&self) -> Exit {
        println!("{}", serde_json::to_string(self).unwrap_or_default());
        if let Some(e) = &self.error {
            eprintln!("{e}");
        }
        self.exit()
    }
}

/// The RPO of a time target: the target minus when the last applied transaction began.
pub fn rpo_seconds(target: &Target, last_transaction: Option<u32>) -> Option<i64> {
    match target {
        Target::Before(t) => last_transaction.map(|l| t.as_second() - i64::from(l)),
        Target::Through(_) => None,
    }
}

/// One recovery of `shard`, stamped `now`.
pub async fn recover(kube: &kube::Client, shard: &ShardRef, o: &RecoverOptions) -> RecoverLine {
    let now = Timestamp::now();
    let mut line = RecoverLine::new(shard.to_string(), target_text(&o.target));
    let snapshots = match apis::shard_snapshots(kube, shard).await {
        Ok(s) => s,
        Err(e) => {
            return line.end(
                RecoverOutcome::Failed,
                format!("listing VolumeSnapshots: {e}"),
            );
        }
    };
    let keyspace_shard = shard.shard.to_string();
    let read = match Archive::new(&o.archive, &shard.keyspace, &keyspace_shard) {
        Ok(a) => read_archive(&a, &shard.keyspace, &keyspace_shard, now).await,
        Err(e) => Err(e),
    };
    let observed = match read {
        Ok(obs) => obs,
        Err(e) => return line.end(RecoverOutcome::Failed, format!("the archive: {e}")),
    };
    let (bases, passed) = bases(&snapshots, shard);
    if let Some(name) = &o.snapshot
        && let Err(e) = named_base(name, &bases, &passed, shard)
    {
        return line.end(RecoverOutcome::Usage, e);
    }
    let plan = match chain::choose(
        &bases,
        &observed.increments,
        &o.target,
        o.snapshot.as_deref(),
    ) {
        Ok(p) => p,
        Err(refused) => {
            let window = chain::window(&bases, &observed.increments);
            let why: Vec<String> = refused.iter().map(|(n, r)| format!("{n}: {r}")).collect();
            let message = crate::report::refusal_message(&line.shard, &o.target, &window);
            return line.end(
                RecoverOutcome::Refused,
                format!("{message}; {}", why.join("; ")),
            );
        }
    };
    line.base = Some(plan.base.clone());
    line.increments.clone_from(&plan.increments);
    let Some(base_object) = snapshots
        .iter()
        .find(|s| s.pointer("/metadata/name").and_then(Value::as_str) == Some(&plan.base))
    else {
        return line.end(
            RecoverOutcome::Failed,
            "the chosen base was not among those read",
        );
    };
    let recovery = match shape(kube, shard, base_object, o).await {
        Ok(r) => r,
        Err(e) => return line.end(RecoverOutcome::Refused, e),
    };
    let name = recovery_name(shard, &now.strftime("%Y%m%d%H%M%S").to_string());
    let claim = pvc(&name, &recovery);
    let spec = pod(&name, &recovery, &o.settings);
    let class = base_object
        .pointer("/spec/volumeSnapshotClassName")
        .and_then(Value::as_str);
    line.after = Some(o.after);
    if o.dry_run {
        // The cut's set is the replay's: known only after it.
        let snapshot = (o.after == After::Cut).then(|| {
            cut(
                &name,
                &recovery,
                class,
                "(the recovered server's gtid_executed)",
            )
        });
        line.outcome = RecoverOutcome::Planned;
        line.objects = Some(serde_json::json!({"pvc": claim, "pod": spec, "snapshot": snapshot}));
        return line;
    }
    line.pod = Some(name.clone());
    let limit = Duration::from_secs(o.settings.deadline_seconds.saturating_add(60));
    let cut_with = (o.after == After::Cut).then_some((&recovery, class));
    let (done, outcome) = act(
        kube,
        &shard.namespace,
        &name,
        (&claim, &spec),
        cut_with,
        limit,
    )
    .await;
    line.steps = done.steps;
    line.left = done.left;
    line.rto_ms = done.cut_ms.or(Some(done.replayed_ms).filter(|m| *m > 0));
    line.rpo_seconds = done
        .result
        .as_ref()
        .and_then(|r| rpo_seconds(&o.target, r.last_transaction));
    line.result = done.result;
    line.snapshot = done.cut;
    match outcome {
        Ok(()) => {
            line.outcome = RecoverOutcome::Recovered;
            if o.after == After::Serve {
                line.shell = Some(format!(
                    "kubectl exec -it -n {} {name} -c mysqld -- mysql -S /vt/socket/mysql.sock -u vt_dba",
                    shard.namespace
                ));
            }
            line
        }
        Err(e) => line.end(RecoverOutcome::Failed, e),
    }
}

/// The recovery's shape from the shard's tablets: the mysqld image, the data's owner, the
/// PVC's class and size (at least the base's).
async fn shape(
    kube: &kube::Client,
    shard: &ShardRef,
    base: &Value,
    o: &RecoverOptions,
) -> Result<Recovery, String> {
    let tablet = read_shape_tablet(kube, shard)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no tablet Pod of {shard} with a data PVC was found"))?;
    let mysqld_image = tablet
        .pod
        .mysqld_image
        .ok_or_else(|| "the tablet Pod has no mysqld container with an image".to_owned())?;
    let pod_security = tablet
        .pod
        .security
        .map_err(|e| format!("the tablet Pod: {e}"))?;
    let claim = tablet.claim;
    let tablet_pvc = tablet
        .pvc
        .ok_or_else(|| format!("the tablet's data PVC {claim} was not found"))?;
    let requested = tablet_pvc
        .requested
        .map_err(|e| format!("the tablet's data PVC {claim}: {e}"))?;
    let restore_bytes = base
        .pointer("/status/restoreSize")
        .and_then(Value::as_str)
        .and_then(|q| quantity::bytes(q).ok())
        .unwrap_or(0);
    Ok(Recovery {
        shard: shard.clone(),
        base: base
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        base_facts: crate::observe::base_facts(base),
        target: o.target.clone(),
        storage_bytes: requested.max(restore_bytes),
        storage_class: tablet_pvc.storage_class,
        mysqld_image,
        pod_security,
        after: o.after,
        owner: o.owner.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpo_is_the_time_target_minus_the_last_transaction_and_none_for_a_set() {
        let at = Target::Before(Timestamp::from_second(1_000).unwrap());
        assert_eq!(rpo_seconds(&at, Some(990)), Some(10));
        assert_eq!(rpo_seconds(&at, None), None);
        let set = vtsnap_core::coverage::GtidSet::parse(
            vtsnap_core::snapshot::GtidFlavor::Mysql56,
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
            vtsnap_core::coverage::Text::Server,
        )
        .unwrap();
        assert_eq!(rpo_seconds(&Target::Through(set), Some(990)), None);
    }

    #[test]
    fn the_line_s_exit_follows_its_outcome() {
        let line = |outcome| RecoverLine {
            outcome,
            ..RecoverLine::new("s".into(), "t".into())
        };
        assert_eq!(line(RecoverOutcome::Recovered).exit(), Exit::Ok);
        assert_eq!(line(RecoverOutcome::Planned).exit(), Exit::Ok);
        assert_eq!(line(RecoverOutcome::Refused).exit(), Exit::Refused);
        assert_eq!(line(RecoverOutcome::Failed).exit(), Exit::Failed);
        assert_eq!(line(RecoverOutcome::Usage).exit(), Exit::Usage);
    }
}
