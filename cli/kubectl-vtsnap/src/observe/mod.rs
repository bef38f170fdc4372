//! What the plugin reads from the API: the install (the chart's ConfigMap), and for the
//! doctor and the status the objects their deciders look at, typed by [`read`]. Every read
//! that fails is kept as its error, never as an empty list.

mod access;
mod mysql;
pub mod read;
mod webhook;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;
use vtsnap_core::api_error::message;
use vtsnap_core::config::Config;
use vtsnap_core::labels::{COMPONENT, COMPONENT_VTTABLET, MANAGED_BY, MANAGED_BY_VTSNAP};
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::shard::ShardRef;

pub use self::read::StatusObjects;
pub use self::webhook::not_after;
use crate::decide::doctor::{Install, NotRead, Read, World};
use crate::decide::objects::{TabletPvc, Unreadable};
use crate::decide::status::Seen;

/// The chart's label on everything it makes.
const NAME_LABEL: &str = "app.kubernetes.io/name=vtsnap";
const COMPONENT_LABEL: &str = "app.kubernetes.io/component";

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// JSON of an object as the API gave it.
fn json(o: &DynamicObject) -> Result<Value, NotRead> {
    serde_json::to_value(o).map_err(|e| NotRead::Answer(e.to_string()))
}

/// Lists every object of a kind (all pages), in `namespace` or cluster-wide, as JSON.
pub async fn list(
    kube: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    selector: Option<&str>,
) -> Read<Vec<Value>> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(kube.clone(), ns, resource),
        None => Api::all_with(kube.clone(), resource),
    };
    let mut lp = ListParams::default();
    if let Some(sel) = selector {
        lp = lp.labels(sel);
    }
    let mut out = Vec::new();
    vtsnap_core::reconcile::list::for_each(&api, &lp, |o| out.push(json(&o)))
        .await
        .map_err(|e| format!("list {}: {}", resource.plural, message(&e)))?;
    out.into_iter().collect()
}

/// A list read, each of its objects read by `read`: the first that does not read is the
/// list's error (the doctor decides nothing on a part of a list).
fn every<T>(
    listed: Read<Vec<Value>>,
    read: impl Fn(&Value) -> Result<T, Unreadable>,
) -> Read<Vec<T>> {
    Ok(read::every(&listed?, read)?)
}

