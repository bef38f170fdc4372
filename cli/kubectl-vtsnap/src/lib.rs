//! `kubectl vtsnap`: one tool for the people who run vtsnap. `status` (is each shard
//! protected?), `doctor` (is the install healthy?), `backup` (a snapshot now),
//! `recover` (a shard at a point in time) and `explain` (why a snapshot is kept, deleted
//! or unusable; why a PVC was or was not restored). observe → decide → act → report, like every vtsnap program
//! (docs/kubectl-vtsnap.md).

pub mod act;
pub mod client;
pub mod decide;
pub mod explain;
pub mod kubeconfig;
pub mod observe;
pub mod recover;
pub mod report;
