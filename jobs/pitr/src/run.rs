//! `vtsnap-pitr archive`: one increment of a shard's binlog archive (docs/pitr.md §6):
//! observe (the config's shard, its snapshots, its tablets, the archive) → decide
//! ([`crate::decide::archive`]) → act ([`crate::act::archive`]) → report
//! ([`crate::report::ArchiveLine`]).

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::config::Config;
use vtsnap_core::discover;
use vtsnap_core::reconcile::apis;
use vtsnap_core::shard::ShardName;
use vtsnap_core::vtctld::VtctldClient;
use vtsnap_core::vtctld::client::CallLimits;

use crate::act::archive::take;
use crate::archive::FileArchive;
use crate::decide::archive::{OnPrimary, next_increment};
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
    /// The root of Vitess's file backup storage, as this Pod mounts it.
    pub archive_root: PathBuf,
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
    let archive = match FileArchive::new(&opts.archive_root, &shard.keyspace, &keyspace_shard) {
        Ok(a) => a,
        Err(e) => return line.end(ArchiveOutcome::Usage, "bad-shard-name", e),
    };
    let observed = match read_archive(&archive, &shard.keyspace, &keyspace_shard, Timestamp::now())
    {
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
    let next = match next_increment(&bases, &observed.increments, &tablets, on_primary) {
        Ok(t) => t,
        Err(e) => return line.end(ArchiveOutcome::Refused, "no-increment", e),
    };
    line.take = Some(next.clone());
    if opts.mode == Mode::DryRun {
        return line.finish(ArchiveOutcome::Planned);
    }
    match take(&vtctld, &next, opts.backup_limit).await {
        Ok(t) => line.finish(t.into()),
        Err(e) => line.end(ArchiveOutcome::Failed, "backup", e),
    }
}
