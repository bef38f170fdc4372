//! The server's inventory: kube-runtime reflectors (a watch each, never a LIST per
//! request) over the namespaces of the configured clusters — vtsnap's VolumeSnapshots,
//! tablet PVCs and VitessClusters — and the shard states the vtctld refresh writes.
//!
//! The webhook counts as synced once the snapshot and PVC caches of every namespace have
//! been filled; until then every object is left as created. The VitessCluster cache is
//! best effort (only the inherited vtbackup template's hash needs it).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use vtsnap_core::cli::MAX_WATCH_SECONDS;
use vtsnap_core::labels;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::choice::ShardState;
use vtsnap_core::snapshot::{
    ANN_DRILL, DrillOf, DrillRecord, DrillSeen, SnapshotRead, VolumeSnapshot,
};

use crate::inventory::Inventory;
use crate::observe::{FirstPoolUnknown, PvcRead, PvcTemplate};

/// The shard states, written by the vtctld refresh and read by every review.
pub type ShardStates = Arc<RwLock<BTreeMap<ShardRef, ShardState>>>;

/// The caches of one namespace.
#[derive(Clone)]
struct Namespace {
    snapshots: Store<DynamicObject>,
    index: Arc<RwLock<ShardIndex>>,
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

/// Each shard's snapshots by name.
type Shards = HashMap<ShardRef, BTreeMap<String, Arc<DynamicObject>>>;

/// The snapshots of each shard, kept beside the reflector's store from the same watch
/// events, so that a review reads its shard's few snapshots and never scans the cache.
#[derive(Debug, Default)]
struct ShardIndex {
    live: Shards,
    /// Where each snapshot is, by name (its labels may change).
    shard_of: HashMap<String, ShardRef>,
    /// A relist in progress (replaces `live` when it is done, as the store does).
    relist: Option<(Shards, HashMap<String, ShardRef>)>,
}

/// The shard a snapshot's labels name (`None`: they do not name one).
fn shard_key(namespace: &str, o: &DynamicObject) -> Option<ShardRef> {
    ShardRef::from_labels(namespace, o.metadata.labels.as_ref()?).ok()
}

impl ShardIndex {
    fn insert(
        live: &mut Shards,
        shard_of: &mut HashMap<String, ShardRef>,
        namespace: &str,
        o: &DynamicObject,
    ) {
        let Some(name) = o.metadata.name.clone() else {
            return;
        };
        if let Some(old) = shard_of.remove(&name)
            && let Some(m) = live.get_mut(&old)
        {
            m.remove(&name);
        }
        if let Some(key) = shard_key(namespace, o) {
            live.entry(key.clone())
                .or_default()
                .insert(name.clone(), Arc::new(o.clone()));
            shard_of.insert(name, key);
        }
    }

