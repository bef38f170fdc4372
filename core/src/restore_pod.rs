//! The contract between the webhook, which injects the restore init container into a new
//! tablet's Pod, and `vtsnap-restore`, which runs in it: one definition both sides use.

/// Where the init container mounts the tablet's data volume: vitess-operator's `mysqld`
/// container mounts the same subPath there (pkg/operator/vttablet/datastore.go).
/// The init container's name in the tablet Pod (and in the drill's Pod, which restores the
/// same way).
pub const CONTAINER: &str = "vtsnap-restore";

pub const VTDATAROOT: &str = "/vt/vtdataroot";

/// The data volume's subPath that holds the vtdataroot.
pub const VTDATAROOT_SUBPATH: &str = "vtdataroot";

/// The tablet's UID, filled by the webhook from the Pod's own label.
pub const ENV_TABLET_UID: &str = "VTSNAP_TABLET_UID";

/// The vtdataroot, when not [`VTDATAROOT`].
pub const ENV_VTDATAROOT: &str = "VTSNAP_VTDATAROOT";

/// The log format every program reads (`--log-format`).
pub const ENV_LOG_FORMAT: &str = crate::logging::ENV_LOG_FORMAT;

/// The user and group of vitess-operator's tablet Pods, which the init container runs as
/// so that what it moves stays theirs.
pub const POD_USER: u32 = 999;

/// The Job that owns a throwaway restore's objects (a drill's, a recovery's), so that the
/// garbage collector removes what a killed run leaves behind once the Job is deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOwner {
    pub name: String,
    pub uid: String,
    /// The Job's namespace; `None` when not told, which stands for the objects' own.
    pub namespace: Option<String>,
}

/// On a run's object whose Job is in another namespace: the Job, as `namespace/name`.
pub const ANN_OWNER_JOB: &str = "vtsnap.io/owner-job";
/// On the same object: the Job's UID.
pub const ANN_OWNER_JOB_UID: &str = "vtsnap.io/owner-job-uid";

impl JobOwner {
    /// The `ownerReferences` entry: not the controller, and no blocking of the Job's
    /// deletion (its account may not update Jobs' finalizers).
    pub fn reference(&self) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job", "name": self.name, "uid": self.uid,
            "controller": false, "blockOwnerDeletion": false,
        })
    }

    /// Points `metadata` of an object made in `namespace` back at the Job. An owner must
    /// be in its dependent's namespace: the garbage collector takes one of another
    /// namespace for a missing owner and deletes the dependent (event
    /// `OwnerRefInvalidNamespace`), mid-run. A Job elsewhere (a chart's, in its release's
    /// namespace) is named in annotations instead, and what a killed run leaves is not
    /// collected (docs/design.md §5.9).
    pub fn mark(&self, namespace: &str, metadata: &mut serde_json::Value) {
        match self.namespace.as_deref() {
            Some(own) if own != namespace => {
                let annotations = &mut metadata["annotations"];
                if !annotations.is_object() {
                    *annotations = serde_json::json!({});
                }
                annotations[ANN_OWNER_JOB] = format!("{own}/{}", self.name).into();
                annotations[ANN_OWNER_JOB_UID] = self.uid.clone().into();
            }
            _ => metadata["ownerReferences"] = serde_json::json!([self.reference()]),
        }
    }
}

/// The pieces every throwaway restore's Pod (a drill's, a recovery's) is made of: the
/// clone restored by `vtsnap-restore` to a UID no serving tablet has, then mysqld started
/// on it with no network listener and no grant tables, its socket shared only inside the
/// Pod (docs/design.md §5.9).
pub mod throwaway {
    use k8s_openapi::api::core::v1::PodSecurityContext;
    use serde_json::{Value, json};

    use super::{CONTAINER, ENV_TABLET_UID, POD_USER, VTDATAROOT, VTDATAROOT_SUBPATH};
    use crate::naming::TabletUid;

    pub const DATA_VOLUME: &str = "data";
    pub const SOCKET_VOLUME: &str = "socket";
    pub const SOCKET_DIR: &str = "/vt/socket";
    pub const SOCKET: &str = "/vt/socket/mysql.sock";

    /// The data volume (the PVC's `vtdataroot` subPath) as the containers mount it.
    pub fn data_mount() -> Value {
        json!({"name": DATA_VOLUME, "mountPath": VTDATAROOT, "subPath": VTDATAROOT_SUBPATH})
    }

    pub fn socket_mount() -> Value {
        json!({"name": SOCKET_VOLUME, "mountPath": SOCKET_DIR})
    }

