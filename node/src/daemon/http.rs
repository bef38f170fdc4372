//! `/healthz` (the process serves), `/readyz` (the last lease list succeeded) and
//! `/metrics` (Prometheus text), over a deliberately tiny HTTP/1.1 responder.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::metrics::Metrics;

/// Binds `addr` and serves in the background; returns the bound address.
pub async fn serve(addr: SocketAddr, metrics: Metrics) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                continue;
            };
            let m = metrics.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]);
                let path = req.split_whitespace().nth(1).unwrap_or("/");
                let (status, body) = match path {
                    "/healthz" => ("200 OK", "ok\n".to_owned()),
                    "/readyz" if m.api_ok() => ("200 OK", "ok\n".to_owned()),
                    "/readyz" => (
                        "503 Service Unavailable",
                        "the API server was not reachable on the last pass\n".to_owned(),
                    ),
                    "/metrics" => ("200 OK", m.render()),
                    _ => ("404 Not Found", "not found\n".to_owned()),
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    Ok(bound)
}
