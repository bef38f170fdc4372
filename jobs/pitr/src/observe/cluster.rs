//! The shard's tablets, read live for the archive step (vtctld's `GetTablets`); its
//! snapshots come from `vtsnap_core::reconcile::apis::shard_snapshots`.

use vtsnap_core::shard::ShardRef;
use vtsnap_core::vtctld::{TabletType, VtctldClient, VtctldError};

use crate::decide::archive::Tablet;

/// The shard's tablets; one of a type this program does not know is left out (it is no
/// replica to take an increment on).
pub async fn tablets(vtctld: &VtctldClient, shard: &ShardRef) -> Result<Vec<Tablet>, VtctldError> {
    let listed = vtctld
        .get_tablets(&shard.keyspace, &shard.shard.to_string())
        .await?;
    Ok(listed
        .iter()
        .filter_map(|t| {
            Some(Tablet {
                alias: t.alias.as_ref()?.into(),
                kind: TabletType::try_from(t.r#type).ok()?,
            })
        })
        .collect())
}
