//! The replication position a snapshot records, read strictly: Vitess's encoding
//! `<flavor>/<GTID set>` (`go/mysql/replication/replication_position.go`,
//! `EncodePosition`) as vtctld reports it and the snapshot job writes it. Only the GTID
//! flavors are vtsnap's: a restore catches up by GTID auto-positioning.
//!
//! - `MySQL56/<uuid>:<interval>[:<interval>…][,…]` (`mysql56_gtid_set.go`), an interval
//!   `N` or `N-M` with `1 ≤ N ≤ M`; MySQL 8.4 tags (`<uuid>:<tag>:<interval>…`) allowed;
//! - `MariaDB/<domain>-<server>-<sequence>[,…]` (`mariadb_gtid.go`).

use crate::coverage::{GtidSet, Text};
use crate::mysql_version::Flavor;

/// The GTID flavors of Vitess's position encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GtidFlavor {
    Mysql56,
    Mariadb,
}

impl GtidFlavor {
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Mysql56 => "MySQL56",
            Self::Mariadb => "MariaDB",
        }
    }

    /// The server flavor whose positions these are.
    pub fn server(self) -> Flavor {
        match self {
            Self::Mysql56 => Flavor::Mysql,
            Self::Mariadb => Flavor::Mariadb,
        }
    }
}

/// Why a position does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GtidError {
    #[error("has no <flavor>/ prefix")]
    NoFlavor,
    #[error("flavor {0:?} is not MySQL56 or MariaDB")]
    UnknownFlavor(String),
    #[error("element {element:?}: {why}")]
    Element { element: String, why: &'static str },
}

/// Reads a position strictly ([`Text::Strict`]) and returns its flavor.
pub fn parse_position(s: &str) -> Result<GtidFlavor, GtidError> {
    GtidSet::parse_position(s, Text::Strict).map(|set| set.flavor())
}

#[cfg(test)]
mod tests {
    use super::*;

    const U1: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const U2: &str = "0E11FA47-71CA-11E1-9E33-C80AA9429562";

    #[test]
    fn the_positions_vtctld_reports_are_read() {
        for (ok, flavor) in [
            (format!("MySQL56/{U1}:1-100"), GtidFlavor::Mysql56),
            (format!("MySQL56/{U1}:5"), GtidFlavor::Mysql56),
            (format!("MySQL56/{U1}:1-5:7-9,{U2}:1"), GtidFlavor::Mysql56),
            (format!("MySQL56/{U1}:1-5:vtsnap:1-3"), GtidFlavor::Mysql56),
            (format!("MySQL56/{U1}:_a9_b:1"), GtidFlavor::Mysql56),
            ("MySQL56/".to_owned(), GtidFlavor::Mysql56),
            ("MariaDB/0-1-100".to_owned(), GtidFlavor::Mariadb),
            (
                "MariaDB/0-1-100,1-4294967295-18446744073709551615".to_owned(),
                GtidFlavor::Mariadb,
            ),
            ("MariaDB/".to_owned(), GtidFlavor::Mariadb),
        ] {
            assert_eq!(parse_position(&ok), Ok(flavor), "{ok}");
        }
        assert_eq!(GtidFlavor::Mysql56.server(), Flavor::Mysql);
        assert_eq!(GtidFlavor::Mariadb.server(), Flavor::Mariadb);
        assert_eq!(GtidFlavor::Mariadb.prefix(), "MariaDB");
    }

    #[test]
    fn anything_else_is_refused_naming_the_element() {
        assert_eq!(parse_position("0-1-100"), Err(GtidError::NoFlavor));
        assert_eq!(
            parse_position("FilePos/binlog.000001:4"),
            Err(GtidError::UnknownFlavor("FilePos".into()))
        );
        assert_eq!(
            parse_position("mysql56/x"),
            Err(GtidError::UnknownFlavor("mysql56".into()))
        );
        let why = |s: &str| match parse_position(s) {
            Err(GtidError::Element { why, .. }) => why,
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(why("MySQL56/u:1-100"), "does not start with a server UUID");
        assert_eq!(
            why(&format!("MySQL56/{}g:1", &U1[..35])),
            "does not start with a server UUID"
        );
        assert_eq!(why(&format!("MySQL56/{U1}")), "has no interval");
        assert_eq!(why(&format!("MySQL56/{U1}:tag")), "has no interval");
        // A tag is lowercase letters, digits and `_`: anything else is read as an interval.
        assert_eq!(
            why(&format!("MySQL56/{U1}:my-tag:1")),
            "an interval is N or N-M"
        );
        assert_eq!(
            why(&format!("MySQL56/{U1}:Tag:1")),
            "an interval is N or N-M"
        );
        assert_eq!(
            why(&format!("MySQL56/{U1}:9tag:1")),
            "an interval is N or N-M"
        );
        let long = "t".repeat(33);
        assert_eq!(
            why(&format!("MySQL56/{U1}:{long}:1")),
            "an interval is N or N-M"
        );
        assert_eq!(why(&format!("MySQL56/{U1}:0-5")), "an interval starts at 1");
        assert_eq!(
            why(&format!("MySQL56/{U1}:6-5")),
            "an interval ends before it starts"
        );
        assert_eq!(why(&format!("MySQL56/{U1}:1-")), "an interval is N or N-M");
        assert_eq!(why(&format!("MySQL56/{U1}:+1")), "an interval is N or N-M");
        assert_eq!(
            why(&format!("MySQL56/{U1}:1, {U2}:1")),
            "does not start with a server UUID"
        );
        assert_eq!(
            why(&format!("MySQL56/{U1}:1,")),
            "does not start with a server UUID"
        );
        assert_eq!(
            why(&format!("MySQL56/{U1}:Tag:1")),
            "an interval is N or N-M"
        );
        assert_eq!(
            why(&format!("MySQL56/{U1}:{}:1", "t".repeat(33))),
            "an interval is N or N-M"
        );
        assert_eq!(why("MariaDB/0-1"), "is not domain-server-sequence");
        assert_eq!(why("MariaDB/0-1-2-3"), "is not domain-server-sequence");
        assert_eq!(
            why("MariaDB/4294967296-1-1"),
            "domain and server are 32-bit, sequence 64-bit decimals"
        );
        assert_eq!(
            why("MariaDB/0-4294967296-1"),
            "domain and server are 32-bit, sequence 64-bit decimals"
        );
        assert_eq!(
            why("MariaDB/0-1-18446744073709551616"),
            "domain and server are 32-bit, sequence 64-bit decimals"
        );
        assert_eq!(
            why("MariaDB/0-1-x"),
            "domain and server are 32-bit, sequence 64-bit decimals"
        );
        assert_eq!(
            why(&format!("MariaDB/{U1}:1")),
            "is not domain-server-sequence"
        );
    }
}
