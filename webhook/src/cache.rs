//! The server's inventory: kube-runtime reflectors (a watch each, never a LIST per
//! request) over the namespaces of the configured clusters — vtsnap's VolumeSnapshots,
//! tablet PVCs and VitessClusters — and the shard states the vtctld refresh writes.
//!
//! The webhook counts as synced once the snapshot and PVC caches of every namespace have
//! been filled; until then every object is left as created. The VitessCluster cache is
//! best effort (only the inherited vtbackup template's hash needs it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use vtsnap_core::cli::MAX_WATCH_SECONDS;
use vtsnap_core::labels;
use vtsnap_core::naming::KeyRange;
use vtsnap_core::snapshot::{self, VolumeSnapshot};

use crate::inventory::{Inventory, ShardKey, ShardState, SnapshotRead, snapshot_of};

/// The shard states, written by the vtctld refresh and read by every review.
pub type ShardStates = Arc<RwLock<BTreeMap<ShardKey, ShardState>>>;

fn vitess_clusters() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("planetscale.com", "v2", "VitessCluster"),
        "vitessclusters",
    )
}

fn volume_snapshots() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(snapshot::GROUP, snapshot::VERSION, "VolumeSnapshot"),
        snapshot::PLURAL,
    )
}

/// The caches of one namespace.
#[derive(Clone)]
struct Namespace {
    snapshots: Store<DynamicObject>,
    pvcs: Store<PersistentVolumeClaim>,
    clusters: Store<DynamicObject>,
}

/// Every cache; cheap to clone (the stores are shared).
#[derive(Clone)]
pub struct Caches {
    namespaces: Arc<BTreeMap<String, Namespace>>,
    shard_states: ShardStates,
    synced: Arc<AtomicUsize>,
    need: usize,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("namespaces", &self.namespaces.keys().collect::<Vec<_>>())
            .field("synced", &self.synced.load(Ordering::Relaxed))
            .field("need", &self.need)
            .finish()
    }
}

fn watch_config(selector: Option<&str>) -> watcher::Config {
    let c = watcher::Config::default().timeout(MAX_WATCH_SECONDS);
    match selector {
        Some(s) => c.labels(s),
        None => c,
    }
}

