//! The schedule reconciler's reads: the template ConfigMap, each configured cluster's
//! VitessCluster (its shards), the CronJobs and Jobs of the template's namespace, and —
//! for a CronJob of ours whose shard left the spec — vtctld's word on that shard. Also
//! the same from a dump (`schedule plan --objects`), where vtctld is not asked.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;
use vtsnap_core::config::Config;
use vtsnap_core::reconcile::ObjectKey;
use vtsnap_core::reconcile::apis::vitess_clusters;
use vtsnap_core::shard::{KeyspaceShard, ShardRef};
use vtsnap_core::vitesscluster::spec_shards;
use vtsnap_core::vtctld::client::{CallLimits, VtctldClient, VtctldError};

use super::decide::{ClusterSeen, CronSeen, InVtctld, Observed, Template};
use super::names::{
    self, ANN_HASH, ANN_KIND, ANN_OFFSET, ANN_SHARD, Kind, MANAGED_BY, MANAGED_BY_SCHEDULE,
};

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// A Job that has not finished (no `Complete` or `Failed` condition that is true).
fn running(job: &Value) -> bool {
    !job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True"
            })
        })
}

/// The unfinished Jobs of each owner, by the owner's UID: built in one pass over the
/// Jobs, so reading N CronJobs against M Jobs costs N + M, not N × M.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunningJobs(BTreeMap<String, usize>);

impl RunningJobs {
    /// One pass over the Jobs: each running one counts once for each owner it names.
    pub fn index<'a>(jobs: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut by_owner: BTreeMap<String, usize> = BTreeMap::new();
        for job in jobs.into_iter().filter(|j| running(j)) {
            let owners: BTreeSet<&str> = job
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| r["uid"].as_str())
                .collect();
            for uid in owners {
                *by_owner.entry(uid.to_owned()).or_default() += 1;
            }
        }
        Self(by_owner)
    }

    /// Running Jobs owned by `uid`.
    pub fn of(&self, uid: &str) -> usize {
        self.0.get(uid).copied().unwrap_or_default()
    }
}

/// A CronJob as the decision sees it: ours when labelled and owned by the template.
pub fn cron_seen(cron: &Value, template: Option<&Template>, jobs: &RunningJobs) -> CronSeen {
    let uid = s(cron, "/metadata/uid").to_owned();
    let owned = template.is_some_and(|t| {
        cron.pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| {
                refs.iter()
                    .any(|r| r["uid"] == t.configmap_uid.as_str() && !t.configmap_uid.is_empty())
            })
    });
    let labelled = cron
        .pointer("/metadata/labels")
        .and_then(|l| l.get(MANAGED_BY))
        .and_then(Value::as_str)
        == Some(MANAGED_BY_SCHEDULE);
    let ann = |k: &str| {
        cron.pointer("/metadata/annotations")
            .and_then(|a| a.get(k))
            .and_then(Value::as_str)
    };
    let active_jobs = jobs.of(&uid);
    let kind = Kind::from_annotation(ann(ANN_KIND));
    CronSeen {
        name: s(cron, "/metadata/name").to_owned(),
        resource_version: s(cron, "/metadata/resourceVersion").to_owned(),
        uid,
        ours: owned && labelled,
        kind: kind.clone().unwrap_or(Kind::Snapshot),
        shard: kind.and_then(|_| {
            ann(ANN_SHARD)
                .ok_or_else(|| format!("no {ANN_SHARD} annotation"))
                .and_then(|t| ShardRef::parse_path(t).map_err(|e| format!("{ANN_SHARD} {e}")))
        }),
        offset: ann(ANN_OFFSET).and_then(|o| o.parse().ok()),
        spec_hash: ann(ANN_HASH).map(str::to_owned),
        active_jobs,
        vtctld: InVtctld::Unknown("not asked".into()),
    }
}

/// The shards of a VitessCluster object, or why they cannot be read.
fn shards_of(vc: Option<&Value>) -> Result<BTreeSet<KeyspaceShard>, String> {
    match vc {
        // Deleted: it has no shards (a verified absence).
        None => Ok(BTreeSet::new()),
        Some(v) => spec_shards(v).map_err(|e| e.to_string()),
    }
}

/// vtctld's word on a shard: "no such shard" (gRPC NotFound, or the topology server's
/// "node doesn't exist" that vtctld passes on) is an answer; anything else is not.
fn in_vtctld(got: Result<(), VtctldError>) -> InVtctld {
    match got {
        Ok(()) => InVtctld::Present,
        Err(VtctldError::Rpc { code, message, .. })
            if code == tonic::Code::NotFound || message.contains("node doesn't exist") =>
        {
            InVtctld::Absent
        }
        Err(e) => InVtctld::Unknown(e.to_string()),
    }
}

