//! A server's flavor and `major.minor` from its version string (`FullStatus.version`,
//! `SELECT VERSION()`): `8.0.36`, `8.4.3-commercial`, `10.11.18-MariaDB-deb12`. A data
//! directory is restored only into a server of the same flavor and `major.minor`: InnoDB
//! and the data dictionary change between minor series, and a downgrade is not supported.

use std::fmt;

use serde::Serialize;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Flavor {
    Mysql,
    Mariadb,
}

impl Flavor {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// `mysql` or `mariadb` (the snapshot's `vtsnap.io/mysql-flavor`).
    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    /// The flavor of a server whose version string is `version`: MariaDB says so in it.
    pub fn of_version(version: &str) -> Self {
        if version.to_ascii_lowercase().contains("mariadb") {
            Self::Mariadb
        } else {
            Self::Mysql
        }
    }
}

/// Flavor and release series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Series {
    pub flavor: Flavor,
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for Series {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}.{}", self.flavor.as_str(), self.major, self.minor)
    }
}

impl Series {
    /// Reads a version string; MariaDB says so in it. `None` when it does not start with
    /// `<major>.<minor>`.
    pub fn parse(version: &str) -> Option<Self> {
        let flavor = Flavor::of_version(version);
        let mut parts = version.split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?.parse().ok()?;
        let minor_text = version.split('.').nth(1)?;
        let minor_digits: String = minor_text
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let minor = minor_digits.parse().ok()?;
        Some(Self {
            flavor,
            major,
            minor,
        })
    }
}

/// Why a recorded flavor and version (a snapshot's annotations) give no series. The
/// recorded texts are shown quoted and escaped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordedError {
    #[error("flavor {0} is not mysql or mariadb")]
    UnknownFlavor(String),
    #[error("version {0} does not read as <major>.<minor>")]
    Unparsable(String),
    #[error("flavor {flavor} with version {version}, which is not a {flavor} version")]
    Mismatch {
        flavor: &'static str,
        version: String,
    },
}

impl Series {
    /// The series a recorded flavor and version name together.
    pub fn recorded(flavor: &str, version: &str) -> Result<Self, RecordedError> {
        let shown = |s: &str| crate::k8s_names::untrusted(s).to_string();
        let f = Flavor::parse(flavor).ok_or_else(|| RecordedError::UnknownFlavor(shown(flavor)))?;
        let series =
            Self::parse(version).ok_or_else(|| RecordedError::Unparsable(shown(version)))?;
        if series.flavor != f {
            return Err(RecordedError::Mismatch {
                flavor: f.as_str(),
                version: shown(version),
            });
        }
        Ok(series)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(flavor: Flavor, major: u32, minor: u32) -> Option<Series> {
        Some(Series {
            flavor,
            major,
            minor,
        })
    }

    #[test]
    fn versions_read_as_flavor_and_series() {
        use Flavor::*;
        assert_eq!(Series::parse("8.0.36"), s(Mysql, 8, 0));
        assert_eq!(Series::parse("8.4.3-commercial"), s(Mysql, 8, 4));
        assert_eq!(Series::parse("8.0.36-28"), s(Mysql, 8, 0));
        assert_eq!(Series::parse("10.11.18-MariaDB"), s(Mariadb, 10, 11));
        assert_eq!(
            Series::parse("10.11.18-MariaDB-deb12-log"),
            s(Mariadb, 10, 11)
        );
        assert_eq!(Series::parse("11.4.2-mariadb"), s(Mariadb, 11, 4));
        for bad in ["", "8", "v8.0.36", "8.x", "MariaDB", ".0.36"] {
            assert_eq!(Series::parse(bad), None, "{bad:?}");
        }
        assert_eq!(s(Mysql, 8, 0).unwrap().to_string(), "mysql 8.0");
        assert_eq!(Flavor::parse("mariadb"), Some(Mariadb));
        assert_eq!(Flavor::parse("MySQL"), None);
    }

    #[test]
    fn a_recorded_flavor_and_version_say_what_is_wrong_with_them() {
        assert_eq!(
            Series::recorded("mariadb", "10.11.18-MariaDB"),
            Ok(s(Flavor::Mariadb, 10, 11).unwrap())
        );
        assert_eq!(
            Series::recorded("mysql", "8.0.36"),
            Ok(s(Flavor::Mysql, 8, 0).unwrap())
        );
        let e = |f: &str, v: &str| Series::recorded(f, v).unwrap_err().to_string();
        assert_eq!(
            e("percona", "8.0.36"),
            "flavor \"percona\" is not mysql or mariadb"
        );
        assert_eq!(
            e("mysql", "eight"),
            "version \"eight\" does not read as <major>.<minor>"
        );
        assert_eq!(
            e("mariadb", "8.0.36"),
            "flavor mariadb with version \"8.0.36\", which is not a mariadb version"
        );
        assert_eq!(
            e("mysql", "10.11.18-MariaDB"),
            "flavor mysql with version \"10.11.18-MariaDB\", which is not a mysql version"
        );
        assert_eq!(
            e("mysql", "x\u{1b}[2J"),
            "version \"x\\u{1b}[2J\" does not read as <major>.<minor>"
        );
    }
}
