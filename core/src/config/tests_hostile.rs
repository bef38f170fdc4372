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

#[test]
fn a_stagger_longer_than_the_schedules_interval_is_refused_where_set() {
    // Round three: two shards both got `22 1,7,13,19 * * *`.
    assert_eq!(
        errors(&format!(
            "{BASE}  snapshot: {{schedule: \"0 */6 * * *\", stagger: 24h}}\n"
        )),
        [
            "clusters[0].snapshot.stagger: stagger 24h is longer than the schedule's shortest interval 6h (\"0 */6 * * *\"): shards whose offsets differ by the interval would run at the same minutes; use a stagger of at most 6h"
        ]
    );
    // The default schedule counts too; so does the drill block's.
    let e = errors(&format!(
        "{BASE}  keyspaces:\n    commerce:\n      snapshot: {{stagger: 7h}}\n      drill: {{schedule: \"0 */12 * * *\", stagger: 13h}}\n"
    ));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e[0].starts_with("clusters[0].keyspaces.commerce.snapshot.stagger: stagger 7h is longer than the schedule's shortest interval 6h"),
        "{e:?}"
    );
    assert!(
        e[1].starts_with("clusters[0].keyspaces.commerce.drill.stagger: stagger 13h is longer than the schedule's shortest interval 12h"),
        "{e:?}"
    );
    // Up to the interval is fine.
    assert_eq!(
        errors(&format!(
            "{BASE}  snapshot: {{schedule: \"0 */6 * * *\", stagger: 6h}}\n"
        )),
        Vec::<String>::new()
    );
}

#[test]
fn a_schedule_that_never_fires_is_refused_where_set() {
    let e = errors(&format!(
        "{BASE}  snapshot: {{schedule: \"0 0 30 2 *\"}}\n  keyspaces:\n    commerce:\n      drill: {{schedule: \"0 0 31 4 *\"}}\n"
    ));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e[0].starts_with("clusters[0].snapshot.schedule: \"0 0 30 2 *\" never fires: "),
        "{e:?}"
    );
    assert!(
        e[1].starts_with(
            "clusters[0].keyspaces.commerce.drill.schedule: \"0 0 31 4 *\" never fires: "
        ),
        "{e:?}"
    );
    // A leap day, or the weekday alternative, fires.
    assert_eq!(
        errors(&format!(
            "{BASE}  snapshot: {{schedule: \"0 0 29 2 *\", stagger: 0s}}\n  drill: {{schedule: \"0 0 30 2 1\", stagger: 0s}}\n"
        )),
        Vec::<String>::new()
    );
}