/// Everything, live.
pub async fn observe(
    kube: &kube::Client,
    config: &Config,
    namespace: &str,
    template_name: &str,
) -> Observed {
    let cms: Api<DynamicObject> = Api::namespaced_with(
        kube.clone(),
        namespace,
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let template = match cms.get_opt(template_name).await {
        Ok(Some(cm)) => serde_json::to_value(cm)
            .map_err(|e| e.to_string())
            .and_then(|v| names::template_from(&v)),
        Ok(None) => Err(format!("ConfigMap {namespace}/{template_name} not found")),
        Err(e) => Err(format!("get ConfigMap {namespace}/{template_name}: {e}")),
    };
    let mut clusters = Vec::new();
    for cl in &config.clusters {
        let got = vitess_clusters(kube, &cl.namespace).get_opt(&cl.name).await;
        let shards = match got.map(|v| v.map(serde_json::to_value).transpose()) {
            Ok(Ok(v)) => shards_of(v.as_ref()),
            Ok(Err(e)) => Err(format!("VitessCluster: {e}")),
            Err(e) => Err(format!("get VitessCluster: {e}")),
        };
        clusters.push(ClusterSeen {
            namespace: cl.namespace.clone(),
            cluster: cl.name.clone(),
            shards,
        });
    }
    let list = |resource: kube::api::ApiResource| {
        let api: Api<DynamicObject> = Api::namespaced_with(kube.clone(), namespace, &resource);
        async move {
            let mut out = Vec::new();
            vtsnap_core::reconcile::list::for_each(&api, &ListParams::default(), |o| {
                if let Ok(v) = serde_json::to_value(o) {
                    out.push(v);
                }
            })
            .await
            .map(|()| out)
        }
    };
    let crons = list(kube::api::ApiResource::erase::<
        k8s_openapi::api::batch::v1::CronJob,
    >(&()))
    .await;
    let jobs = list(kube::api::ApiResource::erase::<
        k8s_openapi::api::batch::v1::Job,
    >(&()))
    .await;
    let (crons, jobs) = match (crons, jobs) {
        (Ok(c), Ok(j)) => (c, j),
        (Err(e), _) | (_, Err(e)) => {
            // Without the CronJobs (or their Jobs) nothing can be decided safely.
            return Observed {
                template: Err(format!("list CronJobs and Jobs in {namespace}: {e}")),
                clusters,
                cronjobs: Vec::new(),
            };
        }
    };
    let running = RunningJobs::index(&jobs);
    let mut cronjobs: Vec<CronSeen> = crons
        .iter()
        .map(|c| cron_seen(c, template.as_ref().ok(), &running))
        .collect();
    ask_vtctld(kube, config, &clusters, &mut cronjobs).await;
    Observed {
        template,
        clusters,
        cronjobs,
    }
}

/// Asks vtctld about each shard of ours that its cluster's spec no longer has.
async fn ask_vtctld(
    kube: &kube::Client,
    config: &Config,
    clusters: &[ClusterSeen],
    cronjobs: &mut [CronSeen],
) {
    let spec: BTreeMap<ObjectKey, &BTreeSet<KeyspaceShard>> = clusters
        .iter()
        .filter_map(|c| {
            c.shards
                .as_ref()
                .ok()
                .map(|s| (ObjectKey::new(&c.namespace, &c.cluster), s))
        })
        .collect();
    let mut clients: BTreeMap<ObjectKey, Result<VtctldClient, String>> = BTreeMap::new();
    let mut answers: BTreeMap<ShardRef, InVtctld> = BTreeMap::new();
    for c in cronjobs.iter_mut().filter(|c| c.ours) {
        let Ok(key) = c.shard.clone() else { continue };
        let id = key.cluster_key();
        let Some(shards) = spec.get(&id) else {
            continue;
        };
        if shards.contains(&key.keyspace_shard()) {
            continue;
        }
        let Some(cl) = config.cluster_in(&key.namespace, &key.cluster) else {
            continue;
        };
        if !clients.contains_key(&id) {
            let client = vtsnap_core::discover::vtctld_endpoint(
                kube,
                &key.namespace,
                &key.cluster,
                &cl.vtctld,
            )
            .await
            .map_err(|e| e.to_string())
            .and_then(|e| VtctldClient::new(&e, CallLimits::default()).map_err(|e| e.to_string()));
            clients.insert(id.clone(), client);
        }
        // A shard's snapshot and drill CronJobs share one answer.
        if let Some(known) = answers.get(&key) {
            c.vtctld = known.clone();
            continue;
        }
        c.vtctld = match clients.get(&id) {
            Some(Ok(v)) => in_vtctld(
                v.get_shard(&key.keyspace, &key.shard.to_string())
                    .await
                    .map(|_| ()),
            ),
            Some(Err(e)) => InVtctld::Unknown(e.clone()),
            None => InVtctld::Unknown("no vtctld".into()),
        };
        answers.insert(key, c.vtctld.clone());
    }
}

/// The same from a dump (`kubectl get configmap,cronjobs,jobs,vitessclusters -A -o json`):
/// the template is the ConfigMap named `template_name`; vtctld is not asked, so an
/// offline plan never deletes for a shard gone from the spec.
pub fn from_dump(config: &Config, items: &[Value], template_name: &str) -> Observed {
    fn kind<'a>(items: &'a [Value], k: &'a str) -> impl Iterator<Item = &'a Value> {
        items.iter().filter(move |i| i["kind"] == k)
    }
    let template = kind(items, "ConfigMap")
        .find(|c| s(c, "/metadata/name") == template_name)
        .map_or_else(
            || Err(format!("no ConfigMap {template_name} in the dump")),
            names::template_from,
        );
    let clusters = config
        .clusters
        .iter()
        .map(|cl| ClusterSeen {
            namespace: cl.namespace.clone(),
            cluster: cl.name.clone(),
            shards: shards_of(kind(items, "VitessCluster").find(|v| {
                s(v, "/metadata/namespace") == cl.namespace && s(v, "/metadata/name") == cl.name
            })),
        })
        .collect();
    let ns = template
        .as_ref()
        .map(|t| t.namespace.clone())
        .unwrap_or_default();
    let running =
        RunningJobs::index(kind(items, "Job").filter(|j| s(j, "/metadata/namespace") == ns));
    let cronjobs = kind(items, "CronJob")
        .filter(|c| s(c, "/metadata/namespace") == ns)
        .map(|c| {
            let mut seen = cron_seen(c, template.as_ref().ok(), &running);
            seen.vtctld = InVtctld::Unknown("not asked offline".into());
            seen
        })
        .collect();
    Observed {
        template,
        clusters,
        cronjobs,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn job(owners: &[&str], done: Option<&str>) -> Value {
        let refs: Vec<Value> = owners.iter().map(|u| json!({"uid": u})).collect();
        let conditions: Vec<Value> = done
            .map(|t| json!({"type": t, "status": "True"}))
            .into_iter()
            .collect();
        json!({"metadata": {"ownerReferences": refs}, "status": {"conditions": conditions}})
    }

    fn cron(uid: &str) -> Value {
        json!({"metadata": {"name": format!("c-{uid}"), "uid": uid}})
    }

    #[test]
    fn only_unfinished_jobs_count_for_their_owner() {
        let jobs = [
            job(&["a"], None),
            job(&["a", "a"], None),
            job(&["a"], Some("Complete")),
            job(&["a"], Some("Failed")),
            job(&["b", "a"], None),
            job(&[], None),
        ];
        let running = RunningJobs::index(&jobs);
        assert_eq!(cron_seen(&cron("a"), None, &running).active_jobs, 3);
        assert_eq!(cron_seen(&cron("b"), None, &running).active_jobs, 1);
        assert_eq!(cron_seen(&cron("c"), None, &running).active_jobs, 0);
        // A condition that is not true has not ended the Job.
        let pending = json!({"metadata": {"ownerReferences": [{"uid": "c"}]},
            "status": {"conditions": [{"type": "Complete", "status": "False"}]}});
        assert_eq!(RunningJobs::index([&pending]).of("c"), 1);
    }

    /// Review round three, item 12: every CronJob walked every Job (4,096 × 16,384 reads).
    /// The Jobs are now read once, however many CronJobs there are.
    #[test]
    fn the_jobs_are_read_once_for_all_cronjobs() {
        let jobs: Vec<Value> = (0..512)
            .map(|i| job(&[&format!("u{}", i % 64)], None))
            .collect();
        for crons in [1usize, 64] {
            let mut reads = 0usize;
            let running = RunningJobs::index(jobs.iter().inspect(|_| reads += 1));
            let seen: Vec<CronSeen> = (0..crons)
                .map(|i| cron_seen(&cron(&format!("u{i}")), None, &running))
                .collect();
            assert_eq!(reads, jobs.len(), "{crons} CronJob(s)");
            assert!(seen.iter().all(|c| c.active_jobs == 8));
        }
    }
}
