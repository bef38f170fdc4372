//! The shard's fence, decided: free, held (the run is refused), or expired — then the
//! plan's first step is to recover it (docs/design.md §5.4). Pure: the clock is an argument,
//! so a dry run can say what it would recover without touching the lease.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use vtsnap_core::fence::Fence;
use vtsnap_core::vtctld::TabletType;

/// The shard's fence lease as observed (parsed; an unreadable one never gets here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedFence {
    pub fence: Fence,
    /// Who holds it (the job's pod name), empty if the lease names nobody.
    pub holder: String,
}

/// The fence a run must recover before it can take its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FenceRecovery {
    pub lease: String,
    /// The version the decision was made on.
    pub resource_version: Option<String>,
    /// The dead job that held it.
    pub holder: String,
    /// The tablet it fenced, put back to `original_type`.
    pub tablet: String,
    #[serde(serialize_with = "type_name")]
    pub original_type: TabletType,
    pub target_pod: String,
}

fn type_name<S: serde::Serializer>(t: &TabletType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

impl FenceRecovery {
    /// What the step does, in the words of the run's `steps` and the dry run's plan.
    pub fn describe(&self) -> String {
        format!(
            "recover the expired fence {} (held by {:?}): the node helper releases pod {}, tablet {} is put back to {}",
            self.lease,
            self.holder,
            self.target_pod,
            self.tablet,
            self.original_type.name()
        )
    }
}

/// A live fence: another run holds the shard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shard is fenced by {holder:?} (lease {lease})")]
pub struct Held {
    pub lease: String,
    pub holder: String,
}

/// No fence: nothing to do; an expired one: recover it first; a live one: refuse.
pub fn recovery(
    observed: Option<&ObservedFence>,
    now: Timestamp,
) -> Result<Option<FenceRecovery>, Held> {
    let Some(o) = observed else { return Ok(None) };
    let f = &o.fence;
    if !f.expired(now) {
        return Err(Held {
            lease: f.name.clone(),
            holder: o.holder.clone(),
        });
    }
    Ok(Some(FenceRecovery {
        lease: f.name.clone(),
        resource_version: f.resource_version.clone(),
        holder: o.holder.clone(),
        tablet: f.tablet_alias.to_string(),
        original_type: f.original_type,
        target_pod: f.target_pod.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use vtsnap_core::fence::Request;
    use vtsnap_core::naming::TabletAlias;

    fn observed(renewed: &str) -> ObservedFence {
        ObservedFence {
            fence: Fence {
                namespace: "vitess".into(),
                name: "vtsnap-fence-example-commerce-x-x".into(),
                resource_version: Some("7".into()),
                target_pod: "p".into(),
                target_pod_uid: "u".into(),
                tablet_alias: TabletAlias::new("zone1", 102),
                original_type: TabletType::Replica,
                vtctld: "127.0.0.1:15999".into(),
                request: Request::Hold,
                max_hold: Duration::from_secs(60),
                renew_time: Some(renewed.parse().unwrap()),
                lease_duration: Duration::from_secs(30),
                node_state: None,
            },
            holder: "dead-job".into(),
        }
    }

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    #[test]
    fn no_fence_needs_no_recovery() {
        assert_eq!(recovery(None, at("2026-01-01T00:00:00Z")), Ok(None));
    }

    #[test]
    fn a_live_fence_refuses_the_run_naming_its_holder() {
        let o = observed("2026-01-01T00:00:00Z");
        assert_eq!(
            recovery(Some(&o), at("2026-01-01T00:00:29Z")),
            Err(Held {
                lease: "vtsnap-fence-example-commerce-x-x".into(),
                holder: "dead-job".into()
            })
        );
    }

    #[test]
    fn an_expired_fence_is_recovered_first_bound_to_its_version() {
        let o = observed("2026-01-01T00:00:00Z");
        let r = recovery(Some(&o), at("2026-01-01T00:00:31Z"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                r.tablet.as_str(),
                r.resource_version.as_deref(),
                r.original_type
            ),
            ("zone1-0000000102", Some("7"), TabletType::Replica)
        );
        assert!(
            r.describe().starts_with(
                "recover the expired fence vtsnap-fence-example-commerce-x-x (held by \"dead-job\")"
            ),
            "{}",
            r.describe()
        );
    }
}
