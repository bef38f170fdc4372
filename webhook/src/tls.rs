//! The serving certificate: read from the mounted Secret's files (`tls.crt`, `tls.key`)
//! and read again when they change, without a restart. A Secret volume is updated by
//! swapping a symlink, so the files are compared by content, not watched by inode. A pair
//! that does not load (half-written, a key that does not match) keeps the previous one in
//! service and is logged.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::ring::sign::any_supported_type;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use vtsnap_core::input::{Accept, ReadError, read_bounded};

/// The most a certificate chain or key file may hold: a chain of a few certificates is a
/// few KiB; `/dev/zero` or a runaway file is refused rather than read into memory.
pub const MAX_PEM: u64 = 1 << 20;

/// Why the certificate pair cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{path}: no PEM certificate in it")]
    NoCertificate { path: PathBuf },
    #[error("{path}: not a PEM certificate chain: {reason}")]
    BadCertificate { path: PathBuf, reason: String },
    #[error("{path}: not a PEM private key: {reason}")]
    BadKey { path: PathBuf, reason: String },
    #[error("{key} does not match the certificate in {cert}: {reason}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
}

/// The two files' contents.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pem {
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// A regular file (a Secret mount's symlink to one) of at most [`MAX_PEM`] bytes: a FIFO
/// would block the start or a reload, a device would never end.
fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    Ok(read_bounded(
        path,
        "a PEM file",
        MAX_PEM,
        Accept::RegularFile,
    )?)
}

fn load(cert_path: &Path, key_path: &Path, pem: &Pem) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem.cert)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::BadCertificate {
            path: cert_path.to_owned(),
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_path.to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&pem.key).map_err(|e| TlsError::BadKey {
        path: key_path.to_owned(),
        reason: e.to_string(),
    })?;
    let signer = any_supported_type(&key).map_err(|e| TlsError::BadKey {
        path: key_path.to_owned(),
        reason: e.to_string(),
    })?;
    let certified = CertifiedKey::new(chain, signer);
    certified.keys_match().map_err(|e| TlsError::Mismatch {
        cert: cert_path.to_owned(),
        key: key_path.to_owned(),
        reason: e.to_string(),
    })?;
    Ok(Arc::new(certified))
}

/// The certificate in service, swapped when the files change.
#[derive(Debug)]
pub struct Reloading {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: RwLock<(Pem, Arc<CertifiedKey>)>,
}

impl Reloading {
    /// Loads the pair; an error here stops the webhook from starting.
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Arc<Self>, TlsError> {
        let pem = Pem {
            cert: read(cert_path)?,
            key: read(key_path)?,
        };
        let key = load(cert_path, key_path, &pem)?;
        Ok(Arc::new(Self {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            current: RwLock::new((pem, key)),
        }))
    }

    /// Reads the files again; swaps in a changed pair that loads. `Ok(true)`: swapped.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let pem = Pem {
            cert: read(&self.cert_path)?,
            key: read(&self.key_path)?,
        };
        if self.current.read().is_ok_and(|c| c.0 == pem) {
            return Ok(false);
        }
        let key = load(&self.cert_path, &self.key_path, &pem)?;
        if let Ok(mut c) = self.current.write() {
            *c = (pem, key);
        }
        Ok(true)
    }

    /// Checks the files every `every` until the process ends.
    pub async fn watch(self: Arc<Self>, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            match self.reload() {
                Ok(true) => {
                    tracing::info!(cert = %self.cert_path.display(), "serving certificate reloaded")
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::error!(error = %e, "the new serving certificate does not load; the previous one stays in service")
                }
            }
        }
    }

    /// The certificate in service (for tests and `/readyz`).
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.1.clone())
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// The server configuration: TLS 1.2 and 1.3 with ring, HTTP/1.1, the reloading pair.
pub fn server_config(cert: Arc<Reloading>) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let mut c = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_cert_resolver(cert);
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(c))
}
