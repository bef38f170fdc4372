//! The admission webhook as the doctor finds it: its configuration, the ready endpoints of
//! the Service it calls, and its serving certificate's expiry.

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use vtsnap_core::api_error::message;

use super::{NAME_LABEL, ar, list, read};
use crate::decide::doctor::{Install, NotRead, Read, WebhookSeen};

pub(super) async fn webhook(kube: &kube::Client, install: Option<&Install>) -> Read<WebhookSeen> {
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
    let configs: Vec<MutatingWebhookConfiguration> = read::every(&configs, read::typed)?;
    let name = format!("{}-admission", install.fullname);
    let Some((cfg_name, hook)) = configs.into_iter().find_map(|c| {
        let n = c.metadata.name.filter(|n| n.starts_with(&name))?;
        Some((n, c.webhooks.and_then(|w| w.into_iter().next())))
    }) else {
        return Ok(WebhookSeen::NotInstalled);
    };
    let failure_policy = hook
        .as_ref()
        .and_then(|h| h.failure_policy.clone())
        .unwrap_or_default();
    let (svc_ns, svc) = hook
        .and_then(|h| h.client_config.service)
        .map(|s| (s.namespace, s.name))
        .unwrap_or_default();
    let ready_endpoints = ready_endpoints(kube, &svc_ns, &svc)
        .await
        .map_err(|e| e.to_string());
    let cert_not_after = serving_cert_expiry(kube, install).await;
    Ok(WebhookSeen::Installed {
        name: cfg_name,
        failure_policy,
        service: format!("{svc_ns}/{svc}"),
        ready_endpoints,
        cert_not_after,
    })
}

/// Endpoints of the Service `namespace/service` not said to be unready.
async fn ready_endpoints(
    kube: &kube::Client,
    namespace: &str,
    service: &str,
) -> Result<usize, NotRead> {
    let slices = list(
        kube,
        &ar("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
        Some(namespace),
        Some(&format!("kubernetes.io/service-name={service}")),
    )
    .await?;
    let slices: Vec<EndpointSlice> = read::every(&slices, read::typed)?;
    Ok(slices
        .iter()
        .flat_map(|sl| &sl.endpoints)
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .count())
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
