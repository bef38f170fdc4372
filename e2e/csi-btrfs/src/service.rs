//! The CSI Identity, Controller and Node services: parse each request at the boundary
//! (every field a CO can get wrong is an INVALID_ARGUMENT naming it), run the store or
//! node operation, and map its error to the status code the spec prescribes.
//!
//! Store and node operations run one at a time on a blocking thread: they shell out to
//! `btrfs` or mount, two creates of one name must not interleave, and a delete must not
//! pass a publish of the same volume.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::{Code, Status};
use tonic_prost::ProstCodec;
use tracing::Instrument;

use crate::capability::{self, Requested};
use crate::csi::*;
use crate::ids::{NodeId, ObjectId};
use crate::meta::{SnapshotRecord, VolumeRecord};
use crate::node::{self, NodeError, Publish, TargetPath, Unpublish};
use crate::store::{Capacity, Deleted, NewSnapshot, NewVolume, Store, StoreError};

/// The name the sidecars register the driver under (StorageClass `provisioner`,
/// VolumeSnapshotClass `driver`).
pub const DRIVER_NAME: &str = "btrfs.csi.vtsnap.io";

/// The `volume_context` key holding the volume's directory, for a reader of the PV (the
/// lab reads volumes there). NodePublishVolume binds the directory its id names, never
/// one a request's context names.
pub const PATH_KEY: &str = "path";

/// What the controller advertises. CLONE_VOLUME, GET_CAPACITY and LIST_VOLUMES are not
/// implemented, so they are not offered: external-provisioner then never sends them.
pub const CONTROLLER_CAPABILITIES: [ControllerRpcType; 3] = [
    ControllerRpcType::CreateDeleteVolume,
    ControllerRpcType::CreateDeleteSnapshot,
    ControllerRpcType::ListSnapshots,
];

/// What the Node service advertises. SINGLE_NODE_MULTI_WRITER: the publish rules of the
/// spec's second NodePublishVolume table are implemented (node.rs), and kubelet then
/// sends SINGLE_NODE_MULTI_WRITER for ReadWriteOnce and SINGLE_NODE_SINGLE_WRITER for
/// ReadWriteOncePod (k8s.io/kubernetes `pkg/volume/csi/csi_client.go`,
/// `asSingleNodeMultiWriterCapableCSIAccessModeV1`). No STAGE_UNSTAGE_VOLUME (a bind
/// needs no staging), no GET_VOLUME_STATS, no EXPAND_VOLUME, and no VOLUME_MOUNT_GROUP
/// (capability.rs): kubelet applies fsGroup itself.
pub const NODE_CAPABILITIES: [NodeRpcType; 1] = [NodeRpcType::SingleNodeMultiWriter];

/// The errors of an operation run by [`Driver::with_store`].
pub trait ToStatus {
    fn to_status(&self) -> Status;
}

impl ToStatus for StoreError {
    fn to_status(&self) -> Status {
        status(self)
    }
}

impl ToStatus for NodeError {
    fn to_status(&self) -> Status {
        node_status(self)
    }
}

/// The driver behind the services.
#[derive(Debug)]
pub struct Driver {
    store: Arc<Store>,
    /// Serializes store and node operations (neither holds data in memory to guard).
    one_at_a_time: Arc<Mutex<()>>,
    node_id: Option<NodeId>,
}

impl Driver {
    pub fn new(store: Store, node_id: Option<NodeId>) -> Self {
        Self {
            store: Arc::new(store),
            one_at_a_time: Arc::new(Mutex::new(())),
            node_id,
        }
    }

