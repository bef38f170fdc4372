//! Label keys: vitess-operator's on tablet Pods and PVCs (`pkg/apis/planetscale/v2/labels.go`),
//! and vtsnap's own on the objects it creates (docs/design.md §4.3).

pub const COMPONENT: &str = "planetscale.com/component";
pub const CLUSTER: &str = "planetscale.com/cluster";
pub const KEYSPACE: &str = "planetscale.com/keyspace";
/// The shard's SafeName (`-80` → `x-80`).
pub const SHARD: &str = "planetscale.com/shard";
pub const CELL: &str = "planetscale.com/cell";
/// Padded by current operators, unpadded by older ones: parse as an integer.
pub const TABLET_UID: &str = "planetscale.com/tablet-uid";
/// The pool type (`replica`, `rdonly`), not the tablet's current type.
pub const TABLET_TYPE: &str = "planetscale.com/tablet-type";
pub const TABLET_INDEX: &str = "planetscale.com/tablet-index";

pub const COMPONENT_VTTABLET: &str = "vttablet";
pub const COMPONENT_VTCTLD: &str = "vtctld";
pub const COMPONENT_VTBACKUP: &str = "vtbackup";

/// The tablet Pod's container that runs mysqld (mysqlctld), in vitess-operator's Pods and
/// in vtsnap's throwaway restores.
pub const MYSQLD_CONTAINER: &str = "mysqld";

/// The tablet Pod's data volume and the port name of vtctld's gRPC Service.
pub const DATA_VOLUME: &str = "persistent-volume-claim";
pub const VTCTLD_GRPC_PORT_NAME: &str = "grpc";

pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VTSNAP: &str = "vtsnap";

/// A label selector string (`k=v,k2=v2`) from pairs.
pub fn selector(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
