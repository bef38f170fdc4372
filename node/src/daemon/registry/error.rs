//! What can go wrong with the registry.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("hold registry {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("hold registry {path} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The entry on disk for this lease cannot be read; it is never overwritten.
    #[error("hold registry {path}: the entry for {lease} is unreadable ({reason}); left as it is")]
    Unreadable {
        path: PathBuf,
        lease: String,
        reason: String,
    },
    /// The whole file could not be read; it was moved aside and a new one begun.
    #[error(
        "hold registry {path} is corrupt ({source}): moved to {moved_to}; {salvaged} complete entries kept, any after the damage lost"
    )]
    SetAside {
        path: PathBuf,
        moved_to: PathBuf,
        salvaged: usize,
        #[source]
        source: serde_json::Error,
    },
}

impl RegistryError {
    /// The lease whose entry this is about, if it is about one.
    pub fn lease(&self) -> Option<&str> {
        match self {
            Self::Unreadable { lease, .. } => Some(lease),
            Self::Io { .. } | Self::Json { .. } | Self::SetAside { .. } => None,
        }
    }
}
