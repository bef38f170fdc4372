//! What the plugin reads from the API: the install (the chart's ConfigMap), and for the
//! doctor and the status the objects their deciders look at. Every read that fails is
//! kept as its error, never as an empty list.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Deserialize;
use serde_json::{Value, json};
use vtsnap_core::api_error::message;
use vtsnap_core::config::{Config, Mode, resolve_in};
use vtsnap_core::coverage::read_primary;
use vtsnap_core::labels::{COMPONENT, COMPONENT_VTTABLET, MANAGED_BY, MANAGED_BY_VTSNAP};
use vtsnap_core::naming::{KeyRange, TabletAlias};
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::{TabletType, VtctldClient};

use crate::decide::doctor::{Access, Install, Read, ShardMysql, WebhookSeen, World};
use crate::decide::fields::{label, s};
use crate::decide::status::Seen;

/// The chart's label on everything it makes.
const NAME_LABEL: &str = "app.kubernetes.io/name=vtsnap";
const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// The one list of the requests each program makes: the chart renders its Roles from it
/// and the programs' tests check their requests against it.
const RBAC_RULES: &str = include_str!("../../../charts/vtsnap/files/rbac.yaml");

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
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
    let mut bad = None;
    vtsnap_core::reconcile::list::for_each(&api, &lp, |o| match serde_json::to_value(o) {
        Ok(v) => out.push(v),
        Err(e) => bad = Some(e.to_string()),
    })
    .await
    .map_err(|e| format!("list {}: {}", resource.plural, message(&e)))?;
    bad.map_or(Ok(out), Err)
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

