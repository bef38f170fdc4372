//! The plugin's Kubernetes client: the harness's client (`core::cli::client_with`, with
//! its timeouts and retries) wrapped in a layer that
//! - refuses an answer larger than [`MAX_ANSWER`] (by its `Content-Length`, or once that
//!   much has arrived) instead of buffering it: an endless chunked list would otherwise
//!   grow the plugin until it is killed;
//! - says a transport failure with the API server's address ("connection refused",
//!   "timed out after 60s") instead of hyper's `client error (Connect)`;
//! - remembers the last request, for the message of the whole command's time limit.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use kube::client::Body;
use tower::BoxError;
use vtsnap_core::api_error::{AnswerTooLarge, Unreachable};
use vtsnap_core::cli::{ApiTimeouts, KubeUnreachable, client_with};

use crate::kubeconfig::{KubeconfigError, Source};

/// The most one API answer may hold. A page is at most 500 objects (`core::reconcile::list`)
/// and an object at most about 1.5 MiB (etcd's request limit), but pages of what the
/// plugin reads (ConfigMaps of one label, Pods, Jobs, snapshots, Events) are far smaller.
pub const MAX_ANSWER: u64 = 64 << 20;

const READER: &str = "kubectl vtsnap";

/// The request most recently sent, shared with the layer.
#[derive(Debug, Clone, Default)]
pub struct LastRequest(Arc<Mutex<Option<String>>>);

impl LastRequest {
    fn set(&self, request: &str) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(request.to_owned());
    }

    /// `GET /api/v1/…`, or `None` before the first request.
    pub fn get(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A connected client and the namespace of its context.
pub struct Connected {
    pub client: kube::Client,
    /// The context's namespace (or the Pod's).
    pub namespace: String,
}

impl std::fmt::Debug for Connected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connected")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error("kubeconfig {from}: {source}")]
    Unusable {
        from: String,
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) and no Pod service account: {0}"
    )]
    InCluster(kube::config::InClusterError),
    #[error(transparent)]
    Client(#[from] KubeUnreachable),
}

/// Reads the kubeconfig of `source` (its `context`) and builds the bounded client, which
/// records each request in `last`.
pub async fn connect(
    source: &Source,
    context: Option<String>,
    last: LastRequest,
) -> Result<Connected, ConnectError> {
    let opts = kube::config::KubeConfigOptions {
        context,
        ..Default::default()
    };
    let config = match crate::kubeconfig::load(source)? {
        Some(kc) => kube::Config::from_custom_kubeconfig(kc, &opts)
            .await
            .map_err(|source_err| ConnectError::Unusable {
                from: from_where(source),
                source: source_err,
            })?,
        None => kube::Config::incluster().map_err(ConnectError::InCluster)?,
    };
    let namespace = config.default_namespace.clone();
    let server = config.cluster_url.to_string();
    let timeouts = ApiTimeouts::DEFAULT;
    let inner = client_with(config, timeouts)?;
    let layer = Bounded {
        inner,
        server: server.trim_end_matches('/').into(),
        timeouts,
        max: MAX_ANSWER,
        last: last.clone(),
    };
    Ok(Connected {
        client: kube::Client::new(layer, namespace.clone()),
        namespace,
    })
}

fn from_where(source: &Source) -> String {
    match source {
        Source::Flag(p) | Source::Home(p) => p.display().to_string(),
        Source::EnvList(_) => "of KUBECONFIG".into(),
        Source::InCluster => "in-cluster".into(),
    }
}

type AnswerBody = UnsyncBoxBody<Bytes, BoxError>;

/// The layer (a service over the inner client).
#[derive(Clone)]
struct Bounded {
    inner: kube::Client,
    server: Arc<str>,
    timeouts: ApiTimeouts,
    max: u64,
    last: LastRequest,
}

impl Bounded {
    /// A transport failure said with the server; anything else as it was (an answer of
    /// the API server stays a `kube::Error::Api` for those who judge it).
    fn said(&self, e: BoxError) -> BoxError {
        match Unreachable::of(&*e, &self.server, self.timeouts) {
            Some(u) if u.replaces_its_cause() => Box::new(u),
            _ => e,
        }
    }

    fn too_large(&self, request: String) -> BoxError {
        Box::new(AnswerTooLarge {
            request,
            limit: self.max,
            reader: READER,
        })
    }
}

impl tower::Service<Request<Body>> for Bounded {
    type Response = Response<AnswerBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // The inner client has its own buffer: always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let request = format!(
            "{} {}",
            req.method(),
            req.uri().path_and_query().map_or("/", |p| p.as_str())
        );
        self.last.set(&request);
        let this = self.clone();
        Box::pin(async move {
            let res = this
                .inner
                .send(req)
                .await
                .map_err(|e| this.said(Box::new(e)))?;
            let declared = res
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if declared.is_some_and(|n| n > this.max) {
                return Err(this.too_large(request));
            }
            let max = usize::try_from(this.max).unwrap_or(usize::MAX);
            Ok(res.map(move |body| {
                Limited::new(body, max)
                    .map_err(move |e| {
                        if e.is::<LengthLimitError>() {
                            this.too_large(request.clone())
                        } else {
                            this.said(e)
                        }
                    })
                    .boxed_unsync()
            }))
        })
    }
}