    /// Runs `op` on the store on a blocking thread, one call at a time.
    async fn with_store<T, E, F>(&self, op: F) -> Result<T, Status>
    where
        T: Send + 'static,
        E: ToStatus + Send + 'static,
        F: FnOnce(&Store) -> Result<T, E> + Send + 'static,
    {
        let store = Arc::clone(&self.store);
        let lock = Arc::clone(&self.one_at_a_time);
        let span = tracing::Span::current();
        let joined = tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            // A panic mid-operation leaves the disk consistent (records are the commit
            // point), so a poisoned lock is still safe to take.
            let _one = lock.lock().unwrap_or_else(PoisonError::into_inner);
            op(&store)
        })
        .await;
        match joined {
            Ok(r) => r.map_err(|e| e.to_status()),
            Err(e) => Err(Status::internal(format!(
                "store operation did not finish: {e}"
            ))),
        }
    }

    pub fn plugin_info(&self) -> GetPluginInfoResponse {
        GetPluginInfoResponse {
            name: DRIVER_NAME.to_owned(),
            vendor_version: env!("CARGO_PKG_VERSION").to_owned(),
            manifest: self
                .node_id
                .iter()
                .map(|n| ("node-id".to_owned(), n.to_string()))
                .collect(),
        }
    }

    pub fn plugin_capabilities() -> GetPluginCapabilitiesResponse {
        GetPluginCapabilitiesResponse {
            capabilities: vec![PluginCapability {
                r#type: Some(PluginCapabilityType::Service(PluginCapabilityService {
                    r#type: PluginServiceType::ControllerService as i32,
                })),
            }],
        }
    }

    /// Answers without waiting for a store operation in flight: a long snapshot must not
    /// make the sidecars think the driver is dead.
    pub async fn probe(&self) -> Result<ProbeResponse, Status> {
        let store = Arc::clone(&self.store);
        let healthy = tokio::task::spawn_blocking(move || store.healthy())
            .await
            .unwrap_or(false);
        if !healthy {
            return Err(Status::failed_precondition(
                "the driver root's layout is gone",
            ));
        }
        Ok(ProbeResponse {
            ready: Some(BoolValue { value: true }),
        })
    }

    pub fn controller_capabilities() -> ControllerGetCapabilitiesResponse {
        ControllerGetCapabilitiesResponse {
            capabilities: CONTROLLER_CAPABILITIES
                .iter()
                .map(|&t| ControllerServiceCapability {
                    r#type: Some(ControllerCapabilityType::Rpc(ControllerCapabilityRpc {
                        r#type: t as i32,
                    })),
                })
                .collect(),
        }
    }

    pub async fn create_volume(
        &self,
        r: CreateVolumeRequest,
    ) -> Result<CreateVolumeResponse, Status> {
        let req = parse_create_volume(r)?;
        let (record, path) = self
            .with_store(move |s| {
                let r = s.create_volume(&req)?;
                let path = s.volume_path(&r.id);
                Ok::<_, StoreError>((r, path))
            })
            .await?;
        tracing::info!(volume = %record.id, capacity = record.capacity_bytes, "volume ready");
        Ok(CreateVolumeResponse {
            volume: Some(volume_of(&record, &path.to_string_lossy())),
        })
    }

    pub async fn delete_volume(
        &self,
        r: DeleteVolumeRequest,
    ) -> Result<DeleteVolumeResponse, Status> {
        let id = field_id("volume_id", &r.volume_id)?;
        let done = self
            .with_store(move |s| {
                node::ensure_unused(s, &id)?;
                Ok::<_, NodeError>(s.delete_volume(&id)?)
            })
            .await?;
        tracing::info!(volume = %r.volume_id, ?done, "volume deleted");
        Ok(DeleteVolumeResponse {})
    }

    pub async fn create_snapshot(
        &self,
        r: CreateSnapshotRequest,
    ) -> Result<CreateSnapshotResponse, Status> {
        let cut_delay = snapshot_cut_delay(&r.parameters)?;
        let req = NewSnapshot {
            id: field_id("name", &r.name)?,
            source_volume: field_id("source_volume_id", &r.source_volume_id)?,
        };
        if !cut_delay.is_zero() {
            // Only a new snapshot waits: a retry of one already cut answers at once.
            let id = req.id.clone();
            if self.with_store(move |s| s.snapshot(&id)).await?.is_none() {
                tokio::time::sleep(cut_delay).await;
            }
        }
        let record = self.with_store(move |s| s.create_snapshot(&req)).await?;
        tracing::info!(snapshot = %record.id, source = %record.source_volume, "snapshot cut");
        Ok(CreateSnapshotResponse {
            snapshot: Some(snapshot_of(&record)),
        })
    }

    pub async fn delete_snapshot(
        &self,
        r: DeleteSnapshotRequest,
    ) -> Result<DeleteSnapshotResponse, Status> {
        let id = field_id("snapshot_id", &r.snapshot_id)?;
        let done: Deleted = self.with_store(move |s| s.delete_snapshot(&id)).await?;
        tracing::info!(snapshot = %r.snapshot_id, ?done, "snapshot deleted");
        Ok(DeleteSnapshotResponse {})
    }

    pub async fn list_snapshots(
        &self,
        r: ListSnapshotsRequest,
    ) -> Result<ListSnapshotsResponse, Status> {
        let q = parse_list(&r)?;
        let all = self.with_store(|s| s.snapshots()).await?;
        Ok(page(&q, &all))
    }

    /// Confirms the capabilities a volume has; a capability it cannot serve, or a
    /// context or parameters other than the volume's, leave it unconfirmed with the
    /// reason in `message` (not an error: the spec keeps errors for bad requests and
    /// unknown volumes).
    pub async fn validate_volume_capabilities(
        &self,
        r: ValidateVolumeCapabilitiesRequest,
    ) -> Result<ValidateVolumeCapabilitiesResponse, Status> {
        let id = field_id("volume_id", &r.volume_id)?;
        let caps = parse_capabilities(&r.volume_capabilities)?;
        let (record, path) = self
            .with_store(move |s| match s.volume(&id)? {
                Some(v) => Ok((v, s.volume_path(&id))),
                None => Err(StoreError::VolumeNotFound { id }),
            })
            .await?;
        let ours = volume_of(&record, &path.to_string_lossy());
        Ok(validation(&r, &caps, &record, &ours.volume_context))
    }

    pub fn node_info(&self) -> Result<NodeGetInfoResponse, Status> {
        let Some(node_id) = &self.node_id else {
            return Err(Status::failed_precondition(
                "the driver was started without --node-id",
            ));
        };
        Ok(NodeGetInfoResponse {
            node_id: node_id.to_string(),
            // No limit of its own: the CO decides.
            max_volumes_per_node: 0,
        })
    }

    pub fn node_capabilities() -> NodeGetCapabilitiesResponse {
        NodeGetCapabilitiesResponse {
            capabilities: NODE_CAPABILITIES
                .iter()
                .map(|&t| NodeServiceCapability {
                    r#type: Some(NodeCapabilityType::Rpc(NodeCapabilityRpc {
                        r#type: t as i32,
                    })),
                })
                .collect(),
        }
    }

    pub async fn node_publish(
        &self,
        r: NodePublishVolumeRequest,
    ) -> Result<NodePublishVolumeResponse, Status> {
        let req = parse_publish(&r)?;
        let (volume, target) = (r.volume_id, r.target_path);
        let done = self.with_store(move |s| node::publish(s, &req)).await?;
        tracing::info!(%volume, %target, ?done, "volume published");
        Ok(NodePublishVolumeResponse {})
    }

    pub async fn node_unpublish(
        &self,
        r: NodeUnpublishVolumeRequest,
    ) -> Result<NodeUnpublishVolumeResponse, Status> {
        let req = Unpublish {
            volume: field_id("volume_id", &r.volume_id)?,
            target: target_path(&r.target_path)?,
        };
        let (volume, target) = (r.volume_id, r.target_path);
        let done = self.with_store(move |s| node::unpublish(s, &req)).await?;
        tracing::info!(%volume, %target, ?done, "volume unpublished");
        Ok(NodeUnpublishVolumeResponse {})
    }
}

