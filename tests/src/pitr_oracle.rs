//! The lab's own check of a replay, beside the one the replay script runs on the server
//! (`vtsnap_pitr::decide::replay::guard`): what the recovered server holds, read by the
//! test and judged here, so a wrong script cannot pass by checking itself.

use vtsnap_core::coverage::GtidSet;
use vtsnap_core::pitr::chain::Target;

/// What a replay did, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The GTIDs the replay added to the base.
    pub gtids: String,
}

/// What the server holds that it must not, or lacks that it must (the GTIDs named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// The restored base holds transactions past the target.
    BaseBeyondTarget(String),
    /// The replay stopped short of the target: the server lacks these.
    Short(String),
    /// The replay went past the target: the server holds these.
    Past(String),
    /// The server lost these transactions of its base.
    LostBase(String),
    /// The replay applied these, which the archive's increments do not hold.
    NotFromArchive(String),
}

fn nonempty(m: Option<String>) -> Option<String> {
    m.filter(|m| !m.is_empty())
}

/// Before a replay: a base restored from an online snapshot may hold more than its
/// recorded lower bound; for a GTID target it must still be within the target.
pub fn check_base(base: &GtidSet, target: &Target) -> Result<(), VerifyError> {
    match target {
        Target::Through(g) => match nonempty(base.missing_from(g)) {
            Some(beyond) => Err(VerifyError::BaseBeyondTarget(beyond)),
            None => Ok(()),
        },
        Target::Before(_) => Ok(()),
    }
}

/// After a replay: the server holds its base and no more than the archive's increments
/// (`reached`, what the last one replayed holds); for a GTID target, exactly it.
pub fn verify(
    base: &GtidSet,
    after: &GtidSet,
    reached: &GtidSet,
    target: &Target,
) -> Result<Applied, VerifyError> {
    if let Some(lost) = nonempty(base.missing_from(after)) {
        return Err(VerifyError::LostBase(lost));
    }
    let known = reached.union(base).unwrap_or_else(|| reached.clone());
    if let Some(extra) = nonempty(after.missing_from(&known)) {
        return Err(VerifyError::NotFromArchive(extra));
    }
    if let Target::Through(g) = target {
        if let Some(short) = nonempty(g.missing_from(after)) {
            return Err(VerifyError::Short(short));
        }
        let allowed = g.union(base).unwrap_or_else(|| g.clone());
        if let Some(past) = nonempty(after.missing_from(&allowed)) {
            return Err(VerifyError::Past(past));
        }
    }
    Ok(Applied {
        gtids: after.missing_from(base).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use vtsnap_core::coverage::Text;
    use vtsnap_core::snapshot::GtidFlavor;

    use super::*;

    const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn u(range: &str) -> GtidSet {
        GtidSet::parse(GtidFlavor::Mysql56, &format!("{U}:{range}"), Text::Server).unwrap()
    }

    #[test]
    fn a_replay_is_checked_against_its_base_the_archive_and_the_target() {
        let base = u("1-100");
        let reached = u("1-200");
        // A time target: anything between the base and what the archive held.
        let ok = verify(
            &base,
            &u("1-150"),
            &reached,
            &Target::Before(Timestamp::UNIX_EPOCH),
        )
        .unwrap();
        assert_eq!(ok.gtids, format!("{U}:101-150"));
        // A set target: exactly it.
        let ok = verify(&base, &u("1-150"), &reached, &Target::Through(u("1-150"))).unwrap();
        assert_eq!(ok.gtids, format!("{U}:101-150"));
        for (after, target, want) in [
            (
                u("1-140"),
                Target::Through(u("1-150")),
                VerifyError::Short(format!("{U}:141-150")),
            ),
            (
                u("1-160"),
                Target::Through(u("1-150")),
                VerifyError::Past(format!("{U}:151-160")),
            ),
            (
                u("1-50:60-150"),
                Target::Through(u("1-150")),
                VerifyError::LostBase(format!("{U}:51-59")),
            ),
            (
                u("1-210"),
                Target::Before(Timestamp::UNIX_EPOCH),
                VerifyError::NotFromArchive(format!("{U}:201-210")),
            ),
        ] {
            assert_eq!(verify(&base, &after, &reached, &target).unwrap_err(), want);
        }
        // An online base that holds more than the target is refused before the replay.
        assert_eq!(
            check_base(&u("1-120"), &Target::Through(u("1-110"))).unwrap_err(),
            VerifyError::BaseBeyondTarget(format!("{U}:111-120"))
        );
        assert!(check_base(&u("1-100"), &Target::Through(u("1-110"))).is_ok());
        assert!(check_base(&u("1-120"), &Target::Before(Timestamp::UNIX_EPOCH)).is_ok());
    }
}
