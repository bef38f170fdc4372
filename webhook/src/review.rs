//! One review, end to end without I/O: the request read, the decision taken, the response
//! built. The server and the offline `review` command both call [`review`].

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_core::shard::ShardRef;

use crate::admission::{self, Request};
use crate::decide::{self, Decision, Review, Settings};
use crate::observe::{Inventory, ShardState, SnapshotRead};

/// The response review and the decision behind it.
pub fn review(
    req: &Request,
    config: &Config,
    settings: &Settings,
    inventory: &dyn Inventory,
    now: Timestamp,
) -> (Value, Decision) {
    let d = decide::decide(
        &Review {
            kind: req.kind,
            operation: &req.operation,
            namespace: &req.namespace,
            object: &req.object,
        },
        config,
        settings,
        inventory,
        now,
    );
    (admission::respond(&req.uid, &d), d)
}

/// An inventory with one PVC read outside the caches (a cache miss the server filled).
pub struct Overlay<'a> {
    base: &'a dyn Inventory,
    pvc: Option<Value>,
}

impl std::fmt::Debug for Overlay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overlay")
            .field("pvc", &self.pvc.is_some())
            .finish_non_exhaustive()
    }
}

impl<'a> Overlay<'a> {
    pub fn new(base: &'a dyn Inventory, pvc: Option<Value>) -> Self {
        Self { base, pvc }
    }
}

impl Inventory for Overlay<'_> {
    fn synced(&self) -> bool {
        self.base.synced()
    }

    fn snapshots(&self, shard: &ShardRef) -> Vec<SnapshotRead> {
        self.base.snapshots(shard)
    }

    fn shard_state(&self, shard: &ShardRef) -> Option<ShardState> {
        self.base.shard_state(shard)
    }

    fn cluster(&self, namespace: &str, name: &str) -> Option<Value> {
        self.base.cluster(namespace, name)
    }

    fn pvc(&self, namespace: &str, name: &str) -> Option<Value> {
        let mine = self.pvc.as_ref().filter(|p| {
            p.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace)
                && p.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
        });
        mine.cloned().or_else(|| self.base.pvc(namespace, name))
    }
}
