//! The CSI Identity and Controller services: parse each request at the boundary (every
//! field a CO can get wrong is an INVALID_ARGUMENT naming it), run the store operation,
//! and map its error to the status code the spec prescribes.
//!
//! Store operations run one at a time on a blocking thread: they shell out to `btrfs`,
//! and two creates of one name must not interleave.

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

use crate::csi::*;
use crate::ids::ObjectId;
use crate::meta::{SnapshotRecord, VolumeRecord};
use crate::store::{Capacity, Deleted, NewSnapshot, NewVolume, Store, StoreError};

/// The name the sidecars register the driver under (StorageClass `provisioner`,
/// VolumeSnapshotClass `driver`).
pub const DRIVER_NAME: &str = "btrfs.csi.vtsnap.io";

/// The `volume_context` key holding the volume's directory: where the lab mounts it
/// from, as kubelet's node plugin would.
pub const PATH_KEY: &str = "path";

/// What the controller advertises. CLONE_VOLUME, GET_CAPACITY and LIST_VOLUMES are not
/// implemented, so they are not offered: external-provisioner then never sends them.
pub const CONTROLLER_CAPABILITIES: [ControllerRpcType; 3] = [
    ControllerRpcType::CreateDeleteVolume,
    ControllerRpcType::CreateDeleteSnapshot,
    ControllerRpcType::ListSnapshots,
];

/// The driver behind both services.
#[derive(Debug)]
pub struct Driver {
    store: Arc<Store>,
    /// Serializes store operations (the store holds no data in memory to guard).
    one_at_a_time: Arc<Mutex<()>>,
    node_id: Option<String>,
}

impl Driver {
    pub fn new(store: Store, node_id: Option<String>) -> Self {
        Self {
            store: Arc::new(store),
            one_at_a_time: Arc::new(Mutex::new(())),
            node_id,
        }
    }

    /// Runs `op` on the store on a blocking thread, one call at a time.
    async fn with_store<T, F>(&self, op: F) -> Result<T, Status>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
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
            Ok(r) => r.map_err(|e| status(&e)),
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
                .map(|n| ("node-id".to_owned(), n.clone()))
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
                Ok((r, path))
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
        let done = self.with_store(move |s| s.delete_volume(&id)).await?;
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

/// A subvolume is a directory: any access mode on this one host, never a block device.
fn check_capabilities(caps: &[VolumeCapability]) -> Result<(), Status> {
    if caps.is_empty() {
        return Err(Status::invalid_argument("volume_capabilities is required"));
    }
    for (i, c) in caps.iter().enumerate() {
        match c.access_type {
            Some(AccessType::Mount(_)) => {}
            Some(AccessType::Block(_)) => {
                return Err(Status::invalid_argument(format!(
                    "volume_capabilities[{i}].block: block volumes are not supported"
                )));
            }
            None => {
                return Err(Status::invalid_argument(format!(
                    "volume_capabilities[{i}].access_type is required"
                )));
            }
        }
        let mode = c.access_mode.as_ref().map(|m| m.mode);
        match mode.and_then(|m| AccessModeKind::try_from(m).ok()) {
            Some(AccessModeKind::Unknown) | None => {
                return Err(Status::invalid_argument(format!(
                    "volume_capabilities[{i}].access_mode is missing or unknown ({mode:?})"
                )));
            }
            Some(_) => {}
        }
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

/// `csi.v1.Identity`.
#[derive(Debug, Clone)]
pub struct IdentityService(pub Arc<Driver>);

impl tonic::server::NamedService for IdentityService {
    const NAME: &'static str = IDENTITY;
}

impl tower::Service<http::Request<Body>> for IdentityService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = HttpFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let d = Arc::clone(&self.0);
        let m = method(&req);
        let span = tracing::info_span!("csi", service = "Identity", method = %m);
        Box::pin(
            async move {
                let resp = match m.as_str() {
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
                    "Probe" => {
                        unary(req, move |_: ProbeRequest| async move { d.probe().await }).await
                    }
                    other => unimplemented(IDENTITY, other),
                };
                Ok(resp)
            }
            .instrument(span),
        )
    }
}

/// `csi.v1.Controller`.
#[derive(Debug, Clone)]
pub struct ControllerService(pub Arc<Driver>);

impl tonic::server::NamedService for ControllerService {
    const NAME: &'static str = CONTROLLER;
}

impl tower::Service<http::Request<Body>> for ControllerService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = HttpFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let d = Arc::clone(&self.0);
        let m = method(&req);
        let span = tracing::info_span!("csi", service = "Controller", method = %m);
        Box::pin(
            async move {
                let resp = match m.as_str() {
                    "ControllerGetCapabilities" => {
                        unary(req, |_: ControllerGetCapabilitiesRequest| async {
                            Ok(Driver::controller_capabilities())
                        })
                        .await
                    }
                    "CreateVolume" => {
                        unary(req, move |r| async move { d.create_volume(r).await }).await
                    }
                    "DeleteVolume" => {
                        unary(req, move |r| async move { d.delete_volume(r).await }).await
                    }
                    "CreateSnapshot" => {
                        unary(req, move |r| async move { d.create_snapshot(r).await }).await
                    }
                    "DeleteSnapshot" => {
                        unary(req, move |r| async move { d.delete_snapshot(r).await }).await
                    }
                    "ListSnapshots" => {
                        unary(req, move |r| async move { d.list_snapshots(r).await }).await
                    }
                    other => unimplemented(CONTROLLER, other),
                };
                Ok(resp)
            }
            .instrument(span),
        )
    }
}