/// The status for a node operation's error (CSI spec, NodePublishVolume,
/// NodeUnpublishVolume and DeleteVolume "Errors").
pub fn node_status(e: &NodeError) -> Status {
    let code = match e {
        NodeError::Store(s) => return status(s),
        NodeError::Incompatible { .. } => Code::AlreadyExists,
        NodeError::Unsupported { .. }
        | NodeError::ParentMissing { .. }
        | NodeError::NotADirectory { .. }
        | NodeError::NotEmpty { .. }
        | NodeError::TargetTaken { .. }
        | NodeError::PublishedElsewhere { .. }
        | NodeError::InUse { .. } => Code::FailedPrecondition,
        NodeError::Overlaps { .. } => Code::InvalidArgument,
        NodeError::Mounts(_)
        | NodeError::Io { .. }
        | NodeError::Mount { .. }
        | NodeError::StillMounted { .. } => Code::Internal,
    };
    Status::new(code, e.to_string())
}

/// `field` must hold a target path; the status names the field.
fn target_path(value: &str) -> Result<TargetPath, Status> {
    TargetPath::parse(value).map_err(|e| Status::invalid_argument(format!("target_path {e}")))
}

/// A NodePublishVolume, checked field by field.
pub fn parse_publish(r: &NodePublishVolumeRequest) -> Result<Publish, Status> {
    let volume = field_id("volume_id", &r.volume_id)?;
    let target = target_path(&r.target_path)?;
    let Some(cap) = &r.volume_capability else {
        return Err(Status::invalid_argument("volume_capability is required"));
    };
    let capability = capability::parse(cap)
        .map_err(|e| Status::invalid_argument(format!("volume_capability.{e}")))?;
    Ok(Publish {
        volume,
        target,
        capability,
        readonly: r.readonly,
    })
}

