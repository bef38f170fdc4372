//! Which window record the archive step writes, and on which snapshot (docs/pitr.md §3):
//! the shard's recoverable spans as the archive stands, on its newest base (by cut, then
//! name), bound to that snapshot's UID and cut. Pure.

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::pitr::chain::{Base, window};
use vtsnap_core::pitr::manifest::Increment;
use vtsnap_core::pitr::record::WindowRecord;
use vtsnap_core::snapshot::DrillOf;

/// Why no record is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoRecord {
    #[error("the shard has no snapshot the archive can start from")]
    NoBase,
    #[error("snapshot {snapshot} has no UID or no cut to bind the window record to")]
    Unbound { snapshot: String },
}

/// The record for `bases` and the archive's `increments`, read at `now`, and the name of
/// the snapshot it goes on; `bind` gives a snapshot's UID and cut by name.
pub fn window_record(
    bases: &[Base],
    increments: &[Increment],
    bind: impl Fn(&str) -> Option<DrillOf>,
    now: Timestamp,
) -> Result<(String, WindowRecord), NoRecord> {
    let newest = bases
        .iter()
        .max_by(|a, b| a.cut.cmp(&b.cut).then_with(|| a.name.cmp(&b.name)))
        .ok_or(NoRecord::NoBase)?;
    let of = bind(&newest.name).ok_or_else(|| NoRecord::Unbound {
        snapshot: newest.name.clone(),
    })?;
    let spans = window(bases, increments);
    Ok((newest.name.clone(), WindowRecord::new(&spans, now, &of)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use vtsnap_core::coverage::{Exactness, GtidSet, Text};
    use vtsnap_core::naming::TabletAlias;
    use vtsnap_core::pitr::chain::Span;
    use vtsnap_core::pitr::manifest::Compression;
    use vtsnap_core::snapshot::GtidFlavor;

    use super::*;

    const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn set(n: u64) -> GtidSet {
        GtidSet::parse(GtidFlavor::Mysql56, &format!("{U}:1-{n}"), Text::Server).unwrap()
    }

    fn base(name: &str, n: u64, cut: &str) -> Base {
        Base {
            name: name.into(),
            gtid: set(n),
            exactness: Exactness::Exact,
            cut: t(cut),
        }
    }

    fn increment(from: u64, to: u64, last: &str) -> Increment {
        Increment {
            name: format!("inc-{to}"),
            tablet: TabletAlias::new("zone1", 103),
            from: set(from),
            to: set(to),
            purged: GtidSet::empty(GtidFlavor::Mysql56),
            first_commit: t(last),
            last_commit: t(last),
            started: t(last),
            compression: Compression::Gzip,
            files: Vec::new(),
        }
    }

    fn bind(name: &str) -> Option<DrillOf> {
        (name != "unbound").then(|| DrillOf {
            uid: format!("uid-{name}"),
            cut: t("2026-12-07T06:00:00Z"),
        })
    }

    #[test]
    fn the_record_goes_on_the_newest_base_and_holds_the_window() {
        let bases = [
            base("old", 100, "2026-12-06T00:00:00Z"),
            base("new", 200, "2026-12-07T06:00:00Z"),
            base("also-new", 200, "2026-12-07T06:00:00Z"),
        ];
        let archive = [
            increment(100, 150, "2026-12-06T03:00:00Z"),
            increment(200, 260, "2026-12-07T14:00:00Z"),
        ];
        let now = t("2026-12-07T14:05:00Z");
        let (on, r) = window_record(&bases, &archive, bind, now).unwrap();
        assert_eq!(on, "new", "the newest cut, then the greatest name");
        assert_eq!(r.snapshot_uid, "uid-new");
        assert_eq!(r.checked, now);
        assert_eq!(
            r.spans,
            [
                Span {
                    from: t("2026-12-06T00:00:00Z"),
                    to: t("2026-12-06T03:00:00Z")
                },
                Span {
                    from: t("2026-12-07T06:00:00Z"),
                    to: t("2026-12-07T14:00:00Z")
                }
            ]
        );
    }

    #[test]
    fn no_base_or_an_unbound_one_writes_nothing() {
        let now = t("2026-12-07T14:05:00Z");
        assert_eq!(window_record(&[], &[], bind, now), Err(NoRecord::NoBase));
        let bases = [
            base("old", 100, "2026-12-06T00:00:00Z"),
            base("unbound", 200, "2026-12-07T06:00:00Z"),
        ];
        assert_eq!(
            window_record(&bases, &[], bind, now),
            Err(NoRecord::Unbound {
                snapshot: "unbound".into()
            })
        );
    }
}
