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
        refused(parse_create_volume(r)).starts_with("volume_content_source.snapshot.snapshot_id ")
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
    let node: Vec<i32> = Driver::node_capabilities()
        .capabilities
        .into_iter()
        .filter_map(|c| c.r#type.map(|NodeCapabilityType::Rpc(r)| r.r#type))
        .collect();
    assert_eq!(node, [5], "SINGLE_NODE_MULTI_WRITER only");
}

#[test]
fn a_validation_confirms_what_was_asked_or_says_why_not() {
    let record = VolumeRecord {
        version: crate::meta::VERSION,
        id: ObjectId::parse("v").unwrap(),
        capacity_bytes: 0,
        source_snapshot: None,
        parameters: BTreeMap::from([("k".to_owned(), "v".to_owned())]),
    };
    let context = BTreeMap::from([(PATH_KEY.to_owned(), "/r/volumes/v".to_owned())]);
    let ask = |caps: Vec<VolumeCapability>| ValidateVolumeCapabilitiesRequest {
        volume_id: "v".into(),
        volume_capabilities: caps,
        volume_context: context.clone(),
        parameters: record.parameters.clone(),
        ..Default::default()
    };
    let answer = |r: &ValidateVolumeCapabilitiesRequest| {
        let caps = parse_capabilities(&r.volume_capabilities).unwrap();
        validation(r, &caps, &record, &context)
    };

    let r = ask(vec![mount()]);
    let ok = answer(&r);
    let confirmed = ok.confirmed.unwrap();
    assert_eq!(confirmed.volume_capabilities, r.volume_capabilities);
    assert_eq!(
        (confirmed.volume_context, confirmed.parameters),
        (context.clone(), record.parameters.clone())
    );

    let mut block = mount();
    block.access_type = Some(AccessType::Block(BlockVolume {}));
    let mut r = ask(vec![mount(), block]);
    r.volume_context
        .insert(PATH_KEY.into(), "/elsewhere".into());
    r.parameters.clear();
    r.mutable_parameters.insert("iops".into(), "1".into());
    let no = answer(&r);
    assert_eq!(no.confirmed, None);
    assert!(
        no.message.starts_with("volume_capabilities[1].block"),
        "{}",
        no.message
    );
    assert!(no.message.contains("volume_context"), "{}", no.message);
    assert!(no.message.contains("MODIFY_VOLUME"), "{}", no.message);
    assert!(
        !no.message.contains("parameters are not"),
        "empty parameters are not checked: {}",
        no.message
    );
}
