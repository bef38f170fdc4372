//! The contract between the webhook, which injects the restore init container into a new
//! tablet's Pod, and `vtsnap-restore`, which runs in it: one definition both sides use.

/// Where the init container mounts the tablet's data volume: vitess-operator's `mysqld`
/// container mounts the same subPath there (pkg/operator/vttablet/datastore.go).
/// The init container's name in the tablet Pod (and in the drill's Pod, which restores the
/// same way).
pub const CONTAINER: &str = "vtsnap-restore";

pub const VTDATAROOT: &str = "/vt/vtdataroot";

/// The data volume's subPath that holds the vtdataroot.
pub const VTDATAROOT_SUBPATH: &str = "vtdataroot";

/// The tablet's UID, filled by the webhook from the Pod's own label.
pub const ENV_TABLET_UID: &str = "VTSNAP_TABLET_UID";

/// The vtdataroot, when not [`VTDATAROOT`].
pub const ENV_VTDATAROOT: &str = "VTSNAP_VTDATAROOT";

/// The log format every program reads (`--log-format`).
pub const ENV_LOG_FORMAT: &str = crate::cli::ENV_LOG_FORMAT;

/// The user and group of vitess-operator's tablet Pods, which the init container runs as
/// so that what it moves stays theirs.
pub const POD_USER: u32 = 999;

/// The Job that owns a throwaway restore's objects (a drill's, a recovery's), so that the
/// garbage collector removes what a killed run leaves behind once the Job is deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOwner {
    pub name: String,
    pub uid: String,
}

impl JobOwner {
    /// The `ownerReferences` entry: not the controller, and no blocking of the Job's
    /// deletion (its account may not update Jobs' finalizers).
    pub fn reference(&self) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job", "name": self.name, "uid": self.uid,
            "controller": false, "blockOwnerDeletion": false,
        })
    }
}
