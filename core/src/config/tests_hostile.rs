//! Configs an attacker (or a typo) would write: each must be refused by what is wrong, or
//! read as meant.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const BASE: &str = "clusters:\n- name: example\n  namespace: vitess\n";

fn errors(text: &str) -> Vec<String> {
    match Config::from_yaml(text) {
        Ok(_) => Vec::new(),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

fn template(t: &str) -> String {
    format!(
        "{BASE}  keyspaces:\n    commerce:\n      vtbackup:\n        dataVolumeClaimTemplate: {t}\n"
    )
}

const AT: &str = "clusters[0].keyspaces.commerce.vtbackup.dataVolumeClaimTemplate";

#[test]
fn a_vtbackup_template_that_is_no_pvc_spec_is_refused_by_path() {
    assert_eq!(
        errors(&template("{}")),
        [format!(
            "{AT}.resources.requests.storage: is required: the size of the volume (e.g. 10Gi)"
        )]
    );
    assert_eq!(
        errors(&template("{resources: {requests: {storage: abc}}}")),
        [format!(
            "{AT}.resources.requests.storage: \"abc\" is not a quantity (digits, then a suffix such as Gi or G)"
        )]
    );
    assert_eq!(
        errors(&template("{storage: abc}")),
        [format!(
            "{AT}.storage: unknown field, did you mean resources.requests.storage?"
        )]
    );
    assert_eq!(
        errors(&template(
            "{storageClass: fast, resources: {requests: {storage: 10Gi}}}"
        )),
        [format!(
            "{AT}.storageClass: unknown field, did you mean storageClassName?"
        )]
    );
    let bogus = errors(&template(
        "{accessModes: [ReadWriteAlways], resources: {requests: {storage: 10Gi}}}",
    ));
    assert_eq!(bogus.len(), 1, "{bogus:?}");
    assert!(
        bogus[0].starts_with(&format!(
            "{AT}.accessModes[0]: unknown variant `ReadWriteAlways`"
        )),
        "{bogus:?}"
    );
    assert_eq!(
        errors(&template(
            "{resources: {requests: {storage: 10Gi}}, dataSource: {kind: VolumeSnapshot, name: s}}"
        )),
        [format!(
            "{AT}.dataSource: is refused: vtbackup's scratch volume must start empty, not filled from another volume"
        )]
    );
    assert_eq!(
        errors(&format!(
            "{BASE}  vtbackup: {{dataVolumeClaimTemplate: 5}}\n"
        )),
        [
            "clusters[0].vtbackup.dataVolumeClaimTemplate: is a number, not a PersistentVolumeClaim spec (a mapping)"
        ]
    );
    // A whole spec passes.
    assert_eq!(
        errors(&template(
            "{accessModes: [ReadWriteOnce], storageClassName: fast, volumeMode: Filesystem, resources: {requests: {storage: 10Gi}}}"
        )),
        Vec::<String>::new()
    );
}

#[test]
fn a_bad_template_is_reported_beside_the_files_other_errors() {
    // A file that does not parse whole is read piece by piece: the template is still judged.
    let text = format!(
        "{BASE}  snapshot: {{mode: lukewarm}}\n  vtbackup:\n    dataVolumeClaimTemplate: {{storageClass: x}}\n"
    );
    let e = errors(&text);
    assert!(
        e.iter().any(|l| l.starts_with("clusters[0].snapshot.mode")),
        "{e:?}"
    );
    assert!(
        e.contains(&"clusters[0].vtbackup.dataVolumeClaimTemplate.storageClass: unknown field, did you mean storageClassName?".to_owned()),
        "{e:?}"
    );
}

#[test]
fn a_leading_byte_order_mark_is_allowed() {
    let text = format!("\u{feff}{BASE}");
    let c = Config::from_yaml(&text).unwrap();
    assert_eq!(c.clusters[0].name, "example");
    // Only one, and only at the start.
    let e = errors(&format!("{BASE}  vtctld: \"\u{feff}auto\"\n"));
    assert_eq!(e, ["clusters[0].vtctld: must be `auto` or host:port"]);
}
