//! The names vtsnap writes into objects (lease annotations, snapshot labels) and reads back:
//! each spelled out here, so that a change of the derived names fails a test instead of
//! leaving objects an older or newer version cannot read.

use vtsnap_core::fence::NodeState;
use vtsnap_core::mysql_version::Flavor;
use vtsnap_core::snapshot::Phase;
use vtsnap_core::vtctld::TabletType;

#[test]
fn node_states_keep_their_lease_annotation_names() {
    let all = [
        (NodeState::Probed, "probed"),
        (NodeState::Stopped, "stopped"),
        (NodeState::Held, "held"),
        (NodeState::Fsfrozen, "fsfrozen"),
        (NodeState::Released, "released"),
        (NodeState::Refused, "refused"),
        (NodeState::Failed, "failed"),
    ];
    for (state, name) in all {
        assert_eq!(state.as_str(), name);
        assert_eq!(NodeState::parse(name), Some(state));
    }
    assert_eq!(NodeState::parse("Held"), None, "names are case-sensitive");
    assert_eq!(NodeState::parse(""), None);
}

#[test]
fn phases_and_flavors_keep_their_label_names() {
    for (p, name) in [
        (Phase::Cut, "cut"),
        (Phase::Ready, "ready"),
        (Phase::Failed, "failed"),
    ] {
        assert_eq!(p.as_str(), name);
        assert_eq!(Phase::parse(name), Some(p));
    }
    assert_eq!(Phase::parse("READY"), None);
    for (f, name) in [(Flavor::Mysql, "mysql"), (Flavor::Mariadb, "mariadb")] {
        assert_eq!(f.as_str(), name);
        assert_eq!(Flavor::parse(name), Some(f));
    }
    assert_eq!(Flavor::parse("MariaDB"), None);
}

#[test]
fn tablet_types_read_in_either_case_and_print_lowercase() {
    assert_eq!(TabletType::Rdonly.name(), "rdonly");
    assert_eq!(TabletType::Drained.name(), "drained");
    assert_eq!(TabletType::parse("RDONLY"), Some(TabletType::Rdonly));
    assert_eq!(TabletType::parse("replica"), Some(TabletType::Replica));
    assert_eq!(TabletType::parse("Primary"), Some(TabletType::Primary));
    assert_eq!(TabletType::parse("master"), None);
}
