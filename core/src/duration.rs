//! Durations written the way Kubernetes and Go write them: `90s`, `10m`, `1h30m`, `48h`,
//! `500ms`, plus `d` for days. Serialized back in the same form.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    pub const fn secs(s: u64) -> Self {
        Self(Duration::from_secs(s))
    }

    pub const fn get(self) -> Duration {
        self.0
    }
}

impl FromStr for GoDuration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?} is not a duration like 90s, 10m, 1h30m or 2d");
        let s = s.trim();
        if s.is_empty() {
            return Err(bad());
        }
        if s == "0" {
            return Ok(Self(Duration::ZERO));
        }
        let mut total = 0f64;
        let mut rest = s;
        while !rest.is_empty() {
            let num_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(bad)?;
            if num_len == 0 {
                return Err(bad());
            }
            let n: f64 = rest[..num_len].parse().map_err(|_| bad())?;
            rest = &rest[num_len..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let secs = match &rest[..unit_len] {
                "ns" => 1e-9,
                "us" | "µs" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                "d" => 86400.0,
                _ => return Err(bad()),
            };
            rest = &rest[unit_len..];
            total += n * secs;
        }
        if !total.is_finite() || total > 1e12 {
            return Err(bad());
        }
        Ok(Self(Duration::from_secs_f64(total)))
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.is_zero() {
            return write!(f, "0s");
        }
        if d.subsec_nanos() != 0 {
            return write!(f, "{}ms", d.as_millis());
        }
        let mut s = d.as_secs();
        let h = s / 3600;
        s %= 3600;
        let m = s / 60;
        s %= 60;
        let mut out = String::new();
        if h > 0 {
            out.push_str(&format!("{h}h"));
        }
        if m > 0 {
            out.push_str(&format!("{m}m"));
        }
        if s > 0 {
            out.push_str(&format!("{s}s"));
        }
        f.write_str(&out)
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_style_durations() {
        for (s, secs) in [
            ("90s", 90.0),
            ("10m", 600.0),
            ("1h30m", 5400.0),
            ("48h", 172_800.0),
            ("2d", 172_800.0),
            ("500ms", 0.5),
            ("0", 0.0),
        ] {
            assert_eq!(
                s.parse::<GoDuration>().unwrap().0.as_secs_f64(),
                secs,
                "{s}"
            );
        }
        for s in ["", "10", "h", "10x", "1h-5m", "abc"] {
            assert!(s.parse::<GoDuration>().is_err(), "{s}");
        }
    }

    #[test]
    fn renders_back() {
        assert_eq!(GoDuration::secs(5400).to_string(), "1h30m");
        assert_eq!(GoDuration::secs(172_800).to_string(), "48h");
        assert_eq!("500ms".parse::<GoDuration>().unwrap().to_string(), "500ms");
    }
}
