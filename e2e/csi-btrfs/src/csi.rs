//! Hand-written messages of the CSI spec v1 (package `csi.v1`), only those this driver
//! serves. Field numbers, enum values and service/method names are wire facts from the
//! spec's `csi.proto`, read from the Go module cache:
//! `$GOMODCACHE/github.com/container-storage-interface/spec@v1.12.0/csi.proto`.
//!
//! Fields the driver does not use are left out, and prost skips them when decoding. The
//! `secrets` maps in particular are never decoded, so no secret can reach a log line.
//! Nested proto messages get flat Rust names (`PluginCapability.Service` is
//! [`PluginCapabilityService`]); the wire does not carry names.

use std::collections::BTreeMap;

/// Call path prefix of the Identity service: `/csi.v1.Identity/<Method>`.
pub const IDENTITY: &str = "csi.v1.Identity";
/// Call path prefix of the Controller service: `/csi.v1.Controller/<Method>`.
pub const CONTROLLER: &str = "csi.v1.Controller";
/// Call path prefix of the Node service: `/csi.v1.Node/<Method>`.
pub const NODE: &str = "csi.v1.Node";

/// google.protobuf.BoolValue (`google/protobuf/wrappers.proto`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct BoolValue {
    #[prost(bool, tag = "1")]
    pub value: bool,
}

/// google.protobuf.Timestamp (`google/protobuf/timestamp.proto`).
#[derive(Clone, PartialEq, Eq, prost::Message, serde::Serialize, serde::Deserialize)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

// ---- Identity ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPluginInfoRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPluginInfoResponse {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub vendor_version: String,
    #[prost(btree_map = "string, string", tag = "3")]
    pub manifest: BTreeMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPluginCapabilitiesRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPluginCapabilitiesResponse {
    #[prost(message, repeated, tag = "1")]
    pub capabilities: Vec<PluginCapability>,
}

/// `PluginCapability`; only its `service` arm (the `volume_expansion` arm, tag 2, is
/// not offered).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PluginCapability {
    #[prost(oneof = "PluginCapabilityType", tags = "1")]
    pub r#type: Option<PluginCapabilityType>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum PluginCapabilityType {
    #[prost(message, tag = "1")]
    Service(PluginCapabilityService),
}

/// `PluginCapability.Service`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PluginCapabilityService {
    #[prost(enumeration = "PluginServiceType", tag = "1")]
    pub r#type: i32,
}

/// `PluginCapability.Service.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum PluginServiceType {
    Unknown = 0,
    ControllerService = 1,
    VolumeAccessibilityConstraints = 2,
    GroupControllerService = 3,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProbeRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProbeResponse {
    #[prost(message, optional, tag = "1")]
    pub ready: Option<BoolValue>,
}

// ---- Controller: capabilities ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerGetCapabilitiesRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerGetCapabilitiesResponse {
    #[prost(message, repeated, tag = "1")]
    pub capabilities: Vec<ControllerServiceCapability>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerServiceCapability {
    #[prost(oneof = "ControllerCapabilityType", tags = "1")]
    pub r#type: Option<ControllerCapabilityType>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum ControllerCapabilityType {
    #[prost(message, tag = "1")]
    Rpc(ControllerCapabilityRpc),
}

/// `ControllerServiceCapability.RPC`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ControllerCapabilityRpc {
    #[prost(enumeration = "ControllerRpcType", tag = "1")]
    pub r#type: i32,
}

/// `ControllerServiceCapability.RPC.Type` (the alpha values 11–13 and 15 are left out).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ControllerRpcType {
    Unknown = 0,
    CreateDeleteVolume = 1,
    PublishUnpublishVolume = 2,
    ListVolumes = 3,
    GetCapacity = 4,
    CreateDeleteSnapshot = 5,
    ListSnapshots = 6,
    CloneVolume = 7,
    PublishReadonly = 8,
    ExpandVolume = 9,
    ListVolumesPublishedNodes = 10,
    ModifyVolume = 14,
}

// ---- Controller: volumes ----

