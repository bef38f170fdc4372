//! Naming facts from Vitess and vitess-operator.
//!
//! Sources: vitessio/vitess `go/vt/mysqlctl/mycnf_gen.go` (tablet directory `vt_%010d`,
//! binlog base `vt-%010d-bin`, relay-log base `vt-%010d-relay-bin`), and
//! planetscale/vitess-operator `pkg/operator/vttablet/uid.go` (UIDs are uint32; older
//! operators wrote the `planetscale.com/tablet-uid` label unpadded).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A Vitess tablet UID (`topodata.TabletAlias.uid`, a uint32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TabletUid(u32);

/// Why a string is not a tablet UID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TabletUidError {
    #[error("tablet UID is empty")]
    Empty,
    #[error("tablet UID {0:?} must contain only decimal digits")]
    NotDecimal(String),
    #[error("tablet UID {0:?} does not fit in 32 bits")]
    TooLarge(String),
}

impl TabletUid {
    pub const fn new(uid: u32) -> Self {
        Self(uid)
    }

    pub const fn get(self) -> u32 {
        self.0
    }

    /// The zero-padded form Vitess uses in paths and aliases: `%010d`.
    pub fn padded(self) -> String {
        format!("{:010}", self.0)
    }

    /// The tablet directory under VTDATAROOT: `vt_<uid %010d>`.
    pub fn tablet_dir_name(self) -> String {
        format!("vt_{:010}", self.0)
    }

    /// The prefix of this tablet's binlog and relay-log file names: `vt-<uid %010d>-`.
    pub fn log_file_prefix(self) -> String {
        format!("vt-{:010}-", self.0)
    }

    /// Parses a tablet directory name `vt_<10 digits>`; anything else is `None`.
    pub fn from_tablet_dir_name(name: &str) -> Option<Self> {
        let digits = name.strip_prefix("vt_")?;
        if digits.len() != 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse::<u32>().ok().map(Self)
    }
}

impl fmt::Display for TabletUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for TabletUid {
    type Err = TabletUidError;

    /// Accepts the padded (`0000000101`) and the unpadded (`101`) form.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(TabletUidError::Empty);
        }
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(TabletUidError::NotDecimal(s.to_owned()));
        }
        let trimmed = s.trim_start_matches('0');
        if trimmed.is_empty() {
            return Ok(Self(0));
        }
        trimmed
            .parse::<u32>()
            .map(Self)
            .map_err(|_| TabletUidError::TooLarge(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_padded_and_unpadded_forms_alike() {
        assert_eq!("0000000101".parse::<TabletUid>(), Ok(TabletUid::new(101)));
        assert_eq!("101".parse::<TabletUid>(), Ok(TabletUid::new(101)));
        assert_eq!(
            "4294967295".parse::<TabletUid>(),
            Ok(TabletUid::new(u32::MAX))
        );
        assert_eq!(
            "00000000004294967295".parse::<TabletUid>(),
            Ok(TabletUid::new(u32::MAX))
        );
    }

    #[test]
    fn rejects_what_is_not_a_uid() {
        assert_eq!("".parse::<TabletUid>(), Err(TabletUidError::Empty));
        assert!(matches!(
            "-1".parse::<TabletUid>(),
            Err(TabletUidError::NotDecimal(_))
        ));
        assert!(matches!(
            "12a".parse::<TabletUid>(),
            Err(TabletUidError::NotDecimal(_))
        ));
        assert!(matches!(
            "4294967296".parse::<TabletUid>(),
            Err(TabletUidError::TooLarge(_))
        ));
    }

    #[test]
    fn renders_vitess_paths() {
        let uid = TabletUid::new(2_548_885_007);
        assert_eq!(uid.tablet_dir_name(), "vt_2548885007");
        assert_eq!(uid.log_file_prefix(), "vt-2548885007-");
        assert_eq!(TabletUid::new(7).tablet_dir_name(), "vt_0000000007");
    }

    #[test]
    fn tablet_dir_names_must_be_exactly_ten_digits() {
        assert_eq!(
            TabletUid::from_tablet_dir_name("vt_0000000101"),
            Some(TabletUid::new(101))
        );
        assert_eq!(TabletUid::from_tablet_dir_name("vt_101"), None);
        assert_eq!(TabletUid::from_tablet_dir_name("vt_00000001011"), None);
        assert_eq!(TabletUid::from_tablet_dir_name("vt_000000010x"), None);
        // 10 digits that overflow u32 are not a Vitess tablet directory either.
        assert_eq!(TabletUid::from_tablet_dir_name("vt_9999999999"), None);
    }
}
