//! A server's flavor and `major.minor` from its version string (`FullStatus.version`,
//! `SELECT VERSION()`): `8.0.36`, `8.4.3-commercial`, `10.11.18-MariaDB-deb12`. A data
//! directory is restored only into a server of the same flavor and `major.minor`: InnoDB
//! and the data dictionary change between minor series, and a downgrade is not supported.

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    Mysql,
    Mariadb,
}

impl Flavor {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mysql => "mysql",
            Self::Mariadb => "mariadb",
        }
    }

    /// `mysql` or `mariadb` (the snapshot's `vtsnap.io/mysql-flavor`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "mysql" => Some(Self::Mysql),
            "mariadb" => Some(Self::Mariadb),
            _ => None,
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
        let flavor = if version.to_ascii_lowercase().contains("mariadb") {
            Flavor::Mariadb
        } else {
            Flavor::Mysql
        };
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
}
