//! Takes the next increment of the archive through vtctld's `Backup`.

use std::time::Duration;

use vtsnap_core::vtctld::messages::vtctldata::BackupRequest;
use vtsnap_core::vtctld::{VtctldClient, VtctldError};

use crate::decide::archive::Take;

/// What the tablet logs when nothing was written since the position asked for
/// (vitess `go/vt/mysqlctl/backup.go`, `EmptyBackupMessage`): the call succeeds and no
/// backup is stored.
pub const EMPTY_BACKUP: &str = "no new data to backup, skipping it";

/// How an increment call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// Stored.
    Stored,
    /// Nothing new since `from`: nothing stored.
    Empty,
}

/// Asks vtctld for the increment `take` names, waiting up to `limit`; the client's
/// per-call timeout must cover the first answer only.
pub async fn take(
    client: &VtctldClient,
    take: &Take,
    limit: Duration,
) -> Result<Taken, VtctldError> {
    let req = BackupRequest {
        tablet_alias: Some((&take.alias).into()),
        allow_primary: take.on_primary,
        // At least 1: the tablet waits for ever at 0.
        concurrency: 4,
        incremental_from_pos: take.from.clone(),
        upgrade_safe: false,
    };
    let lines = client.backup(req, limit).await?;
    Ok(if lines.iter().any(|l| l.contains(EMPTY_BACKUP)) {
        Taken::Empty
    } else {
        Taken::Stored
    })
}
