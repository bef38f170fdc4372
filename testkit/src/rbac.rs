//! The API requests each program may make, read from the one list the chart renders its
//! Roles from (`charts/vtsnap/files/rbac.yaml`). A program's tests run it with
//! [`FakeKube::client_as`](crate::fake_kube::FakeKube::client_as) and check every request
//! it sent with [`refused`]: a verb the code needs and the chart lacks fails a test here,
//! instead of a 403 (or a silent fallback from a watch to polling) in a cluster.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::fake_kube::{Logged, Verb};

const RULES: &str = include_str!("../../charts/vtsnap/files/rbac.yaml");

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Rule {
    api_groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Granted {
    namespaced: BTreeMap<String, Vec<Rule>>,
    /// Rules of a Role in the release's own namespace.
    install: BTreeMap<String, Vec<Rule>>,
    cluster: BTreeMap<String, Vec<Rule>>,
}

fn granted() -> Granted {
    serde_yaml_ng::from_str(RULES)
        .unwrap_or_else(|e| panic!("charts/vtsnap/files/rbac.yaml does not read: {e}"))
}

/// The RBAC verb of a request.
fn verb(v: Verb) -> &'static str {
    match v {
        Verb::Get => "get",
        Verb::List => "list",
        Verb::Watch => "watch",
        Verb::Create => "create",
        Verb::Update => "update",
        Verb::Patch => "patch",
        Verb::Delete => "delete",
        Verb::DeleteCollection => "deletecollection",
    }
}

fn allows(rules: &[Rule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        r.api_groups.iter().any(|g| g == group)
            && r.resources.iter().any(|x| x == resource)
            && r.verbs.iter().any(|v| v == verb)
    })
}

/// Every request `program` sent (by [`FakeKube::client_as`](crate::fake_kube::FakeKube::client_as))
/// that its Role and ClusterRole do not grant, as `verb group/resource (namespace)`.
/// A request without a namespace (across all namespaces, or of a cluster-scoped
/// resource) is granted only by the ClusterRole.
///
/// Panics when `program` sent nothing at all: a check of no requests proves nothing.
pub fn refused(program: &str, log: &[Logged]) -> Vec<String> {
    let g = granted();
    let none = Vec::new();
    let namespaced = g.namespaced.get(program).unwrap_or(&none);
    let install = g.install.get(program).unwrap_or(&none);
    let cluster = g.cluster.get(program).unwrap_or(&none);
    let sent: Vec<&Logged> = log
        .iter()
        .filter(|l| l.info.client.as_deref() == Some(program))
        .collect();
    assert!(
        !sent.is_empty(),
        "no request was sent as {program:?}: make its client with FakeKube::client_as"
    );
    let mut out: Vec<String> = sent
        .iter()
        .filter_map(|l| {
            let i = &l.info;
            let resource = match &i.subresource {
                Some(sub) => format!("{}/{sub}", i.plural),
                None => i.plural.clone(),
            };
            let v = verb(i.verb);
            let ok = allows(cluster, &i.group, &resource, v)
                || (i.namespace.is_some()
                    && (allows(namespaced, &i.group, &resource, v)
                        || allows(install, &i.group, &resource, v)));
            (!ok).then(|| {
                format!(
                    "{v} {}/{resource} ({})",
                    i.group,
                    i.namespace.as_deref().unwrap_or("all namespaces")
                )
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_kube::FakeKube;
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ListParams};

    #[test]
    fn the_list_reads_and_names_every_program_with_an_account() {
        let g = granted();
        let mut programs: Vec<&String> = g
            .namespaced
            .keys()
            .chain(g.install.keys())
            .chain(g.cluster.keys())
            .collect();
        programs.sort();
        programs.dedup();
        assert_eq!(
            programs,
            [
                "admission",
                "drill",
                "gc",
                "node",
                "pitr",
                "pitr-recover",
                "schedule",
                "snapshot",
                "vtbackup-storage"
            ]
        );
    }

    #[tokio::test]
    async fn only_the_programs_own_requests_are_checked_and_a_missing_verb_is_named() {
        let kube = FakeKube::new();
        let gc = kube.client_as("gc");
        // Granted: the GC lists Pods in a namespace.
        let pods: Api<Pod> = Api::namespaced(gc.clone(), "vitess");
        pods.list(&ListParams::default()).await.unwrap();
        // Not granted: watching leases, and listing Pods across namespaces (Role only).
        let leases: Api<Lease> = Api::namespaced(gc.clone(), "vitess");
        let _ = leases.watch(&Default::default(), "0").await;
        let all: Api<Pod> = Api::all(gc);
        all.list(&ListParams::default()).await.unwrap();
        // Another client's request is not the GC's.
        let other: Api<Pod> = Api::all(kube.client());
        other.list(&ListParams::default()).await.unwrap();
        assert_eq!(
            refused("gc", &kube.log()),
            [
                "list /pods (all namespaces)",
                "watch coordination.k8s.io/leases (vitess)"
            ]
        );
    }

    #[test]
    #[should_panic(expected = "no request was sent as \"snapshot\"")]
    fn a_program_that_sent_nothing_proves_nothing() {
        let _ = refused("snapshot", &[]);
    }
}
