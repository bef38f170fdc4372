//! A few lines that let tests serve hand-written protobuf messages with tonic, without
//! generated code: route on the method name and answer with [`unary`].

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use tonic::body::Body;
use tonic_prost::ProstCodec;

pub type HttpFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

/// Decodes the request, runs `f`, encodes its answer (or its `Status`).
pub async fn unary<Req, Resp, F>(req: http::Request<Body>, f: F) -> http::Response<Body>
where
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
    F: Fn(Req) -> Result<Resp, tonic::Status> + Clone + Send + 'static,
{
    let svc = tower::service_fn(move |r: tonic::Request<Req>| {
        let f = f.clone();
        async move { f(r.into_inner()).map(tonic::Response::new) }
    });
    tonic::server::Grpc::new(ProstCodec::<Resp, Req>::default())
        .unary(svc, req)
        .await
}

/// The last path segment of a gRPC request: the method name.
pub fn method(req: &http::Request<Body>) -> String {
    req.uri()
        .path()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A server running in the background; stops when dropped.
#[derive(Debug)]
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Running {
    pub fn endpoint(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Serves `svc` on `incoming` in the background until the returned sender is used or dropped.
pub fn spawn_server<S, I, IO, IE>(svc: S, incoming: I) -> tokio::sync::oneshot::Sender<()>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    I: futures::Stream<Item = Result<IO, IE>> + Send + 'static,
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (stop, stopped) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
            })
            .await;
    });
    stop
}

/// Serves `svc` on 127.0.0.1 (an ephemeral port).
pub async fn serve_tcp<S>(svc: S) -> Running
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    serve_tcp_on(svc, std::net::Ipv4Addr::LOCALHOST.into()).await
}

/// Serves on a free port of `ip` (the node's address, for Pods to reach).
pub async fn serve_tcp_on<S>(svc: S, ip: std::net::IpAddr) -> Running
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = spawn_server(
        svc,
        tokio_stream::wrappers::TcpListenerStream::new(listener),
    );
    Running {
        addr,
        stop: Some(stop),
    }
}

/// An address on which nothing listens (bound, then closed).
pub async fn closed_endpoint() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    addr.to_string()
}

/// [`unary`] for handlers that need to await.
pub async fn unary_async<Req, Resp, F, Fut>(req: http::Request<Body>, f: F) -> http::Response<Body>
where
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
    F: Fn(Req) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<Resp, tonic::Status>> + Send + 'static,
{
    let svc = tower::service_fn(move |r: tonic::Request<Req>| {
        let f = f.clone();
        async move { f(r.into_inner()).await.map(tonic::Response::new) }
    });
    tonic::server::Grpc::new(ProstCodec::<Resp, Req>::default())
        .unary(svc, req)
        .await
}