/// Runs one reflector until the process ends; counts itself synced once it has listed.
fn run_reflector<K>(
    writer: Writer<K>,
    api: Api<K>,
    config: watcher::Config,
    synced: Option<Arc<AtomicUsize>>,
    what: String,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let reader = writer.as_reader();
    if let Some(synced) = synced {
        tokio::spawn(async move {
            if reader.wait_until_ready().await.is_ok() {
                synced.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    tokio::spawn(async move {
        let mut s = std::pin::pin!(stream);
        while let Some(e) = s.next().await {
            if let Err(e) = e {
                tracing::warn!(cache = %what, error = %e, "watch failed; it is retried with backoff");
            }
        }
    })
}

impl Caches {
    /// Starts the reflectors for `namespaces`.
    pub fn start(
        client: &kube::Client,
        namespaces: &BTreeSet<String>,
    ) -> (Self, Vec<tokio::task::JoinHandle<()>>) {
        let synced = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        let mut map = BTreeMap::new();
        let snapshot_selector =
            labels::selector(&[(labels::MANAGED_BY, labels::MANAGED_BY_VTSNAP)]);
        let pvc_selector = labels::selector(&[(labels::COMPONENT, labels::COMPONENT_VTTABLET)]);
        for ns in namespaces {
            let snaps_ar = volume_snapshots();
            let w = Writer::new(snaps_ar.clone());
            let snapshots = w.as_reader();
            tasks.push(run_reflector(
                w,
                Api::namespaced_with(client.clone(), ns, &snaps_ar),
                watch_config(Some(&snapshot_selector)),
                Some(synced.clone()),
                format!("VolumeSnapshots in {ns}"),
            ));
            let w = Writer::<PersistentVolumeClaim>::default();
            let pvcs = w.as_reader();
            tasks.push(run_reflector(
                w,
                Api::namespaced(client.clone(), ns),
                watch_config(Some(&pvc_selector)),
                Some(synced.clone()),
                format!("tablet PVCs in {ns}"),
            ));
            let clusters_ar = vitess_clusters();
            let w = Writer::new(clusters_ar.clone());
            let clusters = w.as_reader();
            tasks.push(run_reflector(
                w,
                Api::namespaced_with(client.clone(), ns, &clusters_ar),
                watch_config(None),
                None,
                format!("VitessClusters in {ns}"),
            ));
            map.insert(
                ns.clone(),
                Namespace {
                    snapshots,
                    pvcs,
                    clusters,
                },
            );
        }
        let need = 2 * map.len();
        (
            Self {
                namespaces: Arc::new(map),
                shard_states: Arc::default(),
                synced,
                need,
            },
            tasks,
        )
    }

    pub fn shard_states(&self) -> ShardStates {
        self.shard_states.clone()
    }

    /// Every shard with at least one of vtsnap's snapshots (what the refresh reads).
    pub fn shards_with_snapshots(&self) -> BTreeSet<ShardKey> {
        let mut out = BTreeSet::new();
        for (ns, n) in self.namespaces.iter() {
            for s in n.snapshots.state() {
                let Ok(v) = serde_json::to_value(&*s) else {
                    continue;
                };
                if let Ok(s) = VolumeSnapshot::read(&v) {
                    out.insert(ShardKey {
                        namespace: ns.clone(),
                        cluster: s.cluster,
                        keyspace: s.keyspace,
                        shard: s.shard.to_string(),
                    });
                }
            }
        }
        out
    }

    /// How many snapshots are cached (all namespaces).
    pub fn snapshot_count(&self) -> usize {
        self.namespaces.values().map(|n| n.snapshots.len()).sum()
    }
}

fn label<'a>(o: &'a DynamicObject, key: &str) -> Option<&'a str> {
    o.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn name_is(meta: &kube::api::ObjectMeta, name: &str) -> bool {
    meta.name.as_deref() == Some(name)
}

impl Inventory for Caches {
    fn synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed) >= self.need
    }

    fn snapshots(&self, shard: &ShardKey) -> Vec<SnapshotRead> {
        let Some(n) = self.namespaces.get(&shard.namespace) else {
            return Vec::new();
        };
        // Labels first, on the cached objects: only the shard's few are converted and read.
        let Ok(safe) = shard.shard.parse::<KeyRange>().map(|k| k.safe_name()) else {
            return Vec::new();
        };
        n.snapshots
            .state_filter(|o| {
                label(o, snapshot::LABEL_CLUSTER) == Some(shard.cluster.as_str())
                    && label(o, snapshot::LABEL_KEYSPACE) == Some(shard.keyspace.as_str())
                    && label(o, snapshot::LABEL_SHARD) == Some(safe.as_str())
            })
            .iter()
            .filter_map(|o| serde_json::to_value(&**o).ok())
            .filter(|v| snapshot_of(v, shard))
            .map(|v| VolumeSnapshot::read(&v))
            .collect()
    }

    fn shard_state(&self, shard: &ShardKey) -> Option<ShardState> {
        self.shard_states.read().ok()?.get(shard).cloned()
    }

    fn cluster(&self, namespace: &str, name: &str) -> Option<Value> {
        let n = self.namespaces.get(namespace)?;
        let o = n.clusters.find(|o| name_is(&o.metadata, name))?;
        serde_json::to_value(&*o).ok()
    }

    fn pvc(&self, namespace: &str, name: &str) -> Option<Value> {
        let n = self.namespaces.get(namespace)?;
        let o = n.pvcs.find(|o| name_is(&o.metadata, name))?;
        serde_json::to_value(&*o).ok()
    }
}
