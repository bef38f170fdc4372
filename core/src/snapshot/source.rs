//! Whether the volume a snapshot was taken of is a tablet PVC of the shard its labels
//! name: a label is easy to set, a PVC name is vitess-operator's formula. A tablet's PVC
//! is named as its Pod, `<cluster>-vttablet-<alias>-<hash>` (`pkg/operator/vttablet/pvc.go`),
//! and the alias's UID is the hash of `<cell> <keyspace> <shard> <pool> <index>`
//! (`pkg/operator/vttablet/uid.go`), so the name pins cluster, keyspace and shard.

use super::{ANN_SOURCE_TABLET, LABEL_TABLET_UID, VolumeSnapshot};
use crate::k8s_names::untrusted;
use crate::naming::{TabletAlias, TabletUid, tablet_pod_name, tablet_uid};

fn shown(alias: &TabletAlias) -> String {
    untrusted(&alias.to_string()).to_string()
}

/// The pools that have a data volume (`VitessShardTabletPool.type`; external pools have
/// none).
const POOL_TYPES: [&str; 2] = ["replica", "rdonly"];

/// The highest tablet index of a pool a source may have (a pool's `replicas`); a tablet
/// beyond it is not recognised as the shard's (its snapshot is passed over, never used).
pub const MAX_POOL_INDEX: u32 = 256;

/// Why a snapshot's source is not a tablet PVC of its shard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceMismatch {
    #[error("no spec.source.persistentVolumeClaimName")]
    NoClaim,
    #[error("no {ANN_SOURCE_TABLET} recorded")]
    NoTablet,
    #[error("{LABEL_TABLET_UID} {label} is not the UID of {ANN_SOURCE_TABLET} {alias}")]
    UidDiffers { label: TabletUid, alias: String },
    #[error(
        "source PVC {claim} is not the PVC of tablet {alias} of cluster {cluster} ({expected})"
    )]
    NotTheTabletsPvc {
        claim: String,
        alias: String,
        cluster: String,
        expected: String,
    },
    #[error("source tablet {alias} is not a tablet of keyspace {keyspace} shard {shard}")]
    OtherShard {
        alias: String,
        keyspace: String,
        shard: String,
    },
}