    fn apply(&mut self, namespace: &str, e: &watcher::Event<DynamicObject>) {
        match e {
            watcher::Event::Init => self.relist = Some(Default::default()),
            watcher::Event::InitApply(o) => {
                if let Some((live, shard_of)) = &mut self.relist {
                    Self::insert(live, shard_of, namespace, o);
                }
            }
            watcher::Event::InitDone => {
                if let Some((live, shard_of)) = self.relist.take() {
                    self.live = live;
                    self.shard_of = shard_of;
                }
            }
            watcher::Event::Apply(o) => {
                Self::insert(&mut self.live, &mut self.shard_of, namespace, o)
            }
            watcher::Event::Delete(o) => {
                if let Some(name) = &o.metadata.name
                    && let Some(old) = self.shard_of.remove(name)
                    && let Some(m) = self.live.get_mut(&old)
                {
                    m.remove(name);
                }
            }
        }
    }
}

/// What a reflector does with each watch event besides storing it.
type OnEvent<K> = Box<dyn FnMut(&watcher::Event<K>) + Send>;

/// Runs one reflector until the process ends; counts itself synced once it has listed.
fn run_reflector<K>(
    writer: Writer<K>,
    api: Api<K>,
    config: watcher::Config,
    synced: Option<Arc<AtomicUsize>>,
    mut on_event: Option<OnEvent<K>>,
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
            match e {
                Ok(e) => {
                    if let Some(f) = on_event.as_mut() {
                        f(&e);
                    }
                }
                Err(e) => {
                    tracing::warn!(cache = %what, error = %e, "watch failed; it is retried with backoff");
                }
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
            let snaps_ar = vtsnap_core::reconcile::apis::volume_snapshot_resource();
            let w = Writer::new(snaps_ar.clone());
            let snapshots = w.as_reader();
            let index: Arc<RwLock<ShardIndex>> = Arc::default();
            let (i, n) = (index.clone(), ns.clone());
            tasks.push(run_reflector(
                w,
                Api::namespaced_with(client.clone(), ns, &snaps_ar),
                watch_config(Some(&snapshot_selector)),
                Some(synced.clone()),
                Some(Box::new(move |e| {
                    if let Ok(mut i) = i.write() {
                        i.apply(&n, e);
                    }
                })),
                format!("VolumeSnapshots in {ns}"),
            ));
            let w = Writer::<PersistentVolumeClaim>::default();
            let pvcs = w.as_reader();
            tasks.push(run_reflector(
                w,
                Api::namespaced(client.clone(), ns),
                watch_config(Some(&pvc_selector)),
                Some(synced.clone()),
                None,
                format!("tablet PVCs in {ns}"),
            ));
            let clusters_ar = vtsnap_core::reconcile::apis::vitess_cluster_resource();
            let w = Writer::new(clusters_ar.clone());
            let clusters = w.as_reader();
            tasks.push(run_reflector(
                w,
                Api::namespaced_with(client.clone(), ns, &clusters_ar),
                watch_config(None),
                None,
                None,
                format!("VitessClusters in {ns}"),
            ));
            map.insert(
                ns.clone(),
                Namespace {
                    snapshots,
                    index,
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
    pub fn shards_with_snapshots(&self) -> BTreeSet<ShardRef> {
        self.namespaces
            .values()
            .filter_map(|n| n.index.read().ok())
            .flat_map(|i| {
                i.live
                    .iter()
                    .filter(|(_, m)| !m.is_empty())
                    .map(|(k, _)| k.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// How many snapshots are cached (all namespaces).
    pub fn snapshot_count(&self) -> usize {
        self.namespaces.values().map(|n| n.snapshots.len()).sum()
    }

    /// The drill records (`vtsnap.io/drill`) of every shard's cached snapshots, each with
    /// the snapshot it must name (judged by the caller at its `now`). Only the annotation,
    /// the UID and the cut are read: a scrape reads every snapshot, and a drill proves a
    /// restore even if another field is unreadable.
    pub fn drill_records(&self) -> Vec<(ShardRef, Vec<DrillSeen>)> {
        let shards: Vec<(ShardRef, Vec<Arc<DynamicObject>>)> = self
            .namespaces
            .values()
            .filter_map(|n| n.index.read().ok())
            .flat_map(|i| {
                i.live
                    .iter()
                    .filter(|(_, m)| !m.is_empty())
                    .map(|(k, m)| (k.clone(), m.values().cloned().collect()))
                    .collect::<Vec<_>>()
            })
            .collect();
        // Parsed after the lock is released: the watch writes the index meanwhile.
        shards
            .into_iter()
            .map(|(k, objects)| (k, objects.iter().filter_map(|o| drill_of(o)).collect()))
            .collect()
    }
}

fn drill_of(o: &DynamicObject) -> Option<DrillSeen> {
    let v = o.metadata.annotations.as_ref()?.get(ANN_DRILL)?;
    let cut = o
        .data
        .pointer("/status/creationTime")
        .and_then(serde_json::Value::as_str)
        .and_then(|t| t.parse().ok());
    Some(DrillSeen {
        record: DrillRecord::parse(v),
        of: o
            .metadata
            .uid
            .clone()
            .zip(cut)
            .map(|(uid, cut)| DrillOf { uid, cut }),
    })
}

#[cfg(test)]
impl Caches {
    /// Caches of `namespaces` whose snapshot index a test feeds ([`Self::apply_snapshot`]);
    /// the stores stay empty and it counts as synced.
    pub(crate) fn fed_by_hand(namespaces: &[&str]) -> Self {
        let snaps_ar = vtsnap_core::reconcile::apis::volume_snapshot_resource();
        let clusters_ar = vtsnap_core::reconcile::apis::vitess_cluster_resource();
        let map = namespaces
            .iter()
            .map(|ns| {
                let n = Namespace {
                    snapshots: Writer::new(snaps_ar.clone()).as_reader(),
                    index: Arc::default(),
                    pvcs: Writer::<PersistentVolumeClaim>::default().as_reader(),
                    clusters: Writer::new(clusters_ar.clone()).as_reader(),
                };
                ((*ns).to_owned(), n)
            })
            .collect();
        Self {
            namespaces: Arc::new(map),
            shard_states: Arc::default(),
            synced: Arc::default(),
            need: 0,
        }
    }

    /// One watch event of `namespace`'s snapshots, as the reflector passes it on.
    pub(crate) fn apply_snapshot(&self, namespace: &str, e: &watcher::Event<DynamicObject>) {
        if let Some(n) = self.namespaces.get(namespace) {
            n.index.write().unwrap().apply(namespace, e);
        }
    }
}

fn name_is(meta: &kube::api::ObjectMeta, name: &str) -> bool {
    meta.name.as_deref() == Some(name)
}

impl Inventory for Caches {
    fn synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed) >= self.need
    }

    fn snapshots(&self, shard: &ShardRef) -> Vec<SnapshotRead> {
        let Some(n) = self.namespaces.get(&shard.namespace) else {
            return Vec::new();
        };
        let objects: Vec<Arc<DynamicObject>> = match n.index.read() {
            Ok(i) => i
                .live
                .get(shard)
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default(),
            Err(_) => return Vec::new(),
        };
        objects
            .iter()
            .filter_map(|o| serde_json::to_value(&**o).ok())
            .filter(|v| VolumeSnapshot::is_of_shard(v, shard))
            .map(|v| VolumeSnapshot::read(&v))
            .collect()
    }

    fn shard_state(&self, shard: &ShardRef) -> Option<ShardState> {
        self.shard_states.read().ok()?.get(shard).cloned()
    }

    fn first_pool_template(&self, shard: &ShardRef) -> Result<PvcTemplate, FirstPoolUnknown> {
        let no_cluster = || FirstPoolUnknown::NoCluster {
            cluster: shard.cluster.clone(),
        };
        let n = self
            .namespaces
            .get(&shard.namespace)
            .ok_or_else(no_cluster)?;
        let o = n
            .clusters
            .find(|o| name_is(&o.metadata, &shard.cluster))
            .ok_or_else(no_cluster)?;
        let cluster = serde_json::to_value(&*o).map_err(|e| FirstPoolUnknown::Unreadable {
            detail: e.to_string(),
        })?;
        PvcTemplate::first_pool(&cluster, shard)
    }

    fn pvc(&self, namespace: &str, name: &str) -> Option<PvcRead> {
        let n = self.namespaces.get(namespace)?;
        let o = n.pvcs.find(|o| name_is(&o.metadata, name))?;
        Some(Ok((*o).clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vtsnap_core::shard::{LABEL_CLUSTER, LABEL_KEYSPACE, LABEL_SHARD};

    fn snap(name: &str, shard: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": name, "namespace": "vitess", "labels": {
                LABEL_CLUSTER: "example", LABEL_KEYSPACE: "commerce", LABEL_SHARD: shard}}}))
        .unwrap()
    }

    fn key(shard: &str) -> ShardRef {
        ShardRef {
            namespace: "vitess".into(),
            cluster: "example".into(),
            keyspace: "commerce".into(),
            shard: shard.parse().unwrap(),
        }
    }

    fn names(i: &ShardIndex, shard: &str) -> Vec<String> {
        i.live
            .get(&key(shard))
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    #[test]
    fn the_index_follows_the_watch_like_the_store() {
        use watcher::Event::*;
        let mut i = ShardIndex::default();
        for e in [
            Init,
            InitApply(snap("a", "x-80")),
            InitApply(snap("b", "x-80")),
            InitDone,
        ] {
            i.apply("vitess", &e);
        }
        assert_eq!(names(&i, "-80"), ["a", "b"]);
        // Relabelled to another shard: moved, not copied.
        i.apply("vitess", &Apply(snap("b", "80-x")));
        assert_eq!(
            (names(&i, "-80"), names(&i, "80-")),
            (vec!["a".to_owned()], vec!["b".to_owned()])
        );
        i.apply("vitess", &Delete(snap("a", "x-80")));
        assert!(names(&i, "-80").is_empty());
        // Labels that name no shard: not indexed (and a relabel there drops it).
        i.apply("vitess", &Apply(snap("b", "-80")));
        assert!(names(&i, "80-").is_empty() && i.shard_of.is_empty());
        // A relist replaces everything once it is done, not before.
        i.apply("vitess", &Apply(snap("c", "x-x")));
        i.apply("vitess", &Init);
        i.apply("vitess", &InitApply(snap("d", "x-x")));
        assert_eq!(names(&i, "-"), ["c"]);
        i.apply("vitess", &InitDone);
        assert_eq!(names(&i, "-"), ["d"]);
    }
}
