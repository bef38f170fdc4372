//! The doctor's RBAC questions: one SubjectAccessReview per request of the chart's list
//! (`charts/vtsnap/files/rbac.yaml`), asked for the program's ServiceAccount.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use serde::Deserialize;
use vtsnap_core::api_error::message;

use crate::decide::doctor::{Access, Install};

/// The one list of the requests each program makes: the chart renders its Roles from it
/// and the programs' tests check their requests against it.
const RBAC_RULES: &str = include_str!("../../../../charts/vtsnap/files/rbac.yaml");

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
pub(super) fn questions(
    namespaces: &BTreeSet<String>,
    install_ns: &str,
) -> Result<Vec<Access>, String> {
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

/// Asks the authorizer `a`'s question and keeps its answer in `a`.
pub(super) async fn ask(kube: &kube::Client, install: &Install, a: &mut Access) {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!(
                "system:serviceaccount:{}:{}-{}",
                install.namespace, install.fullname, a.program
            )),
            groups: Some(vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{}", install.namespace),
            ]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(a.group.clone()),
                resource: Some(a.resource.clone()),
                verb: Some(a.verb.clone()),
                namespace: a.namespace.clone(),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    a.allowed = Api::<SubjectAccessReview>::all(kube.clone())
        .create(&PostParams::default(), &review)
        .await
        .map(|r| r.status.is_some_and(|s| s.allowed))
        .map_err(|e| message(&e));
}