/// Whether a volume has what a ValidateVolumeCapabilities asks (the request's shape is
/// already checked): confirmed with what was validated, or the reasons it is not.
pub fn validation(
    r: &ValidateVolumeCapabilitiesRequest,
    caps: &[Requested],
    record: &VolumeRecord,
    volume_context: &BTreeMap<String, String>,
) -> ValidateVolumeCapabilitiesResponse {
    let mut why: Vec<String> = caps
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            c.mount_flags()
                .err()
                .map(|e| format!("volume_capabilities[{i}].{e}"))
        })
        .collect();
    if !r.volume_context.is_empty() && &r.volume_context != volume_context {
        why.push("volume_context is not the volume's".to_owned());
    }
    if !r.parameters.is_empty() && r.parameters != record.parameters {
        why.push("parameters are not the ones the volume was created with".to_owned());
    }
    if !r.mutable_parameters.is_empty() {
        why.push("mutable_parameters: this driver has no MODIFY_VOLUME capability".to_owned());
    }
    if why.is_empty() {
        ValidateVolumeCapabilitiesResponse {
            confirmed: Some(ValidateVolumeCapabilitiesConfirmed {
                volume_context: r.volume_context.clone(),
                volume_capabilities: r.volume_capabilities.clone(),
                parameters: r.parameters.clone(),
                mutable_parameters: BTreeMap::new(),
            }),
            message: String::new(),
        }
    } else {
        ValidateVolumeCapabilitiesResponse {
            confirmed: None,
            message: why.join("; "),
        }
    }
}

/// The status for a store error (CSI spec, "Error Scheme" of each RPC).
pub fn status(e: &StoreError) -> Status {
    let code = match e {
        StoreError::VolumeNotFound { .. } | StoreError::SnapshotNotFound { .. } => Code::NotFound,
        StoreError::VolumeConflict { .. } | StoreError::SnapshotConflict { .. } => {
            Code::AlreadyExists
        }
        StoreError::CapacityBelowSource { .. } => Code::OutOfRange,
        StoreError::CapacityRange { .. } => Code::InvalidArgument,
        _ if e.is_no_space() => Code::ResourceExhausted,
        _ => Code::Internal,
    };
    Status::new(code, e.to_string())
}

/// `field` must hold an id; the status names the field.
pub fn field_id(field: &str, value: &str) -> Result<ObjectId, Status> {
    ObjectId::parse(value).map_err(|e| Status::invalid_argument(format!("{field} {e}")))
}

/// The VolumeSnapshotClass parameter that delays the cut: the lab uses it to make a cut
/// last as long as a slow driver's would, so that a restart attempt lands inside it.
pub const CUT_DELAY_PARAMETER: &str = "cutDelayMillis";
/// The longest delay accepted: below csi-snapshotter's default CreateSnapshot timeout (1 min).
pub const MAX_CUT_DELAY: std::time::Duration = std::time::Duration::from_secs(50);
/// Parameters the sidecars add with `--extra-create-metadata` (names of the objects).
const SIDECAR_PARAMETER_PREFIX: &str = "csi.storage.k8s.io/";