impl VolumeSnapshot {
    /// `Ok` when the snapshot's source claim is the PVC of its source tablet, and that
    /// tablet is one vitess-operator makes for the labelled cluster, keyspace and shard.
    pub fn source_of_its_shard(&self) -> Result<(), SourceMismatch> {
        let claim = self
            .source_claim
            .as_deref()
            .ok_or(SourceMismatch::NoClaim)?;
        let alias = self
            .source_tablet
            .as_ref()
            .ok_or(SourceMismatch::NoTablet)?;
        if let Some(label) = self.tablet_uid
            && label != alias.uid
        {
            return Err(SourceMismatch::UidDiffers {
                label,
                alias: shown(alias),
            });
        }
        let expected = tablet_pod_name(&self.cluster, alias);
        if claim != expected {
            return Err(SourceMismatch::NotTheTabletsPvc {
                claim: untrusted(claim).to_string(),
                alias: shown(alias),
                cluster: untrusted(&self.cluster).to_string(),
                expected,
            });
        }
        // Index first: tablets are numbered from 1, so a real source is found in a few
        // hashes; only a stranger costs every one.
        let ours = (1..=MAX_POOL_INDEX).any(|i| {
            POOL_TYPES.iter().any(|pool| {
                tablet_uid(&alias.cell, &self.keyspace, &self.shard, pool, i) == alias.uid
            })
        });
        if !ours {
            return Err(SourceMismatch::OtherShard {
                alias: shown(alias),
                keyspace: untrusted(&self.keyspace).to_string(),
                shard: self.shard.to_string(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::naming::KeyRange;
    use crate::shard::ShardRef;
    use crate::snapshot::{ANN_GTID_EXECUTED, NewSnapshot, build};

    fn shard(s: &str) -> KeyRange {
        s.parse().unwrap()
    }

    /// A snapshot of `example/commerce/-80` taken of tablet `alias`'s PVC `claim`.
    fn taken_of(alias: &TabletAlias, claim: &str) -> VolumeSnapshot {
        let r = ShardRef {
            cluster: "example".into(),
            namespace: "vitess".into(),
            keyspace: "commerce".into(),
            shard: shard("-80"),
        };
        let none = BTreeMap::new();
        let tablet = alias.to_string();
        VolumeSnapshot::read(&build(&NewSnapshot {
            shard: &r,
            name: "s".into(),
            class: None,
            source_pvc: claim,
            source_tablet: &tablet,
            source_uid: alias.uid.get(),
            source_node: "node-2",
            mode: "cold",
            gtid: (ANN_GTID_EXECUTED, "MariaDB/0-1-100"),
            mysql_version: "10.11.18-MariaDB",
            mysql_flavor: "mariadb",
            extra_labels: &none,
            extra_annotations: &none,
            owner: None,
        }))
        .unwrap()
    }

    fn tablet(keyspace: &str, range: &str, pool: &str, index: u32) -> TabletAlias {
        TabletAlias {
            cell: "zone1".into(),
            uid: tablet_uid("zone1", keyspace, &shard(range), pool, index),
        }
    }

    #[test]
    fn a_tablet_pvc_of_the_labelled_shard_is_its_source() {
        for t in [
            tablet("commerce", "-80", "replica", 1),
            tablet("commerce", "-80", "rdonly", 3),
            tablet("commerce", "-80", "replica", MAX_POOL_INDEX),
        ] {
            let s = taken_of(&t, &tablet_pod_name("example", &t));
            assert_eq!(s.source_of_its_shard(), Ok(()), "{t}");
        }
    }

    #[test]
    fn another_shards_or_clusters_pvc_or_a_made_up_name_is_not() {
        let other = tablet("commerce", "80-", "replica", 1);
        let s = taken_of(&other, &tablet_pod_name("example", &other));
        let e = s.source_of_its_shard().unwrap_err();
        assert!(matches!(e, SourceMismatch::OtherShard { .. }), "{e}");
        assert!(
            e.to_string()
                .ends_with("is not a tablet of keyspace \"commerce\" shard -80"),
            "{e}"
        );
        let other_keyspace = tablet("customer", "-80", "replica", 1);
        let s = taken_of(
            &other_keyspace,
            &tablet_pod_name("example", &other_keyspace),
        );
        assert!(matches!(
            s.source_of_its_shard(),
            Err(SourceMismatch::OtherShard { .. })
        ));
        let beyond = tablet("commerce", "-80", "replica", MAX_POOL_INDEX + 1);
        let s = taken_of(&beyond, &tablet_pod_name("example", &beyond));
        assert!(matches!(
            s.source_of_its_shard(),
            Err(SourceMismatch::OtherShard { .. })
        ));

        let ours = tablet("commerce", "-80", "replica", 2);
        let s = taken_of(&ours, &tablet_pod_name("other", &ours));
        assert!(matches!(
            s.source_of_its_shard(),
            Err(SourceMismatch::NotTheTabletsPvc { .. })
        ));
        let e = taken_of(&ours, "pvc-2").source_of_its_shard().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "source PVC \"pvc-2\" is not the PVC of tablet \"{ours}\" of cluster \"example\" ({})",
                tablet_pod_name("example", &ours)
            )
        );
        let s = taken_of(&other, &tablet_pod_name("example", &other));
        assert_eq!(
            s.source_of_its_shard().unwrap_err().to_string(),
            format!("source tablet \"{other}\" is not a tablet of keyspace \"commerce\" shard -80")
        );
    }

    #[test]
    fn what_is_not_recorded_or_disagrees_is_not_a_source() {
        let ours = tablet("commerce", "-80", "replica", 2);
        let good = taken_of(&ours, &tablet_pod_name("example", &ours));
        let mut s = good.clone();
        s.source_claim = None;
        assert_eq!(s.source_of_its_shard(), Err(SourceMismatch::NoClaim));
        let mut s = good.clone();
        s.source_tablet = None;
        assert_eq!(s.source_of_its_shard(), Err(SourceMismatch::NoTablet));
        let mut s = good.clone();
        s.tablet_uid = Some(TabletUid::new(7));
        assert!(matches!(
            s.source_of_its_shard(),
            Err(SourceMismatch::UidDiffers { .. })
        ));
        // Without the UID label the alias alone decides.
        let mut s = good;
        s.tablet_uid = None;
        assert_eq!(s.source_of_its_shard(), Ok(()));
    }
}
