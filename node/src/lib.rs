//! `vtsnap-node`: the node-local helper of vtsnap (docs/design.md §3.3, §4.4, §5.3, §5.4).
//!
//! Actions the Kubernetes API cannot do, each a library function with a debug subcommand:
//! [`probe`] (layout check), [`mysqlctl`] (stop/start mysqld through the pod's mysqlctld),
//! [`cgroup`] (hold mysqld down by freezing its container), [`fsfreeze`] (FIFREEZE).

pub mod cgroup;
pub mod daemon;
pub mod fsfreeze;
pub mod holdloop;
pub mod mysqlctl;
pub mod probe;