/// `CreateVolumeRequest`, without `secrets` (5) and `accessibility_requirements` (7):
/// this plugin has no VOLUME_ACCESSIBILITY_CONSTRAINTS, so a CO sends none.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateVolumeRequest {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub capacity_range: Option<CapacityRange>,
    #[prost(message, repeated, tag = "3")]
    pub volume_capabilities: Vec<VolumeCapability>,
    #[prost(btree_map = "string, string", tag = "4")]
    pub parameters: BTreeMap<String, String>,
    #[prost(message, optional, tag = "6")]
    pub volume_content_source: Option<VolumeContentSource>,
    #[prost(btree_map = "string, string", tag = "8")]
    pub mutable_parameters: BTreeMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CapacityRange {
    #[prost(int64, tag = "1")]
    pub required_bytes: i64,
    #[prost(int64, tag = "2")]
    pub limit_bytes: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct VolumeCapability {
    #[prost(oneof = "AccessType", tags = "1, 2")]
    pub access_type: Option<AccessType>,
    #[prost(message, optional, tag = "3")]
    pub access_mode: Option<AccessMode>,
}

/// `VolumeCapability.access_type`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AccessType {
    #[prost(message, tag = "1")]
    Block(BlockVolume),
    #[prost(message, tag = "2")]
    Mount(MountVolume),
}

/// `VolumeCapability.BlockVolume`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BlockVolume {}

/// `VolumeCapability.MountVolume`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MountVolume {
    #[prost(string, tag = "1")]
    pub fs_type: String,
    #[prost(string, repeated, tag = "2")]
    pub mount_flags: Vec<String>,
    #[prost(string, tag = "3")]
    pub volume_mount_group: String,
}

/// `VolumeCapability.AccessMode`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AccessMode {
    #[prost(enumeration = "AccessModeKind", tag = "1")]
    pub mode: i32,
}

/// `VolumeCapability.AccessMode.Mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum AccessModeKind {
    Unknown = 0,
    SingleNodeWriter = 1,
    SingleNodeReaderOnly = 2,
    MultiNodeReaderOnly = 3,
    MultiNodeSingleWriter = 4,
    MultiNodeMultiWriter = 5,
    SingleNodeSingleWriter = 6,
    SingleNodeMultiWriter = 7,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct VolumeContentSource {
    #[prost(oneof = "ContentSource", tags = "1, 2")]
    pub r#type: Option<ContentSource>,
}

/// `VolumeContentSource.type`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum ContentSource {
    #[prost(message, tag = "1")]
    Snapshot(SnapshotSource),
    #[prost(message, tag = "2")]
    Volume(VolumeSource),
}

/// `VolumeContentSource.SnapshotSource`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotSource {
    #[prost(string, tag = "1")]
    pub snapshot_id: String,
}

/// `VolumeContentSource.VolumeSource`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct VolumeSource {
    #[prost(string, tag = "1")]
    pub volume_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateVolumeResponse {
    #[prost(message, optional, tag = "1")]
    pub volume: Option<Volume>,
}

/// `Volume`, without `accessible_topology` (5).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Volume {
    #[prost(int64, tag = "1")]
    pub capacity_bytes: i64,
    #[prost(string, tag = "2")]
    pub volume_id: String,
    #[prost(btree_map = "string, string", tag = "3")]
    pub volume_context: BTreeMap<String, String>,
    #[prost(message, optional, tag = "4")]
    pub content_source: Option<VolumeContentSource>,
}

/// `DeleteVolumeRequest`, without `secrets` (2).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteVolumeResponse {}

/// `ValidateVolumeCapabilitiesRequest`, without `secrets` (5).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValidateVolumeCapabilitiesRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(btree_map = "string, string", tag = "2")]
    pub volume_context: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "3")]
    pub volume_capabilities: Vec<VolumeCapability>,
    #[prost(btree_map = "string, string", tag = "4")]
    pub parameters: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "6")]
    pub mutable_parameters: BTreeMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValidateVolumeCapabilitiesResponse {
    #[prost(message, optional, tag = "1")]
    pub confirmed: Option<ValidateVolumeCapabilitiesConfirmed>,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// `ValidateVolumeCapabilitiesResponse.Confirmed`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValidateVolumeCapabilitiesConfirmed {
    #[prost(btree_map = "string, string", tag = "1")]
    pub volume_context: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "2")]
    pub volume_capabilities: Vec<VolumeCapability>,
    #[prost(btree_map = "string, string", tag = "3")]
    pub parameters: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "4")]
    pub mutable_parameters: BTreeMap<String, String>,
}