/// The cut delay a CreateSnapshot asks for; any other parameter is refused by name.
pub fn snapshot_cut_delay(
    parameters: &BTreeMap<String, String>,
) -> Result<std::time::Duration, Status> {
    let mut delay = std::time::Duration::ZERO;
    for (k, v) in parameters {
        if k.starts_with(SIDECAR_PARAMETER_PREFIX) {
            continue;
        }
        if k != CUT_DELAY_PARAMETER {
            return Err(Status::invalid_argument(format!(
                "parameters.{k}: unknown parameter (this driver takes only {CUT_DELAY_PARAMETER})"
            )));
        }
        let ms: u64 = v.parse().map_err(|_| {
            Status::invalid_argument(format!(
                "parameters.{k}: {v:?} is not a whole number of milliseconds"
            ))
        })?;
        delay = std::time::Duration::from_millis(ms);
        if delay > MAX_CUT_DELAY {
            return Err(Status::invalid_argument(format!(
                "parameters.{k}: {ms} ms is more than the {} ms allowed",
                MAX_CUT_DELAY.as_millis()
            )));
        }
    }
    Ok(delay)
}

/// A CreateVolume, checked field by field.
pub fn parse_create_volume(r: CreateVolumeRequest) -> Result<NewVolume, Status> {
    let id = field_id("name", &r.name)?;
    check_capabilities(&r.volume_capabilities)?;
    if !r.mutable_parameters.is_empty() {
        return Err(Status::invalid_argument(
            "mutable_parameters: this driver has no MODIFY_VOLUME capability",
        ));
    }
    Ok(NewVolume {
        id,
        capacity: capacity(r.capacity_range.as_ref())?,
        source_snapshot: content_source(r.volume_content_source.as_ref())?,
        parameters: r.parameters,
    })
}

/// `volume_capabilities`: at least one, each well-formed (capability.rs).
fn parse_capabilities(caps: &[VolumeCapability]) -> Result<Vec<Requested>, Status> {
    if caps.is_empty() {
        return Err(Status::invalid_argument("volume_capabilities is required"));
    }
    caps.iter()
        .enumerate()
        .map(|(i, c)| {
            capability::parse(c)
                .map_err(|e| Status::invalid_argument(format!("volume_capabilities[{i}].{e}")))
        })
        .collect()
}

/// A volume is created only for capabilities it can serve (capability.rs).
fn check_capabilities(caps: &[VolumeCapability]) -> Result<(), Status> {
    for (i, c) in parse_capabilities(caps)?.iter().enumerate() {
        c.mount_flags()
            .map_err(|e| Status::invalid_argument(format!("volume_capabilities[{i}].{e}")))?;
    }
    Ok(())
}

fn capacity(r: Option<&CapacityRange>) -> Result<Capacity, Status> {
    let Some(r) = r else {
        return Ok(Capacity::default());
    };
    if r.required_bytes < 0 || r.limit_bytes < 0 {
        return Err(Status::invalid_argument(
            "capacity_range: required_bytes and limit_bytes must not be negative",
        ));
    }
    if r.limit_bytes != 0 && r.limit_bytes < r.required_bytes {
        return Err(Status::invalid_argument(format!(
            "capacity_range: limit_bytes {} is less than required_bytes {}",
            r.limit_bytes, r.required_bytes
        )));
    }
    Ok(Capacity {
        required: r.required_bytes,
        limit: r.limit_bytes,
    })
}

fn content_source(s: Option<&VolumeContentSource>) -> Result<Option<ObjectId>, Status> {
    match s.map(|s| &s.r#type) {
        None => Ok(None),
        Some(None) => Err(Status::invalid_argument(
            "volume_content_source: one of snapshot or volume is required",
        )),
        Some(Some(ContentSource::Snapshot(s))) => {
            field_id("volume_content_source.snapshot.snapshot_id", &s.snapshot_id).map(Some)
        }
        Some(Some(ContentSource::Volume(_))) => Err(Status::invalid_argument(
            "volume_content_source.volume: cloning a volume is not supported (no CLONE_VOLUME capability)",
        )),
    }
}

