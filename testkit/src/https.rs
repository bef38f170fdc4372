//! TLS for tests of the admission webhook: a self-signed serving certificate (written as
//! a Secret mount would hold it) and a one-shot HTTPS client that trusts only it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};

/// A self-signed certificate for `sans` (names and IP addresses) and its key, as PEM.
#[derive(Debug, Clone)]
pub struct TestCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestCert {
    pub fn new(sans: &[&str]) -> Self {
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let c = rcgen::generate_simple_self_signed(sans).unwrap_or_else(|e| panic!("rcgen: {e}"));
        Self {
            cert_pem: c.cert.pem(),
            key_pem: c.signing_key.serialize_pem(),
        }
    }

    /// Writes `tls.crt` and `tls.key` into `dir` (replacing them, as a Secret update does);
    /// returns their paths.
    pub fn write(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        for (path, text) in [(&c, &self.cert_pem), (&k, &self.key_pem)] {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, text).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
            std::fs::rename(&tmp, path)
                .unwrap_or_else(|e| panic!("rename {}: {e}", path.display()));
        }
        (c, k)
    }

    /// The certificate, DER.
    pub fn der(&self) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// What the server answered.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    /// The certificate the server presented.
    pub server_cert: CertificateDer<'static>,
}

/// A kept-alive HTTPS connection (as the API server keeps to a webhook).
pub struct Connection {
    send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    server_cert: CertificateDer<'static>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects to `addr` (name `127.0.0.1`), trusting only `trust`.
    pub async fn open(addr: SocketAddr, trust: &TestCert) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(trust.der()).map_err(|e| e.to_string())?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let server_cert = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first().cloned())
            .ok_or("no server certificate")?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        Ok(Self { send, server_cert })
    }

    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Vec<u8>,
    ) -> Result<Answer, String> {
        // The previous exchange may still be winding down: wait until the connection takes
        // the next request.
        self.send.ready().await.map_err(|e| e.to_string())?;
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let resp = self
            .send
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(Answer {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
            server_cert: self.server_cert.clone(),
        })
    }
}

/// One HTTPS request to `addr` (name `127.0.0.1`), trusting only `trust`.
pub async fn request(
    addr: SocketAddr,
    trust: &TestCert,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> Result<Answer, String> {
    Connection::open(addr, trust)
        .await?
        .send(method, path, body)
        .await
}
