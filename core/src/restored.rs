//! What the admission webhook writes on a tablet PVC it restores from a snapshot, and the
//! GC reads back to watch the restore (a node-local volume that never provisions; a tablet
//! that cannot catch up).

/// The VolumeSnapshot the PVC was given.
pub const ANN_RESTORED_FROM: &str = "vtsnap.io/restored-from";
/// Why that one, in words.
pub const ANN_RESTORE_REASON: &str = "vtsnap.io/restore-reason";
/// The node the snapshot restores on (node-local drivers): where the Pod is pinned.
pub const ANN_RESTORE_NODE: &str = "vtsnap.io/restore-node";