pub fn volume_of(r: &VolumeRecord, path: &str) -> Volume {
    Volume {
        capacity_bytes: r.capacity_bytes,
        volume_id: r.id.to_string(),
        volume_context: BTreeMap::from([(PATH_KEY.to_owned(), path.to_owned())]),
        content_source: r.source_snapshot.as_ref().map(|s| VolumeContentSource {
            r#type: Some(ContentSource::Snapshot(SnapshotSource {
                snapshot_id: s.to_string(),
            })),
        }),
    }
}

pub fn snapshot_of(r: &SnapshotRecord) -> Snapshot {
    Snapshot {
        size_bytes: r.size_bytes,
        snapshot_id: r.id.to_string(),
        source_volume_id: r.source_volume.to_string(),
        creation_time: Some(r.creation_time.clone()),
        // A btrfs snapshot is complete when the ioctl returns.
        ready_to_use: true,
        group_snapshot_id: String::new(),
    }
}

/// The prefix of a page token; the rest is the first id of the next page. Anything else
/// is not a token this driver gave out (ABORTED, per the spec).
const TOKEN_PREFIX: &str = "after:";

/// A ListSnapshots, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListQuery {
    /// 0: no limit.
    pub max_entries: usize,
    pub start: Option<ObjectId>,
    pub source_volume: Filter,
    pub snapshot: Filter,
}

/// A filter on an id. An id that cannot exist matches nothing: the spec asks for an
/// empty list, not an error.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Filter {
    #[default]
    Any,
    Is(ObjectId),
    Nothing,
}

impl Filter {
    fn of(s: &str) -> Self {
        if s.is_empty() {
            Filter::Any
        } else {
            ObjectId::parse(s).map_or(Filter::Nothing, Filter::Is)
        }
    }

    fn admits(&self, id: &ObjectId) -> bool {
        match self {
            Filter::Any => true,
            Filter::Is(want) => want == id,
            Filter::Nothing => false,
        }
    }
}

pub fn parse_list(r: &ListSnapshotsRequest) -> Result<ListQuery, Status> {
    let max_entries = usize::try_from(r.max_entries)
        .map_err(|_| Status::invalid_argument("max_entries must not be negative"))?;
    let start = if r.starting_token.is_empty() {
        None
    } else {
        let id = r
            .starting_token
            .strip_prefix(TOKEN_PREFIX)
            .and_then(|t| ObjectId::parse(t).ok())
            .ok_or_else(|| Status::aborted("starting_token is not a token this driver gave out"))?;
        Some(id)
    };
    Ok(ListQuery {
        max_entries,
        start,
        source_volume: Filter::of(&r.source_volume_id),
        snapshot: Filter::of(&r.snapshot_id),
    })
}

/// One page of `all` (in id order). The token names the next id rather than an offset,
/// so a snapshot deleted between pages does not shift the next page.
pub fn page(q: &ListQuery, all: &[SnapshotRecord]) -> ListSnapshotsResponse {
    let mut matching = all.iter().filter(|r| {
        q.snapshot.admits(&r.id)
            && q.source_volume.admits(&r.source_volume)
            && q.start.as_ref().is_none_or(|s| &r.id >= s)
    });
    let limit = if q.max_entries == 0 {
        usize::MAX
    } else {
        q.max_entries
    };
    let entries: Vec<ListSnapshotsEntry> = matching
        .by_ref()
        .take(limit)
        .map(|r| ListSnapshotsEntry {
            snapshot: Some(snapshot_of(r)),
        })
        .collect();
    let next_token = matching
        .next()
        .map(|r| format!("{TOKEN_PREFIX}{}", r.id))
        .unwrap_or_default();
    ListSnapshotsResponse {
        entries,
        next_token,
    }
}

// ---- gRPC plumbing: route on the method name, decode, answer ----

type HttpFuture = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

/// Decodes the request, runs `f`, encodes the answer or its status.
async fn unary<Req, Resp, F, Fut>(req: http::Request<Body>, f: F) -> http::Response<Body>
where
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
    F: FnOnce(Req) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
{
    let svc = tower::service_fn(move |r: tonic::Request<Req>| {
        let f = f.clone();
        async move { f(r.into_inner()).await.map(tonic::Response::new) }
    });
    tonic::server::Grpc::new(ProstCodec::<Resp, Req>::default())
        .unary(svc, req)
        .await
}

