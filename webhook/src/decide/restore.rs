//! Restore injection: a new tablet PVC of an opted-in pool gets `dataSourceRef` (and
//! `dataSource`) to the newest usable snapshot of its shard, chosen by the rule the drill
//! proves (`vtsnap_core::snapshot::choice`).
//!
//! The PVC is left as created (normal provisioning) and an Event says why when vtctld's
//! word on the shard is missing or stale, when the tablet was re-provisioned after a
//! restore that could not catch up, or when no snapshot is usable.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use vtsnap_core::config::ResolvedRestore;
use vtsnap_core::k8s_names::untrusted;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::SnapshotRead;
use vtsnap_core::snapshot::choice::{SeriesUnknown, choose, shard_series};

use super::{Code, Decision, EventNote, Settings, Severity};
use crate::inventory::Inventory;
use crate::observe::{NewObject, NewPvc};
use crate::patch;

use vtsnap_core::restored::{ANN_RESTORE_NODE, ANN_RESTORE_REASON, ANN_RESTORED_FROM};

/// The code of the answer when the shard's series is not known.
fn series_code(why: &SeriesUnknown) -> Code {
    match why {
        SeriesUnknown::NoPrimary => Code::ShardHasNoPrimary,
        SeriesUnknown::SeriesDiffer { .. } => Code::ShardVersionsDiffer,
        SeriesUnknown::VersionUnreadable { .. }
        | SeriesUnknown::PrimaryUnreported { .. }
        | SeriesUnknown::NoneReported => Code::ShardVersionUnknown,
    }
}

fn skipped(d: &mut Decision, code: Code, message: String, pvc: &str) {
    d.event = Some(EventNote::new(
        "RestoreSkipped",
        format!("PVC {pvc} provisioned normally: {message}"),
        Severity::Normal,
    ));
    d.push(code, message);
}

/// The PVC's tablet, if a snapshot of the shard records that it was re-provisioned, and
/// that snapshot.
fn reprovisioned(object: &NewObject, snapshots: &[SnapshotRead]) -> Option<(TabletUid, String)> {
    let uid: TabletUid = object
        .label(vtsnap_core::labels::TABLET_UID)?
        .parse()
        .ok()?;
    snapshots
        .iter()
        .filter_map(|s| s.as_ref().ok())
        .find(|s| s.reprovisioned.contains_key(&uid))
        .map(|s| (uid, s.name.clone()))
}

/// The decision for a new tablet PVC.
pub fn tablet_pvc(
    object: &NewObject,
    pvc: &NewPvc,
    shard: &ShardRef,
    policy: &ResolvedRestore,
    settings: &Settings,
    inventory: &dyn Inventory,
    now: Timestamp,
) -> Decision {
    if !policy.enabled {
        return Decision::note(
            Code::RestoreDisabled,
            "restore is not enabled for this shard",
        );
    }
    let pool = match &object.pool {
        Ok(p) => p,
        Err(why) => return Decision::note(Code::LabelsUnreadable, why.to_string()),
    };
    if !policy.opts_in(pool) {
        return Decision::note(
            Code::PoolNotOptedIn,
            format!("pool {pool:?} is not in restore.pools {:?}", policy.pools),
        );
    }
    let name = object.name();
    let mut d = Decision::default();
    if pvc
        .spec
        .as_ref()
        .is_some_and(|s| s.data_source.is_some() || s.data_source_ref.is_some())
    {
        d.push(
            Code::HasDataSource,
            "the PVC already names a data source (the pool's template sets one): left as it is",
        );
        return d;
    }
    let requested = match &pvc.requested {
        Ok(b) => *b,
        Err(why) => {
            skipped(&mut d, Code::SizeUnreadable, why.to_string(), name);
            return d;
        }
    };
    let Some(state) = inventory.shard_state(shard) else {
        skipped(
            &mut d,
            Code::ShardStateUnknown,
            format!("vtctld has not been read for shard {shard} yet"),
            name,
        );
        return d;
    };
    if let Some(e) = &state.error {
        skipped(
            &mut d,
            Code::ShardStateUnknown,
            format!("vtctld could not be read for shard {shard}: {e}"),
            name,
        );
        return d;
    }
    let age = now.duration_since(state.refreshed_at);
    let max = SignedDuration::try_from(settings.shard_state_max_age).unwrap_or(SignedDuration::MAX);
    if age > max {
        skipped(
            &mut d,
            Code::ShardStateStale,
            format!(
                "vtctld was last read for shard {shard} {}s ago (more than {}s)",
                age.as_secs(),
                max.as_secs()
            ),
            name,
        );
        return d;
    }
    let series = match shard_series(&state) {
        Ok(s) => s,
        Err(why) => {
            skipped(&mut d, series_code(&why), why.to_string(), name);
            return d;
        }
    };
    let snapshots = inventory.snapshots(shard);
    if let Some((uid, from)) = reprovisioned(object, &snapshots) {
        skipped(
            &mut d,
            Code::TabletReprovisioned,
            format!(
                "tablet {uid} was re-provisioned after a restore from snapshot {} could not catch up: it restores from the regular backup",
                untrusted(&from)
            ),
            name,
        );
        return d;
    }
    match choose(&snapshots, series, policy, requested, now) {
        Err(rejected) => {
            let why = if rejected.is_empty() {
                format!("shard {shard} has no snapshot")
            } else {
                let each: Vec<String> = rejected
                    .iter()
                    .map(|(n, r)| {
                        if n.is_empty() {
                            r.words()
                        } else {
                            format!("{n}: {}", r.words())
                        }
                    })
                    .collect();
                format!("no usable snapshot of shard {shard}: {}", each.join("; "))
            };
            skipped(&mut d, Code::NoUsableSnapshot, why, name);
        }
        Ok(c) => {
            d.patch.extend(patch::restore_from(&c.name));
            let reason = format!(
                "newest usable snapshot of shard {shard}: cut {}, {}, {} bytes ≤ the PVC's {requested}",
                c.cut, c.series, c.restore_bytes
            );
            let mut annotations = vec![
                (ANN_RESTORED_FROM, c.name.clone()),
                (ANN_RESTORE_REASON, reason.clone()),
            ];
            if policy.node_local
                && let Some(node) = &c.source_node
            {
                annotations.push((ANN_RESTORE_NODE, node.clone()));
            }
            d.patch.extend(patch::annotate(&object.meta, &annotations));
            d.event = Some(EventNote::new(
                "RestoreInjected",
                format!(
                    "PVC {name} will be provisioned from VolumeSnapshot {}: {reason}",
                    c.name
                ),
                Severity::Normal,
            ));
            d.push(Code::RestoredFromSnapshot, format!("{}: {reason}", c.name));
        }
    }
    d
}
