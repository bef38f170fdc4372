//! The fake API server over plain HTTP on loopback, so a client built as the binaries build
//! theirs (with connect/read/write timeouts) talks to it through real sockets, and a fault
//! that delays an answer is a server that accepts and never answers.

use std::convert::Infallible;
use std::net::SocketAddr;

use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tower::Service;

use super::{FakeBody, FakeKube};

/// A running HTTP front; the server stops when this is dropped.
#[derive(Debug)]
pub struct HttpFront {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl HttpFront {
    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube client config pointing at this front (no TLS, no credentials).
    pub fn config(&self) -> kube::Config {
        kube::Config::new(self.url().parse().expect("a loopback URL parses"))
    }
}

impl Drop for HttpFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeKube {
    /// Serves this fake on `127.0.0.1:<free port>`.
    pub async fn serve_http(&self) -> HttpFront {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener
            .local_addr()
            .expect("a bound socket has an address");
        let fake = self.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let fake = fake.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let mut inner = fake.service();
                        async move { Ok::<_, Infallible>(answer(&mut inner, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        HttpFront { addr, task }
    }
}

async fn answer(svc: &mut super::FakeKubeService, req: Request<Incoming>) -> Response<FakeBody> {
    let (parts, body) = req.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let req = Request::from_parts(parts, kube::client::Body::from(bytes.to_vec()));
    match svc.call(req).await {
        Ok(r) => r,
        Err(e) => {
            let body = http_body_util::Full::new(bytes::Bytes::from(e.to_string()))
                .map_err(|never| match never {})
                .boxed_unsync();
            let mut r = Response::new(body);
            *r.status_mut() = http::StatusCode::BAD_GATEWAY;
            r
        }
    }
}
