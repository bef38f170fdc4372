//! `vtsnap-pitr archive`: one increment of a shard's binlog archive (docs/pitr.md §6):
//! observe (the config's shard, its snapshots, its tablets, the archive) → decide
//! ([`crate::decide::archive`]) → act ([`crate::act::archive`]) → report
//! ([`crate::report::ArchiveLine`]).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::config::Config;
use vtsnap_core::discover;
use vtsnap_core::pitr::chain::Base;
use vtsnap_core::pitr::manifest::Increment;
use vtsnap_core::reconcile::apis;
use vtsnap_core::shard::{ShardName, ShardRef};
use vtsnap_core::snapshot::VolumeSnapshot;
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

use crate::act::archive::take;
use crate::act::window::write_record;
use crate::archive::{Archive, ArchiveError, ArchivePlace};
use crate::decide::archive::{OnPrimary, next_increment};
use crate::decide::window::window_record;
use crate::observe::{bases, cluster, read_archive};
use crate::report::{ArchiveLine, ArchiveOutcome};

/// Whether the increment is taken or only decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Take,
    DryRun,
}

#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    /// Vitess's backup storage: its `file` root as this Pod mounts it, or an object
    /// store's URL.
    pub archive: ArchivePlace,
    pub mode: Mode,
    /// How long the tablet's backup may take.
    pub backup_limit: Duration,
}

/// One run of the archive step for the shard `name` of `config`.
pub async fn archive(
    kube: &kube::Client,
    config: &Config,
    name: &ShardName,
    opts: &ArchiveOptions,
) -> ArchiveLine {
    let mut line = ArchiveLine::new(name.to_string());
    let configured = match config.shard(name) {
        Ok(c) => c,
        Err(e) => return line.end(ArchiveOutcome::Usage, "shard-not-configured", e),
    };
    let shard = configured.shard.clone();
    line.shard = shard.to_string();
    let policy = &configured.policy.pitr;
    if !policy.enabled {
        return line.end(
            ArchiveOutcome::Refused,
            "pitr-disabled",
            format!("the binlog archive is not enabled for {shard} (pitr.enabled)"),
        );
    }
    let endpoint =
        match discover::vtctld_endpoint(kube, &shard.namespace, &shard.cluster, &configured.vtctld)
            .await
        {
            Ok(e) => e,
            Err(e) => return line.end(ArchiveOutcome::Failed, "vtctld", e),
        };
    let vtctld = match VtctldClient::new(&endpoint, CallLimits::default()) {
        Ok(c) => c,
        Err(e) => return line.end(ArchiveOutcome::Failed, "vtctld", e),
    };
    let snapshots = match apis::shard_snapshots(kube, &shard).await {
        Ok(s) => s,
        Err(e) => return line.end(ArchiveOutcome::Failed, "read-snapshots", e),
    };
    let (bases, passed) = bases(&snapshots, &shard);
    line.passed_snapshots = passed;
    let keyspace_shard = shard.shard.to_string();
    let archive = match Archive::new(&opts.archive, &shard.keyspace, &keyspace_shard) {
        Ok(a) => a,
        Err(e) => return line.end(ArchiveOutcome::Usage, "bad-shard-name", e),
    };
    let observed =
        match read_archive(&archive, &shard.keyspace, &keyspace_shard, Timestamp::now()).await {
            Ok(o) => o,
            Err(e) => return line.end(ArchiveOutcome::Failed, "read-archive", e),
        };
    line.passed_backups = observed.unusable.clone();
    let tablets = match cluster::tablets(&vtctld, &shard).await {
        Ok(t) => t,
        Err(e) => return line.end(ArchiveOutcome::Failed, "vtctld", e),
    };
    let on_primary = if policy.allow_primary {
        OnPrimary::WhenNoReplica
    } else {
        OnPrimary::Never
    };
    let line = match next_increment(&bases, &observed.increments, &tablets, on_primary) {
        Err(e) => line.end(ArchiveOutcome::Refused, "no-increment", e),
        Ok(next) => {
            line.take = Some(next.clone());
            match opts.mode {
                Mode::DryRun => line.finish(ArchiveOutcome::Planned),
                Mode::Take => match take(&vtctld, &next, opts.backup_limit).await {
                    Ok(t) => line.finish(t.into()),
                    Err(e) => line.end(ArchiveOutcome::Failed, "backup", e),
                },
            }
        }
    };
    // Whatever this run did, the window as the archive now stands goes on the newest
    // snapshot, for `kubectl vtsnap status` (docs/pitr.md §3).
    let increments = match line.outcome {
        ArchiveOutcome::Stored => {
            read_archive(&archive, &shard.keyspace, &keyspace_shard, Timestamp::now())
                .await
                .map(|o| o.increments)
        }
        _ => Ok(observed.increments),
    };
    record_window(
        kube, &shard, &snapshots, &bases, increments, opts.mode, line,
    )
    .await
}

/// Puts the window on `line`, and (unless a dry run) on the newest base snapshot.
async fn record_window(
    kube: &kube::Client,
    shard: &ShardRef,
    snapshots: &[serde_json::Value],
    bases: &[Base],
    increments: Result<Vec<Increment>, ArchiveError>,
    mode: Mode,
    mut line: ArchiveLine,
) -> ArchiveLine {
    let increments = match increments {
        Ok(i) => i,
        Err(e) => {
            line.window_not_recorded = Some(format!("the archive could not be read again: {e}"));
            return line;
        }
    };
    let bind = |name: &str| {
        snapshots
            .iter()
            .filter(|o| {
                o.pointer("/metadata/name")
                    .and_then(serde_json::Value::as_str)
                    == Some(name)
            })
            .find_map(|o| VolumeSnapshot::read(o).ok()?.drill_of())
    };
    let (on, record) = match window_record(bases, &increments, bind, Timestamp::now()) {
        Ok(r) => r,
        Err(e) => {
            line.window_not_recorded = Some(e.to_string());
            return line;
        }
    };
    line.window = record.spans.clone();
    if mode == Mode::DryRun {
        return line;
    }
    match write_record(kube, &shard.namespace, &on, &record).await {
        Ok(()) => line.window_recorded_on = Some(on),
        Err(e) => {
            line.window_not_recorded =
                Some(format!("VolumeSnapshot {}/{on}: {e}", shard.namespace));
        }
    }
    line
}
