//! A whole fake shard for snapshot-job tests: the fixture installed in a fake Kubernetes
//! API and a served fake vtctld, with the fake node helper and the fake CSI snapshot
//! controller reconciling against the API (none of these can run for real here).

use std::time::Duration;

use crate::fake_kube::FakeKube;
use crate::fake_node::{FakeNodeHelper, NodeScript};
use crate::fake_snapshotter::{Behaviour, FakeSnapshotter};
use crate::fake_vtctld::FakeVtctld;
use crate::fixtures::ShardFixture;
use crate::grpc::Running;

/// How often the fake node helper and snapshotter reconcile.
const RECONCILE_EVERY: Duration = Duration::from_millis(20);

/// Everything stops when dropped.
#[derive(Debug)]
pub struct FakeShard {
    pub kube: FakeKube,
    pub vtctld: FakeVtctld,
    pub vt: Running,
    pub node: FakeNodeHelper,
    pub snapshotter: FakeSnapshotter,
    pub fixture: ShardFixture,
}

impl FakeShard {
    /// Installs `fixture`, serves the fake vtctld and starts the node helper (default
    /// script) and the snapshotter (default behaviour).
    pub async fn start(fixture: ShardFixture) -> Self {
        let kube = FakeKube::new();
        let vtctld = FakeVtctld::new();
        fixture.install(&kube, &vtctld);
        let vt = vtctld.serve().await;
        let node = FakeNodeHelper::start(&kube, "", NodeScript::default(), RECONCILE_EVERY);
        let snapshotter = FakeSnapshotter::start(&kube, Behaviour::default(), RECONCILE_EVERY);
        Self {
            kube,
            vtctld,
            vt,
            node,
            snapshotter,
            fixture,
        }
    }
}