    /// No privilege escalation, no capabilities.
    pub fn unprivileged() -> Value {
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})
    }

    /// The tablet Pod's security context (the data's owner), or vitess-operator's.
    pub fn pod_security(tablet: Option<&PodSecurityContext>) -> Value {
        tablet
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_else(|| {
                json!({"runAsUser": POD_USER, "runAsGroup": POD_USER, "fsGroup": POD_USER, "runAsNonRoot": true})
            })
    }

    /// The init container: `vtsnap-restore` moves the clone to `uid`.
    pub fn restore_container(image: &str, uid: TabletUid) -> Value {
        json!({
            "name": CONTAINER,
            "image": image,
            "args": ["--vtdataroot", VTDATAROOT],
            "env": [
                {"name": ENV_TABLET_UID, "value": uid.get().to_string()},
                {"name": "VTSNAP_LOG_FORMAT", "value": "json"},
            ],
            "volumeMounts": [data_mount()],
            "securityContext": unprivileged(),
            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        })
    }

    /// mysqld (`command` of the tablet's `image`) on the clone at `uid`: its own my.cnf,
    /// the Pod's socket, no network, no replication (`skip_replication`: the flavor's
    /// option), no grant tables, its error log in the clone's directory.
    pub fn mysqld_container(
        name: &str,
        (image, command): (&str, &str),
        uid: TabletUid,
        skip_replication: &str,
        resources: &Value,
    ) -> Value {
        let dir = format!("{VTDATAROOT}/{}", uid.tablet_dir_name());
        json!({
            "name": name,
            "image": image,
            "command": [command],
            "args": [
                format!("--defaults-file={dir}/my.cnf"),
                format!("--socket={SOCKET}"),
                "--skip-networking",
                skip_replication,
                "--skip-grant-tables",
                format!("--log-error={dir}/error.log"),
            ],
            "volumeMounts": [data_mount(), socket_mount()],
            "securityContext": unprivileged(),
            "resources": resources,
        })
    }

    /// `imagePullSecrets` of `names`; `None` when there are none.
    pub fn pull_secrets(names: &[String]) -> Option<Value> {
        (!names.is_empty()).then(|| names.iter().map(|n| json!({ "name": n })).collect())
    }

    /// `--mysqld-resources`: JSON that is a container's `resources`.
    pub fn parse_resources(text: &str) -> Result<Value, String> {
        let resources: Value = serde_json::from_str(text)
            .map_err(|e| format!("--mysqld-resources is not JSON: {e}"))?;
        serde_json::from_value::<k8s_openapi::api::core::v1::ResourceRequirements>(
            resources.clone(),
        )
        .map_err(|e| format!("--mysqld-resources is not a container's resources: {e}"))?;
        Ok(resources)
    }

    /// `--image-pull-secret` names, each a Secret's name.
    pub fn check_pull_secrets(names: &[String]) -> Result<(), String> {
        for name in names {
            crate::k8s_names::dns_subdomain(name)
                .map_err(|e| format!("--image-pull-secret {name:?} is not a Secret's name: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn owner(namespace: Option<&str>) -> JobOwner {
        JobOwner {
            name: "drill-1".into(),
            uid: "u-1".into(),
            namespace: namespace.map(str::to_owned),
        }
    }

    #[test]
    fn a_job_of_the_objects_namespace_owns_them() {
        for o in [owner(Some("vitess")), owner(None)] {
            let mut m = json!({"name": "x", "annotations": {"a": "b"}});
            o.mark("vitess", &mut m);
            assert_eq!(m["ownerReferences"][0]["uid"], "u-1");
            assert_eq!(m["ownerReferences"][0]["kind"], "Job");
            assert_eq!(m["annotations"], json!({"a": "b"}));
        }
    }

    #[test]
    fn mysqld_resources_and_pull_secrets_are_checked_as_what_they_name() {
        let ok = r#"{"requests":{"cpu":"50m"},"limits":{"memory":"1Gi"}}"#;
        assert_eq!(
            throwaway::parse_resources(ok),
            Ok(json!({"requests": {"cpu": "50m"}, "limits": {"memory": "1Gi"}}))
        );
        let not_json = throwaway::parse_resources("{cpu").unwrap_err();
        assert!(not_json.contains("is not JSON"), "{not_json}");
        let not_resources = throwaway::parse_resources(r#"{"requests":{"cpu":[1]}}"#).unwrap_err();
        assert!(
            not_resources.contains("is not a container's resources"),
            "{not_resources}"
        );
        assert_eq!(throwaway::check_pull_secrets(&["regcred".into()]), Ok(()));
        let bad = throwaway::check_pull_secrets(&["regcred".into(), "Bad/Name".into()]);
        assert!(
            bad.unwrap_err()
                .contains("--image-pull-secret \"Bad/Name\" is not a Secret's name")
        );
    }

    #[test]
    fn a_job_of_another_namespace_is_named_never_made_an_owner() {
        let mut m = json!({"name": "x", "annotations": {"a": "b"}});
        owner(Some("vtsnap-system")).mark("vitess", &mut m);
        assert!(m.get("ownerReferences").is_none(), "{m}");
        assert_eq!(m["annotations"][ANN_OWNER_JOB], "vtsnap-system/drill-1");
        assert_eq!(m["annotations"][ANN_OWNER_JOB_UID], "u-1");
        assert_eq!(m["annotations"]["a"], "b");
        let mut bare = json!({"name": "x"});
        owner(Some("other")).mark("vitess", &mut bare);
        assert_eq!(bare["annotations"][ANN_OWNER_JOB], "other/drill-1");
    }
}
