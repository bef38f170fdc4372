//! vtctld over gRPC (`vtctlservice.Vtctld`): hand-written messages and a small client.

pub mod client;
pub mod messages;

pub use client::{VtctldClient, VtctldError};
pub use messages::topodata::TabletType;

use crate::naming::TabletAlias;

impl From<&TabletAlias> for messages::topodata::TabletAlias {
    fn from(a: &TabletAlias) -> Self {
        Self {
            cell: a.cell.clone(),
            uid: a.uid.get(),
        }
    }
}

impl From<&messages::topodata::TabletAlias> for TabletAlias {
    fn from(a: &messages::topodata::TabletAlias) -> Self {
        TabletAlias::new(a.cell.clone(), a.uid)
    }
}

impl TabletType {
    /// Parses the lowercase or uppercase name (`replica`, `RDONLY`).
    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    /// Lowercase name as `vtctldclient` prints it.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// As the lowercase name (`replica`), the form leases and records store; reading accepts
/// either case and refuses anything else.
impl serde::Serialize for TabletType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for TabletType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown tablet type {s:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::TabletType;

    #[test]
    fn tablet_types_serialize_as_their_lowercase_names_and_refuse_garbage() {
        assert_eq!(
            serde_json::to_string(&TabletType::Rdonly).unwrap(),
            "\"rdonly\""
        );
        let t: TabletType = serde_json::from_str("\"replica\"").unwrap();
        assert_eq!(t, TabletType::Replica);
        assert!(serde_json::from_str::<TabletType>("\"replcia\"").is_err());
    }
}