// ---- Controller: snapshots ----

/// `CreateSnapshotRequest`, without `secrets` (3).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateSnapshotRequest {
    #[prost(string, tag = "1")]
    pub source_volume_id: String,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(btree_map = "string, string", tag = "4")]
    pub parameters: BTreeMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateSnapshotResponse {
    #[prost(message, optional, tag = "1")]
    pub snapshot: Option<Snapshot>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Snapshot {
    #[prost(int64, tag = "1")]
    pub size_bytes: i64,
    #[prost(string, tag = "2")]
    pub snapshot_id: String,
    #[prost(string, tag = "3")]
    pub source_volume_id: String,
    #[prost(message, optional, tag = "4")]
    pub creation_time: Option<Timestamp>,
    #[prost(bool, tag = "5")]
    pub ready_to_use: bool,
    #[prost(string, tag = "6")]
    pub group_snapshot_id: String,
}

/// `DeleteSnapshotRequest`, without `secrets` (2).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteSnapshotRequest {
    #[prost(string, tag = "1")]
    pub snapshot_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteSnapshotResponse {}

/// `ListSnapshotsRequest`, without `secrets` (5).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListSnapshotsRequest {
    #[prost(int32, tag = "1")]
    pub max_entries: i32,
    #[prost(string, tag = "2")]
    pub starting_token: String,
    #[prost(string, tag = "3")]
    pub source_volume_id: String,
    #[prost(string, tag = "4")]
    pub snapshot_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListSnapshotsResponse {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<ListSnapshotsEntry>,
    #[prost(string, tag = "2")]
    pub next_token: String,
}

/// `ListSnapshotsResponse.Entry`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListSnapshotsEntry {
    #[prost(message, optional, tag = "1")]
    pub snapshot: Option<Snapshot>,
}

// ---- Node ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetInfoRequest {}

/// `NodeGetInfoResponse`, without `accessible_topology` (3): this plugin has no
/// VOLUME_ACCESSIBILITY_CONSTRAINTS.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetInfoResponse {
    #[prost(string, tag = "1")]
    pub node_id: String,
    #[prost(int64, tag = "2")]
    pub max_volumes_per_node: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetCapabilitiesRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetCapabilitiesResponse {
    #[prost(message, repeated, tag = "1")]
    pub capabilities: Vec<NodeServiceCapability>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeServiceCapability {
    #[prost(oneof = "NodeCapabilityType", tags = "1")]
    pub r#type: Option<NodeCapabilityType>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum NodeCapabilityType {
    #[prost(message, tag = "1")]
    Rpc(NodeCapabilityRpc),
}

/// `NodeServiceCapability.RPC`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeCapabilityRpc {
    #[prost(enumeration = "NodeRpcType", tag = "1")]
    pub r#type: i32,
}

/// `NodeServiceCapability.RPC.Type` (the alpha VOLUME_CONDITION, 4, is left out).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum NodeRpcType {
    Unknown = 0,
    StageUnstageVolume = 1,
    GetVolumeStats = 2,
    ExpandVolume = 3,
    SingleNodeMultiWriter = 5,
    VolumeMountGroup = 6,
}