/// What the status decider reads.
pub async fn status_seen(
    kube: &kube::Client,
    install: &Install,
    config: &Config,
) -> Result<Seen, String> {
    let ns = namespaces(&Ok(config.clone()));
    let in_install = Some(install.namespace.as_str());
    let snapshot_component = format!("{NAME_LABEL},{COMPONENT_LABEL}=snapshot");
    Ok(Seen {
        snapshots: in_each(kube, &snapshots_resource(), &ns, Some(&vtsnaps())).await?,
        cronjobs: list(
            kube,
            &ar("batch", "v1", "CronJob", "cronjobs"),
            in_install,
            Some(&snapshot_component),
        )
        .await?,
        jobs: list(
            kube,
            &ar("batch", "v1", "Job", "jobs"),
            in_install,
            Some(&snapshot_component),
        )
        .await?,
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
        coverage: coverage(kube, config).await,
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

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    api_groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Rules {
    namespaced: BTreeMap<String, Vec<Rule>>,
    /// Granted in the install's own namespace.
    install: BTreeMap<String, Vec<Rule>>,
    cluster: BTreeMap<String, Vec<Rule>>,
}

/// One question per (program, namespace or cluster, group, resource, verb) of the chart's
/// list, for the program's ServiceAccount.
fn questions(namespaces: &BTreeSet<String>, install_ns: &str) -> Result<Vec<Access>, String> {
    let rules: Rules = serde_yaml_ng::from_str(RBAC_RULES).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut ask = |program: &str, ns: Option<&str>, r: &Rule| {
        for g in &r.api_groups {
            for res in &r.resources {
                for v in &r.verbs {
                    out.push(Access {
                        program: program.to_owned(),
                        namespace: ns.map(str::to_owned),
                        group: g.clone(),
                        resource: res.clone(),
                        verb: v.clone(),
                        allowed: Err("not asked".into()),
                    });
                }
            }
        }
    };
    for (program, list) in &rules.namespaced {
        for ns in namespaces {
            list.iter().for_each(|r| ask(program, Some(ns), r));
        }
    }
    for (program, list) in &rules.install {
        list.iter().for_each(|r| ask(program, Some(install_ns), r));
    }
    for (program, list) in &rules.cluster {
        list.iter().for_each(|r| ask(program, None, r));
    }
    Ok(out)
}

async fn ask(kube: &kube::Client, install: &Install, a: &mut Access) {
    let user = format!(
        "system:serviceaccount:{}:{}-{}",
        install.namespace, install.fullname, a.program
    );
    let mut attrs = json!({"group": a.group, "resource": a.resource, "verb": a.verb});
    if let Some(ns) = &a.namespace {
        attrs["namespace"] = json!(ns);
    }
    let review: Result<SubjectAccessReview, _> = serde_json::from_value(json!({
        "spec": {"user": user, "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{}", install.namespace)],
                 "resourceAttributes": attrs}
    }));
    a.allowed = match review {
        Err(e) => Err(e.to_string()),
        Ok(review) => Api::<SubjectAccessReview>::all(kube.clone())
            .create(&PostParams::default(), &review)
            .await
            .map(|r| r.status.is_some_and(|s| s.allowed))
            .map_err(|e| message(&e)),
    };
}

async fn webhook(kube: &kube::Client, install: Option<&Install>) -> Read<WebhookSeen> {
    let Some(install) = install else {
        return Err("no install".into());
    };
    let configs = list(
        kube,
        &ar(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
        None,
        Some(NAME_LABEL),
    )
    .await?;
    let name = format!("{}-admission", install.fullname);
    let Some(cfg) = configs
        .iter()
        .find(|c| s(c, "/metadata/name").starts_with(&name))
    else {
        return Ok(WebhookSeen::NotInstalled);
    };
    let hook = cfg.pointer("/webhooks/0").cloned().unwrap_or(Value::Null);
    let (svc_ns, svc) = (
        s(&hook, "/clientConfig/service/namespace").to_owned(),
        s(&hook, "/clientConfig/service/name").to_owned(),
    );
    let ready_endpoints = list(
        kube,
        &ar("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
        Some(&svc_ns),
        Some(&format!("kubernetes.io/service-name={svc}")),
    )
    .await
    .map(|slices| {
        slices
            .iter()
            .flat_map(|sl| {
                sl.get("endpoints")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false))
            .count()
    });
    let cert_not_after = serving_cert_expiry(kube, install).await;
    Ok(WebhookSeen::Installed {
        name: s(cfg, "/metadata/name").to_owned(),
        failure_policy: s(&hook, "/failurePolicy").to_owned(),
        service: format!("{svc_ns}/{svc}"),
        ready_endpoints,
        cert_not_after,
    })
}

/// `notAfter` of the webhook's serving certificate (its Secret's `tls.crt`).
async fn serving_cert_expiry(kube: &kube::Client, install: &Install) -> Result<Timestamp, String> {
    let name = format!("{}-admission-tls", install.fullname);
    let secret = Api::<Secret>::namespaced(kube.clone(), &install.namespace)
        .get(&name)
        .await
        .map_err(|e| format!("get Secret {name}: {}", message(&e)))?;
    let pem = secret
        .data
        .and_then(|d| d.get("tls.crt").map(|b| b.0.clone()))
        .ok_or_else(|| format!("Secret {name} has no tls.crt"))?;
    not_after(&pem).map_err(|e| format!("Secret {name}: {e}"))
}

/// `notAfter` of the first certificate of a PEM text.
pub fn not_after(pem: &[u8]) -> Result<Timestamp, String> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|e| format!("not PEM: {e}"))?;
    let cert = block
        .parse_x509()
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    Timestamp::from_second(cert.validity().not_after.timestamp())
        .map_err(|e| format!("notAfter out of range: {e}"))
}

/// Each tablet of the shard but its primary: the crash-safety variables that do not
/// hold, read by the snapshot job's own probe.
async fn crash_safety(
    v: &VtctldClient,
    keyspace: &str,
    shard: &KeyRange,
) -> Read<Vec<(String, Vec<String>)>> {
    let tablets = v
        .get_tablets(keyspace, &shard.to_string())
        .await
        .map_err(|e| format!("GetTablets: {e}"))?;
    let mut out = Vec::new();
    for t in tablets
        .iter()
        .filter(|t| t.r#type != TabletType::Primary as i32)
    {
        let Some(alias) = t.alias.as_ref().map(TabletAlias::from) else {
            continue;
        };
        let facts = vtsnap_snapshot::run::observe::online_facts(v, &alias)
            .await
            .map_err(|e| format!("{alias}: {e}"))?;
        let violations = vtsnap_snapshot::run::decide::crash_safety(facts.flavor, &facts.values);
        out.push((
            alias.to_string(),
            violations.iter().map(ToString::to_string).collect(),
        ));
    }
    Ok(out)
}

/// Per shard with tablets: the primary's binlog expiry and, where `mode: online`, each
/// tablet's crash safety, through the cluster's vtctld (one connection per cluster).
async fn shards_mysql(
    kube: &kube::Client,
    config: &Result<Config, String>,
    pvcs: &Read<Vec<Value>>,
) -> Vec<ShardMysql> {
    let (Ok(cfg), Ok(pvcs)) = (config, pvcs) else {
        return Vec::new();
    };
    let mut by_cluster: BTreeMap<(String, String), BTreeSet<(String, KeyRange)>> = BTreeMap::new();
    for p in pvcs {
        let label = |k: &str| label(p, k).to_owned();
        let Ok(shard) = KeyRange::from_safe_name(&label(vtsnap_core::labels::SHARD)) else {
            continue;
        };
        by_cluster
            .entry((
                s(p, "/metadata/namespace").to_owned(),
                label(vtsnap_core::labels::CLUSTER),
            ))
            .or_default()
            .insert((label(vtsnap_core::labels::KEYSPACE), shard));
    }
    let mut out = Vec::new();
    for ((ns, cluster), shards) in by_cluster {
        let Some(cl) = cfg.cluster_in(&ns, &cluster) else {
            continue;
        };
        let vtctld = vtsnap_core::discover::vtctld_endpoint(kube, &ns, &cluster, &cl.vtctld)
            .await
            .map_err(|e| format!("no vtctld: {e}"))
            .and_then(|e| {
                VtctldClient::new(&e, CallLimits::default()).map_err(|e| format!("no vtctld: {e}"))
            });
        for (keyspace, shard) in shards {
            let policy = resolve_in(cl, &keyspace, &shard.to_string());
            let online = policy.snapshot.mode == Mode::Online;
            let (expiry, safety) = match &vtctld {
                Err(e) => (Err(e.clone()), Err(e.clone())),
                Ok(v) => {
                    let expiry = read_primary(v, &keyspace, &shard).await.map(|b| b.expiry);
                    let safety = if online {
                        crash_safety(v, &keyspace, &shard).await
                    } else {
                        Ok(Vec::new())
                    };
                    (expiry, safety)
                }
            };
            out.push(ShardMysql {
                shard: format!("{ns}/{cluster}/{keyspace}/{shard}"),
                max_snapshot_age: policy.restore.max_snapshot_age.get(),
                online,
                expiry,
                crash_safety: safety,
            });
        }
    }
    out
}

/// The PersistentVolumes bound to `pvcs` (all pages read, only those kept).
async fn volumes_of(kube: &kube::Client, pvcs: &Read<Vec<Value>>) -> Read<Vec<Value>> {
    let Ok(pvcs) = pvcs else {
        return Ok(Vec::new());
    };
    let bound: BTreeSet<&str> = pvcs
        .iter()
        .map(|p| s(p, "/spec/volumeName"))
        .filter(|v| !v.is_empty())
        .collect();
    if bound.is_empty() {
        return Ok(Vec::new());
    }
    let api: Api<DynamicObject> = Api::all_with(
        kube.clone(),
        &ar("", "v1", "PersistentVolume", "persistentvolumes"),
    );
    let mut out = Vec::new();
    let mut bad = None;
    vtsnap_core::reconcile::list::for_each(&api, &ListParams::default(), |o| {
        if o.metadata
            .name
            .as_deref()
            .is_some_and(|n| bound.contains(n))
        {
            match serde_json::to_value(o) {
                Ok(v) => out.push(v),
                Err(e) => bad = Some(e.to_string()),
            }
        }
    })
    .await
    .map_err(|e| format!("list persistentvolumes: {}", message(&e)))?;
    bad.map_or(Ok(out), Err)
}

/// The shards of each configured cluster's VitessCluster spec (a deleted one has none).
async fn spec_shards(
    kube: &kube::Client,
    config: &Result<Config, String>,
) -> Read<Vec<crate::decide::schedules::SpecShard>> {
    let Ok(config) = config else {
        return Err("the config is not valid".into());
    };
    let mut out = Vec::new();
    for cl in &config.clusters {
        let got = vtsnap_core::reconcile::apis::vitess_clusters(kube, &cl.namespace)
            .get_opt(&cl.name)
            .await
            .map_err(|e| {
                format!(
                    "get VitessCluster {}/{}: {}",
                    cl.namespace,
                    cl.name,
                    message(&e)
                )
            })?;
        let Some(vc) = got else { continue };
        let v = serde_json::to_value(vc).map_err(|e| e.to_string())?;
        let shards = vtsnap_core::vitesscluster::cluster_shards(&v)
            .map_err(|e| format!("VitessCluster {}/{}: {e}", cl.namespace, cl.name))?;
        out.extend(
            shards
                .into_iter()
                .map(|(keyspace, shard)| (cl.namespace.clone(), cl.name.clone(), keyspace, shard)),
        );
    }
    Ok(out)
}

/// What the doctor looks at.
pub async fn doctor_world(kube: &kube::Client, namespace: Option<&str>, now: Timestamp) -> World {
    let (install, config) = match find_install(kube, namespace).await {
        Ok(Some((i, text))) => (Some(i), parse_config(&text)),
        Ok(None) => (None, Err("no install found".into())),
        Err(e) => (None, Err(e)),
    };
    let ns = namespaces(&config);
    let crds = list(
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
    .await
    .map(|l| {
        l.iter()
            .map(|c| s(c, "/metadata/name").to_owned())
            .collect()
    });
    let mut access = match &install {
        Some(i) => questions(&ns, &i.namespace).unwrap_or_default(),
        None => Vec::new(),
    };
    if let Some(i) = &install {
        // A program the values turned off has no ServiceAccount: nothing to ask of it.
        let accounts = list(
            kube,
            &ar("", "v1", "ServiceAccount", "serviceaccounts"),
            Some(&i.namespace),
            Some(NAME_LABEL),
        )
        .await;
        if let Ok(accounts) = accounts {
            let names: BTreeSet<&str> = accounts.iter().map(|a| s(a, "/metadata/name")).collect();
            access.retain(|a| names.contains(format!("{}-{}", i.fullname, a.program).as_str()));
        }
        for a in &mut access {
            ask(kube, i, a).await;
        }
    }
    let namespace_labels = match &install {
        Some(i) => Api::<Namespace>::all(kube.clone())
            .get(&i.namespace)
            .await
            .map(|n| n.metadata.labels.unwrap_or_default())
            .map_err(|e| message(&e)),
        None => Err("no install".into()),
    };
    let tablet_pvcs = in_each(kube, &pvcs(), &ns, Some(&tablets())).await;
    let tablet_volumes = volumes_of(kube, &tablet_pvcs).await;
    let mysql = shards_mysql(kube, &config, &tablet_pvcs).await;
    let (snapshot_cronjobs, reconciler_jobs) = match &install {
        Some(i) => (
            list(
                kube,
                &ar("batch", "v1", "CronJob", "cronjobs"),
                Some(&i.namespace),
                Some(&format!("{COMPONENT_LABEL}=snapshot")),
            )
            .await,
            list(
                kube,
                &ar("batch", "v1", "Job", "jobs"),
                Some(&i.namespace),
                Some(&format!("{COMPONENT_LABEL}=schedule")),
            )
            .await,
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
        snapshot_classes: list(
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
        storage_classes: list(
            kube,
            &ar("storage.k8s.io", "v1", "StorageClass", "storageclasses"),
            None,
            None,
        )
        .await,
        tablet_pvcs,
        tablet_volumes,
        tablet_pods: in_each(kube, &pods(), &ns, Some(&tablets())).await,
        node_helpers: node_helpers(kube, install.as_ref()).await,
        snapshots: in_each(kube, &snapshots_resource(), &ns, Some(&vtsnaps())).await,
        namespace_labels,
        access,
        webhook: webhook(kube, install.as_ref()).await,
        install,
        config,
    }
}