#[test]
fn require_drill_with_drills_off_is_refused_where_the_combination_is_made() {
    let e = errors(&format!(
        "{BASE}  restore: {{requireDrill: true}}\n  drill: {{enabled: false}}\n"
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with(
            "clusters[0].restore.requireDrill: true, but drill.enabled resolves to false here"
        ),
        "{e:?}"
    );
    // Drills off for one shard under a cluster that requires them: named at the shard.
    let e = errors(&format!(
        "{BASE}  restore: {{requireDrill: true}}\n  keyspaces:\n    commerce:\n      shards:\n        \"-80\": {{drill: {{enabled: false}}}}\n"
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("clusters[0].keyspaces.commerce.shards.-80.drill.enabled: false, under an inherited restore.requireDrill: true"),
        "{e:?}"
    );
    // Both off, or drills on: fine.
    for ok in [
        "  restore: {requireDrill: false}\n  drill: {enabled: false}\n",
        "  restore: {requireDrill: true}\n  drill: {enabled: true}\n",
        "  drill: {enabled: false}\n  keyspaces:\n    c:\n      restore: {requireDrill: true}\n      drill: {enabled: true}\n",
    ] {
        assert_eq!(errors(&format!("{BASE}{ok}")), Vec::<String>::new(), "{ok}");
    }
}

#[test]
fn a_key_written_twice_in_any_mapping_is_refused_by_path() {
    // Round three: the second `commerce` silently replaced the first (and its requireDrill).
    let e = errors(&format!(
        "{BASE}  keyspaces:\n    commerce: {{restore: {{requireDrill: true}}}}\n    commerce: {{restore: {{enabled: true}}}}\n"
    ));
    assert_eq!(
        e,
        [
            "clusters[0].keyspaces.commerce: key \"commerce\" is written twice in one mapping: YAML would keep only the last, so write it once"
        ]
    );
    for (text, at) in [
        (
            "  keyspaces:\n    c:\n      shards:\n        \"-80\": {}\n        -80: {}\n",
            "clusters[0].keyspaces.c.shards.-80",
        ),
        (
            "  snapshot: {labels: {tier: a, tier: b}}\n",
            "clusters[0].snapshot.labels.tier",
        ),
        (
            "  snapshot: {annotations: {\"16\": a, 16: b}}\n",
            "clusters[0].snapshot.annotations.16",
        ),
        (
            "  vtbackup: {dataVolumeClaimTemplate: {resources: {requests: {storage: 1Gi, storage: 2Gi}}}}\n",
            "clusters[0].vtbackup.dataVolumeClaimTemplate.resources.requests.storage",
        ),
        ("  vtctld: auto\n  vtctld: a:1\n", "clusters[0].vtctld"),
    ] {
        let e = errors(&format!("{BASE}{text}"));
        assert!(
            e.first().is_some_and(
                |l| l.starts_with(&format!("{at}: key ")) && l.contains("written twice")
            ),
            "{text}: {e:?}"
        );
    }
    // Reported beside the file's other errors.
    let e = errors(&format!(
        "{BASE}  snapshot: {{mode: lukewarm}}\n  keyspaces: {{a: {{}}, a: {{}}}}\n"
    ));
    assert!(e[0].starts_with("clusters[0].keyspaces.a: key"), "{e:?}");
    assert!(
        e.iter().any(|l| l.starts_with("clusters[0].snapshot.mode")),
        "{e:?}"
    );
}

/// `n` keyspaces whose restore pools all alias one list of `len` pools.
fn aliased_pools(n: usize, len: usize) -> String {
    let mut text = format!(
        "{BASE}  keyspaces:\n    k0: {{restore: {{pools: &l [{}]}}}}\n",
        vec!["replica"; len].join(",")
    );
    for i in 1..n {
        text.push_str(&format!("    k{i}: {{restore: {{pools: *l}}}}\n"));
    }
    text
}

#[test]
fn aliases_that_expand_past_the_bound_are_refused() {
    // Round three: 2,000 keyspaces aliasing a 20,000-element list read as 40 million
    // values (12 s, 2.2 GB).
    let text = aliased_pools(2_000, 20_000);
    assert!(text.len() < 256 << 10);
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("the file's aliases (*name) expand it to more than 2097152 values"),
        "{e:?}"
    );
    // Billion laughs stays refused.
    let mut laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n".to_owned();
    for i in 1..10 {
        let p = i - 1;
        laughs.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    assert!(Config::from_yaml(&format!("{laughs}{BASE}")).is_err());
    // Aliases within the bound read as written out.
    let c = Config::from_yaml(&aliased_pools(3, 2)).unwrap();
    assert_eq!(
        c.clusters[0].keyspaces["k2"]
            .restore
            .as_ref()
            .unwrap()
            .pools,
        Some(vec!["replica".to_owned(); 2])
    );
}

#[test]
fn what_a_message_echoes_of_the_file_is_cut_and_escaped() {
    // Round three: an invalid config from a ConfigMap was echoed whole (a 20 MB line).
    // YAML's own escapes: the value holds ESC and BEL.
    let long = format!("\\e]0;owned\\a{}", "x".repeat(300_000));
    let e = Config::from_yaml(&format!("clusters: \"{long}\"\n")).unwrap_err();
    let shown = e.to_string();
    assert!(shown.len() < 1024, "{} bytes", shown.len());
    assert!(
        !shown.contains('\u{1b}') && shown.contains("\\u{1b}"),
        "{shown}"
    );
    assert!(shown.contains("bytes in all)"), "{shown}");
    let e = Config::from_yaml(&format!(
        "{BASE}  snapshot: {{schedule: \"{}\"}}\n",
        "1".repeat(300_000)
    ))
    .unwrap_err();
    assert!(e.to_string().len() < 1024, "{} bytes", e.to_string().len());
    // Larger than a config may be, from wherever it came.
    let e = Config::from_yaml(&"#".repeat(20 << 20)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the config is 20971520 bytes, more than 1048576, the most a config may have"
    );
    // Many errors: the first hundred, then a count.
    let mut text = format!("{BASE}  snapshot:\n    labels:\n");
    for i in 0..150 {
        text.push_str(&format!("      \"k{i}\": \"-\"\n"));
    }
    let shown = Config::from_yaml(&text).unwrap_err().to_string();
    assert_eq!(shown.lines().count(), 101, "{shown}");
    assert!(shown.ends_with("… and 50 more errors"), "{shown}");
}