/// The install: its ConfigMap (`<fullname>-config`, labelled by the chart) in
/// `namespace`, or the only one in the cluster. The config text comes with it.
pub async fn find_install(
    kube: &kube::Client,
    namespace: Option<&str>,
) -> Result<Option<(Install, String)>, String> {
    let api: Api<ConfigMap> = match namespace {
        Some(ns) => Api::namespaced(kube.clone(), ns),
        None => Api::all(kube.clone()),
    };
    let found = vtsnap_core::reconcile::list::all(&api, &ListParams::default().labels(NAME_LABEL))
        .await
        .map_err(|e| format!("list ConfigMaps: {}", message(&e)))?;
    let mut installs: Vec<(Install, String)> = found
        .into_iter()
        .filter_map(|cm| {
            let name = cm.metadata.name?;
            let fullname = name.strip_suffix("-config")?.to_owned();
            let text = cm.data?.get("config.yaml")?.clone();
            Some((
                Install {
                    namespace: cm.metadata.namespace?,
                    fullname,
                },
                text,
            ))
        })
        .collect();
    match installs.len() {
        0 => Ok(None),
        1 => Ok(installs.pop()),
        n => Err(format!(
            "{n} vtsnap installs found ({}): name one with -n",
            installs
                .iter()
                .map(|(i, _)| format!("{}/{}", i.namespace, i.fullname))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The install's config, or why it is not valid.
pub fn parse_config(text: &str) -> Result<Config, String> {
    Config::from_yaml(text).map_err(|e| e.to_string())
}

fn namespaces(config: &Result<Config, String>) -> BTreeSet<String> {
    config
        .as_ref()
        .map(|c| c.clusters.iter().map(|c| c.namespace.clone()).collect())
        .unwrap_or_default()
}

/// Lists a kind in each namespace; the first error is the result.
async fn in_each(
    kube: &kube::Client,
    resource: &ApiResource,
    namespaces: &BTreeSet<String>,
    selector: Option<&str>,
) -> Read<Vec<Value>> {
    let mut out = Vec::new();
    for ns in namespaces {
        out.extend(list(kube, resource, Some(ns), selector).await?);
    }
    Ok(out)
}

fn tablets() -> String {
    format!("{COMPONENT}={COMPONENT_VTTABLET}")
}

fn vtsnaps() -> String {
    format!("{MANAGED_BY}={MANAGED_BY_VTSNAP}")
}

pub fn snapshots_resource() -> ApiResource {
    vtsnap_core::reconcile::apis::volume_snapshot_resource()
}

fn pods() -> ApiResource {
    ar("", "v1", "Pod", "pods")
}

fn pvcs() -> ApiResource {
    ar("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
}

fn cronjobs() -> ApiResource {
    ar("batch", "v1", "CronJob", "cronjobs")
}

fn jobs() -> ApiResource {
    ar("batch", "v1", "Job", "jobs")
}

/// The node helper's Pods of the install.
async fn node_helpers(kube: &kube::Client, install: Option<&Install>) -> Read<Vec<Value>> {
    match install {
        Some(i) => {
            list(
                kube,
                &pods(),
                Some(&i.namespace),
                Some(&format!("{NAME_LABEL},{COMPONENT_LABEL}=node")),
            )
            .await
        }
        None => Err("no install".into()),
    }
}

/// What the status decider reads: the objects, then the GC's coverage.
pub async fn status_seen(
    kube: &kube::Client,
    install: &Install,
    config: &Config,
) -> Result<Seen, String> {
    let objects = status_objects(kube, install, config)
        .await
        .map_err(|e| e.to_string())?;
    Ok(read::status_seen(&objects, coverage(kube, config).await))
}

/// The objects the status reads, as the API gives them; the first list that fails fails.
async fn status_objects(
    kube: &kube::Client,
    install: &Install,
    config: &Config,
) -> Read<StatusObjects> {
    let ns = namespaces(&Ok(config.clone()));
    let in_install = Some(install.namespace.as_str());
    let snapshot_component = format!("{NAME_LABEL},{COMPONENT_LABEL}=snapshot");
    Ok(StatusObjects {
        snapshots: in_each(kube, &snapshots_resource(), &ns, Some(&vtsnaps())).await?,
        cronjobs: list(kube, &cronjobs(), in_install, Some(&snapshot_component)).await?,
        jobs: list(kube, &jobs(), in_install, Some(&snapshot_component)).await?,
        leases: in_each(
            kube,
            &ar("coordination.k8s.io", "v1", "Lease", "leases"),
            &ns,
            Some(&vtsnaps()),
        )
        .await?,
        tablet_pvcs: in_each(kube, &pvcs(), &ns, Some(&tablets())).await?,
        tablet_pods: in_each(kube, &pods(), &ns, Some(&tablets())).await?,
        node_helpers: node_helpers(kube, Some(install)).await?,
    })
}

/// The GC's catch-up coverage per shard: its own observe and decide, read-only (the
/// primary is asked through vtctld; unreachable, the shard's coverage is unknown).
pub async fn coverage(
    kube: &kube::Client,
    config: &Config,
) -> Vec<vtsnap_gc::decide::ShardCoverage> {
    let now = Timestamp::now();
    let seen = vtsnap_gc::observe::observe(kube, config, None, now).await;
    vtsnap_gc::decide::plan(config, &seen.inventory, now, None).coverage
}

/// The PersistentVolumes bound to `pvcs` (all pages read, only those kept).
async fn volumes_of(
    kube: &kube::Client,
    pvcs: &Read<Vec<TabletPvc>>,
) -> Read<Vec<k8s_openapi::api::core::v1::PersistentVolume>> {
    let Ok(pvcs) = pvcs else {
        return Ok(Vec::new());
    };
    let bound: BTreeSet<&str> = pvcs.iter().filter_map(|p| p.volume.as_deref()).collect();
    if bound.is_empty() {
        return Ok(Vec::new());
    }
    let api: Api<DynamicObject> = Api::all_with(
        kube.clone(),
        &ar("", "v1", "PersistentVolume", "persistentvolumes"),
    );
    let mut out = Vec::new();
    vtsnap_core::reconcile::list::for_each(&api, &ListParams::default(), |o| {
        if o.metadata
            .name
            .as_deref()
            .is_some_and(|n| bound.contains(n))
        {
            out.push(json(&o));
        }
    })
    .await
    .map_err(|e| format!("list persistentvolumes: {}", message(&e)))?;
    every(out.into_iter().collect(), read::typed)
}

/// The shards of each configured cluster's VitessCluster spec (a deleted one has none).
async fn spec_shards(kube: &kube::Client, config: &Result<Config, String>) -> Read<Vec<ShardRef>> {
    let Ok(config) = config else {
        return Err("the config is not valid".into());
    };
    let mut out = Vec::new();
    for cl in &config.clusters {
        let cluster = ObjectKey::new(&cl.namespace, &cl.name);
        let got = vtsnap_core::reconcile::apis::vitess_clusters(kube, &cl.namespace)
            .get_opt(&cl.name)
            .await
            .map_err(|e| format!("get VitessCluster {cluster}: {}", message(&e)))?;
        let Some(vc) = got else { continue };
        out.extend(read::spec_shards(&cluster, &json(&vc)?)?);
    }
    Ok(out)
}

/// Names of the objects of `kind` listed.
fn names(kind: &'static str, listed: Read<Vec<Value>>) -> Read<BTreeSet<String>> {
    every(listed, read::name(kind)).map(|n| n.into_iter().collect())
}

/// What the doctor looks at.
pub async fn doctor_world(kube: &kube::Client, namespace: Option<&str>, now: Timestamp) -> World {
    let (install, config) = match find_install(kube, namespace).await {
        Ok(Some((i, text))) => (Some(i), parse_config(&text)),
        Ok(None) => (None, Err("no install found".into())),
        Err(e) => (None, Err(e)),
    };
    let ns = namespaces(&config);
    let crds = names(
        "CustomResourceDefinition",
        list(
            kube,
            &ar(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
            ),
            None,
            None,
        )
        .await,
    );
    let mut access = match &install {
        Some(i) => access::questions(&ns, &i.namespace).unwrap_or_default(),
        None => Vec::new(),
    };
    if let Some(i) = &install {
        // A program the values turned off has no ServiceAccount: nothing to ask of it.
        let accounts = names(
            "ServiceAccount",
            list(
                kube,
                &ar("", "v1", "ServiceAccount", "serviceaccounts"),
                Some(&i.namespace),
                Some(NAME_LABEL),
            )
            .await,
        );
        if let Ok(accounts) = accounts {
            access.retain(|a| accounts.contains(&format!("{}-{}", i.fullname, a.program)));
        }
        for a in &mut access {
            access::ask(kube, i, a).await;
        }
    }
    let namespace_labels = match &install {
        Some(i) => Api::<Namespace>::all(kube.clone())
            .get(&i.namespace)
            .await
            .map(|n| n.metadata.labels.unwrap_or_default())
            .map_err(|e| NotRead::Answer(message(&e))),
        None => Err("no install".into()),
    };
    let tablet_pvcs = every(
        in_each(kube, &pvcs(), &ns, Some(&tablets())).await,
        read::tablet_pvc,
    );
    let tablet_volumes = volumes_of(kube, &tablet_pvcs).await;
    let mysql = mysql::shards_mysql(kube, &config, &tablet_pvcs).await;
    let (snapshot_cronjobs, reconciler_jobs) = match &install {
        Some(i) => (
            every(
                list(
                    kube,
                    &cronjobs(),
                    Some(&i.namespace),
                    Some(&format!("{COMPONENT_LABEL}=snapshot")),
                )
                .await,
                read::snapshot_cron,
            ),
            every(
                list(
                    kube,
                    &jobs(),
                    Some(&i.namespace),
                    Some(&format!("{COMPONENT_LABEL}=schedule")),
                )
                .await,
                read::job,
            ),
        ),
        None => (Err("no install".into()), Err("no install".into())),
    };
    World {
        now,
        crds,
        mysql,
        spec_shards: spec_shards(kube, &config).await,
        snapshot_cronjobs,
        reconciler_jobs,
        snapshot_classes: every(
            list(
                kube,
                &ar(
                    "snapshot.storage.k8s.io",
                    "v1",
                    "VolumeSnapshotClass",
                    "volumesnapshotclasses",
                ),
                None,
                None,
            )
            .await,
            read::snapshot_class,
        ),
        storage_classes: every(
            list(
                kube,
                &ar("storage.k8s.io", "v1", "StorageClass", "storageclasses"),
                None,
                None,
            )
            .await,
            read::typed,
        ),
        tablet_pvcs,
        tablet_volumes,
        tablet_pods: every(
            in_each(kube, &pods(), &ns, Some(&tablets())).await,
            read::pod,
        ),
        node_helpers: every(node_helpers(kube, install.as_ref()).await, read::pod),
        snapshots: every(
            in_each(kube, &snapshots_resource(), &ns, Some(&vtsnaps())).await,
            read::snapshot_handling,
        ),
        namespace_labels,
        access,
        webhook: webhook::webhook(kube, install.as_ref()).await,
        install,
        config,
    }
}