fn unimplemented(service: &str, method: &str) -> http::Response<Body> {
    tracing::debug!(service, method, "not implemented");
    Status::unimplemented(format!(
        "{service}/{method} is not implemented by {DRIVER_NAME}"
    ))
    .into_http()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount() -> VolumeCapability {
        VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: Some(AccessMode {
                mode: AccessModeKind::SingleNodeWriter as i32,
            }),
        }
    }

    fn create(name: &str) -> CreateVolumeRequest {
        CreateVolumeRequest {
            name: name.to_owned(),
            volume_capabilities: vec![mount()],
            ..Default::default()
        }
    }

    #[test]
    fn a_snapshot_takes_a_cut_delay_and_the_sidecars_names_and_nothing_else() {
        let params = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            snapshot_cut_delay(&params(&[])).unwrap(),
            std::time::Duration::ZERO
        );
        assert_eq!(
            snapshot_cut_delay(&params(&[
                ("cutDelayMillis", "8000"),
                ("csi.storage.k8s.io/volumesnapshot/name", "s"),
            ]))
            .unwrap(),
            std::time::Duration::from_secs(8)
        );
        let msg = |kv: &[(&str, &str)]| {
            snapshot_cut_delay(&params(kv))
                .unwrap_err()
                .message()
                .to_owned()
        };
        assert!(msg(&[("cutDelay", "8s")]).starts_with("parameters.cutDelay: unknown"));
        assert!(msg(&[("cutDelayMillis", "8s")]).contains("not a whole number"));
        assert!(msg(&[("cutDelayMillis", "-1")]).contains("not a whole number"));
        assert!(msg(&[("cutDelayMillis", "50001")]).contains("more than the 50000 ms"));
        assert!(snapshot_cut_delay(&params(&[("cutDelayMillis", "50000")])).is_ok());
    }

    fn refused(r: Result<NewVolume, Status>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        e.message().to_owned()
    }

    #[test]
    fn a_create_volume_is_parsed_with_its_source() {
        let mut r = create("pvc-1");
        r.capacity_range = Some(CapacityRange {
            required_bytes: 10,
            limit_bytes: 20,
        });
        r.volume_content_source = Some(VolumeContentSource {
            r#type: Some(ContentSource::Snapshot(SnapshotSource {
                snapshot_id: "snap-1".into(),
            })),
        });
        let v = parse_create_volume(r).unwrap();
        assert_eq!(v.id.as_str(), "pvc-1");
        assert_eq!(
            v.capacity,
            Capacity {
                required: 10,
                limit: 20
            }
        );
        assert_eq!(v.source_snapshot.unwrap().as_str(), "snap-1");
    }

    #[test]
    fn every_bad_field_is_named() {
        assert!(refused(parse_create_volume(create("../x"))).starts_with("name "));
        assert!(refused(parse_create_volume(create(""))).contains("name is required"));

        let mut r = create("v");
        r.volume_capabilities.clear();
        assert!(refused(parse_create_volume(r)).contains("volume_capabilities is required"));

        let mut r = create("v");
        r.volume_capabilities[0].access_type = Some(AccessType::Block(BlockVolume {}));
        assert!(refused(parse_create_volume(r)).contains("volume_capabilities[0].block"));

        let mut r = create("v");
        r.volume_capabilities[0].access_mode = None;
        assert!(refused(parse_create_volume(r)).contains("volume_capabilities[0].access_mode"));

        for (req, lim) in [(-1, 0), (0, -1), (10, 5)] {
            let mut r = create("v");
            r.capacity_range = Some(CapacityRange {
                required_bytes: req,
                limit_bytes: lim,
            });
            assert!(refused(parse_create_volume(r)).starts_with("capacity_range"));
        }

        let mut r = create("v");
        r.volume_content_source = Some(VolumeContentSource {
            r#type: Some(ContentSource::Snapshot(SnapshotSource {
                snapshot_id: "/etc".into(),
            })),
        });
        assert!(
            refused(parse_create_volume(r))
                .starts_with("volume_content_source.snapshot.snapshot_id ")
        );

        let mut r = create("v");
        r.volume_content_source = Some(VolumeContentSource {
            r#type: Some(ContentSource::Volume(VolumeSource {
                volume_id: "v0".into(),
            })),
        });
        assert!(refused(parse_create_volume(r)).contains("CLONE_VOLUME"));

        let mut r = create("v");
        r.mutable_parameters.insert("k".into(), "v".into());
        assert!(refused(parse_create_volume(r)).starts_with("mutable_parameters"));
    }

    #[test]
    fn store_errors_get_the_specs_codes() {
        let id = || ObjectId::parse("x").unwrap();
        let code = |e: StoreError| status(&e).code();
        assert_eq!(
            code(StoreError::VolumeNotFound { id: id() }),
            Code::NotFound
        );
        assert_eq!(
            code(StoreError::SnapshotNotFound { id: id() }),
            Code::NotFound
        );
        assert_eq!(
            code(StoreError::SnapshotConflict {
                id: id(),
                existing: id(),
                requested: id()
            }),
            Code::AlreadyExists
        );
        assert_eq!(
            code(StoreError::CapacityBelowSource {
                limit: 1,
                minimum: 2,
                snapshot: id()
            }),
            Code::OutOfRange
        );
    }

    fn snap(id: &str, volume: &str) -> SnapshotRecord {
        SnapshotRecord {
            version: crate::meta::VERSION,
            id: ObjectId::parse(id).unwrap(),
            source_volume: ObjectId::parse(volume).unwrap(),
            size_bytes: 0,
            creation_time: Timestamp::default(),
        }
    }

    fn ids(r: &ListSnapshotsResponse) -> Vec<String> {
        r.entries
            .iter()
            .map(|e| e.snapshot.as_ref().unwrap().snapshot_id.clone())
            .collect()
    }

    #[test]
    fn list_pages_by_id_and_filters() {
        let all = [snap("a", "v1"), snap("b", "v2"), snap("c", "v1")];
        let list = |r: ListSnapshotsRequest| page(&parse_list(&r).unwrap(), &all);

        let first = list(ListSnapshotsRequest {
            max_entries: 2,
            ..Default::default()
        });
        assert_eq!(ids(&first), ["a", "b"]);
        assert_eq!(first.next_token, "after:c");
        let rest = list(ListSnapshotsRequest {
            max_entries: 2,
            starting_token: first.next_token,
            ..Default::default()
        });
        assert_eq!(ids(&rest), ["c"]);
        assert_eq!(rest.next_token, "", "the last page");

        let by_volume = list(ListSnapshotsRequest {
            source_volume_id: "v1".into(),
            ..Default::default()
        });
        assert_eq!(ids(&by_volume), ["a", "c"]);
        let one = list(ListSnapshotsRequest {
            snapshot_id: "b".into(),
            ..Default::default()
        });
        assert_eq!(ids(&one), ["b"]);
        for nothing in ["zzz", "../a", "a\0"] {
            let none = list(ListSnapshotsRequest {
                snapshot_id: nothing.into(),
                ..Default::default()
            });
            assert!(none.entries.is_empty(), "{nothing:?}");
        }
    }

    #[test]
    fn a_foreign_token_is_aborted_and_a_negative_limit_refused() {
        let e = parse_list(&ListSnapshotsRequest {
            starting_token: "invalid-token".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.code(), Code::Aborted);
        let e = parse_list(&ListSnapshotsRequest {
            max_entries: -1,
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }

    #[test]
    fn advertised_capabilities_are_the_implemented_ones() {
        let caps: Vec<i32> = Driver::controller_capabilities()
            .capabilities
            .into_iter()
            .filter_map(|c| c.r#type.map(|ControllerCapabilityType::Rpc(r)| r.r#type))
            .collect();
        assert_eq!(
            caps,
            [1, 5, 6],
            "CREATE_DELETE_VOLUME, CREATE_DELETE_SNAPSHOT, LIST_SNAPSHOTS"
        );
    }
}