fn method(req: &http::Request<Body>) -> String {
    req.uri()
        .path()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// One `csi.v1` gRPC service over the driver: the tower plumbing is the same for each;
/// only its name and its method routing (`$route`, a `match` on the method name whose
/// arms are response futures, with `$d` the driver and `$req` the request) differ.
macro_rules! csi_service {
    ($(#[$doc:meta])* $service:ident, $name:expr, $label:literal,
     |$d:ident, $req:ident, $method:ident| $route:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $service(pub Arc<Driver>);

        impl tonic::server::NamedService for $service {
            const NAME: &'static str = $name;
        }

        impl tower::Service<http::Request<Body>> for $service {
            type Response = http::Response<Body>;
            type Error = Infallible;
            type Future = HttpFuture;

            fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
                Poll::Ready(Ok(()))
            }

            fn call(&mut self, $req: http::Request<Body>) -> Self::Future {
                let $d = Arc::clone(&self.0);
                let $method = method(&$req);
                let span = tracing::info_span!("csi", service = $label, method = %$method);
                Box::pin(async move { Ok($route) }.instrument(span))
            }
        }
    };
}

csi_service!(
    /// `csi.v1.Identity`.
    IdentityService, IDENTITY, "Identity",
    |d, req, m| match m.as_str() {
        "GetPluginInfo" => {
            let info = d.plugin_info();
            unary(req, move |_: GetPluginInfoRequest| async move { Ok(info) }).await
        }
        "GetPluginCapabilities" => {
            unary(req, |_: GetPluginCapabilitiesRequest| async {
                Ok(Driver::plugin_capabilities())
            })
            .await
        }
        "Probe" => unary(req, move |_: ProbeRequest| async move { d.probe().await }).await,
        other => unimplemented(IDENTITY, other),
    }
);

csi_service!(
    /// `csi.v1.Controller`.
    ControllerService, CONTROLLER, "Controller",
    |d, req, m| match m.as_str() {
        "ControllerGetCapabilities" => {
            unary(req, |_: ControllerGetCapabilitiesRequest| async {
                Ok(Driver::controller_capabilities())
            })
            .await
        }
        "CreateVolume" => unary(req, move |r| async move { d.create_volume(r).await }).await,
        "DeleteVolume" => unary(req, move |r| async move { d.delete_volume(r).await }).await,
        "CreateSnapshot" => unary(req, move |r| async move { d.create_snapshot(r).await }).await,
        "DeleteSnapshot" => unary(req, move |r| async move { d.delete_snapshot(r).await }).await,
        "ListSnapshots" => unary(req, move |r| async move { d.list_snapshots(r).await }).await,
        "ValidateVolumeCapabilities" => {
            unary(req, move |r| async move { d.validate_volume_capabilities(r).await }).await
        }
        other => unimplemented(CONTROLLER, other),
    }
);

csi_service!(
    /// `csi.v1.Node`. Served without a plugin capability: the spec's PluginCapability
    /// lists the controller service only; every plugin is expected to serve Node.
    NodeService, NODE, "Node",
    |d, req, m| match m.as_str() {
        "NodeGetInfo" => {
            let info = d.node_info();
            unary(req, move |_: NodeGetInfoRequest| async move { info }).await
        }
        "NodeGetCapabilities" => {
            unary(req, |_: NodeGetCapabilitiesRequest| async {
                Ok(Driver::node_capabilities())
            })
            .await
        }
        "NodePublishVolume" => unary(req, move |r| async move { d.node_publish(r).await }).await,
        "NodeUnpublishVolume" => {
            unary(req, move |r| async move { d.node_unpublish(r).await }).await
        }
        other => unimplemented(NODE, other),
    }
);

fn unimplemented(service: &str, method: &str) -> http::Response<Body> {
    tracing::debug!(service, method, "not implemented");
    Status::unimplemented(format!(
        "{service}/{method} is not implemented by {DRIVER_NAME}"
    ))
    .into_http()
}

#[cfg(test)]
mod tests;