/// `NodePublishVolumeRequest`, without `publish_context` (2: this controller has no
/// PUBLISH_UNPUBLISH_VOLUME), `staging_target_path` (3: no STAGE_UNSTAGE_VOLUME),
/// `secrets` (7) and `volume_context` (8: the volume's directory follows from its id).
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodePublishVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(string, tag = "4")]
    pub target_path: String,
    #[prost(message, optional, tag = "5")]
    pub volume_capability: Option<VolumeCapability>,
    #[prost(bool, tag = "6")]
    pub readonly: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodePublishVolumeResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnpublishVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(string, tag = "2")]
    pub target_path: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnpublishVolumeResponse {}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    /// Bytes written by hand from the proto's field numbers: a wrong tag in a derive
    /// would change them.
    #[test]
    fn tags_are_the_specs() {
        let s = Snapshot {
            size_bytes: 1,
            snapshot_id: "s".into(),
            source_volume_id: "v".into(),
            creation_time: Some(Timestamp {
                seconds: 2,
                nanos: 3,
            }),
            ready_to_use: true,
            group_snapshot_id: String::new(),
        };
        // 1:varint 1 | 2:"s" | 3:"v" | 4:{1:2, 2:3} | 5:true
        let want = [
            0x08, 1, 0x12, 1, b's', 0x1a, 1, b'v', 0x22, 4, 0x08, 2, 0x10, 3, 0x28, 1,
        ];
        assert_eq!(s.encode_to_vec(), want);

        // CreateVolumeRequest: 1:"n" | 6:{1:{1:"x"}} | 5 (secrets) is skipped on decode.
        let wire = [
            0x0a, 1, b'n', 0x2a, 5, 0x0a, 1, b'k', 0x12, 0, 0x32, 5, 0x0a, 3, 0x0a, 1, b'x',
        ];
        let r = CreateVolumeRequest::decode(&wire[..]).unwrap();
        assert_eq!(r.name, "n");
        assert_eq!(
            r.volume_content_source.and_then(|s| s.r#type),
            Some(ContentSource::Snapshot(SnapshotSource {
                snapshot_id: "x".into()
            }))
        );

        let cap = ControllerServiceCapability {
            r#type: Some(ControllerCapabilityType::Rpc(ControllerCapabilityRpc {
                r#type: ControllerRpcType::ListSnapshots as i32,
            })),
        };
        assert_eq!(cap.encode_to_vec(), [0x0a, 2, 0x08, 6]);

        // NodePublishVolumeRequest: 1:"v" | 4:"/t" | 5:{2:{3:"g"}, 3:{1:7}} | 6:true, with
        // 7 (secrets) skipped on decode.
        let wire = [
            0x0a, 1, b'v', 0x22, 2, b'/', b't', 0x2a, 9, 0x12, 3, 0x1a, 1, b'g', 0x1a, 2, 0x08, 7,
            0x30, 1, 0x3a, 5, 0x0a, 1, b'k', 0x12, 0,
        ];
        let r = NodePublishVolumeRequest::decode(&wire[..]).unwrap();
        assert_eq!((r.volume_id.as_str(), r.target_path.as_str()), ("v", "/t"));
        assert!(r.readonly);
        let c = r.volume_capability.unwrap();
        assert_eq!(
            c.access_mode.map(|m| m.mode),
            Some(AccessModeKind::SingleNodeMultiWriter as i32)
        );
        assert_eq!(
            c.access_type,
            Some(AccessType::Mount(MountVolume {
                volume_mount_group: "g".into(),
                ..Default::default()
            }))
        );

        let info = NodeGetInfoResponse {
            node_id: "n".into(),
            max_volumes_per_node: 0,
        };
        assert_eq!(info.encode_to_vec(), [0x0a, 1, b'n']);
        let node_cap = NodeServiceCapability {
            r#type: Some(NodeCapabilityType::Rpc(NodeCapabilityRpc {
                r#type: NodeRpcType::SingleNodeMultiWriter as i32,
            })),
        };
        assert_eq!(node_cap.encode_to_vec(), [0x0a, 2, 0x08, 5]);
        let confirmed = ValidateVolumeCapabilitiesResponse {
            confirmed: Some(ValidateVolumeCapabilitiesConfirmed {
                volume_capabilities: vec![VolumeCapability::default()],
                ..Default::default()
            }),
            message: String::new(),
        };
        // 1:{2:{}}
        assert_eq!(confirmed.encode_to_vec(), [0x0a, 2, 0x12, 0]);
    }
}
