//! A request's way through the fake: read it, run the observers, apply an outage or a
//! fault, hand it to its verb, log it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use serde_json::Value;

use super::fault::{self, FaultAction, Observer};
use super::list::list;
use super::reply::{FakeBody, Reply, err, json_reply, not_found, reason_of, respond};
use super::request::{CLIENT_HEADER, Logged, RequestInfo, Verb};
use super::store::{Key, State};
use super::{FakeKube, Inner};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The `tower::Service` side of [`FakeKube`].
#[derive(Clone)]
pub struct FakeKubeService {
    pub(super) inner: Arc<Inner>,
    pub(super) client: Option<Arc<str>>,
}

impl std::fmt::Debug for FakeKubeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeKubeService")
    }
}

impl tower::Service<Request<kube::client::Body>> for FakeKubeService {
    type Response = Response<FakeBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<kube::client::Body>) -> Self::Future {
        let fake = FakeKube {
            inner: self.inner.clone(),
        };
        if let Some(v) = self
            .client
            .as_deref()
            .and_then(|c| http::HeaderValue::from_str(c).ok())
        {
            req.headers_mut().insert(CLIENT_HEADER, v);
        }
        Box::pin(async move { fake.handle(req).await })
    }
}

impl FakeKube {
    async fn handle(
        &self,
        req: Request<kube::client::Body>,
    ) -> Result<Response<FakeBody>, BoxError> {
        let (parts, body) = req.into_parts();
        let Some(mut info) = RequestInfo::read(&parts) else {
            let r = err(
                404,
                "NotFound",
                format!("no such path {}", parts.uri.path()),
            );
            return Ok(respond(r));
        };
        self.run_observers(&info);
        // Faults and outages come before anything else.
        if let Some(reply) = self.inject(&info).await? {
            return Ok(respond(reply));
        }
        let body = body
            .collect_bytes()
            .await
            .map_err(|e| -> BoxError { Box::new(e) })?;
        let reply = if info.verb == Verb::Watch {
            self.watch(&info)
        } else {
            let body: Value = if body.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&body).unwrap_or(Value::Null)
            };
            if info.verb == Verb::Create && info.name.is_none() {
                info.name = body
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            self.serve(&info, body)
        };
        self.state().log.push(Logged {
            info,
            status: reply.status,
        });
        Ok(respond(reply))
    }

    /// Calls the observers whose predicate matches, without the state lock held.
    fn run_observers(&self, info: &RequestInfo) {
        let observers: Vec<Observer> = self
            .state()
            .observers
            .iter()
            .filter(|(when, _)| when(info))
            .map(|(_, f)| f.clone())
            .collect();
        for f in observers {
            f(
                info,
                &FakeKube {
                    inner: self.inner.clone(),
                },
            );
        }
    }

    /// An outage or a fault that fires on this request: an error (a connection that
    /// failed), an injected answer, or `None` (after any delay) to handle it normally.
    /// Logged here when the request goes no further.
    async fn inject(&self, info: &RequestInfo) -> Result<Option<Reply>, BoxError> {
        let fired = {
            let mut st = self.state();
            if st.down {
                st.log.push(Logged {
                    info: info.clone(),
                    status: 0,
                });
                return Err("fake API server is down: connection refused".into());
            }
            fault::fire(&mut st.faults, info)
        };
        // A change runs without the state lock held (it takes it itself).
        let action = fired.map(|(a, change)| {
            if let Some(c) = change {
                c(&FakeKube {
                    inner: self.inner.clone(),
                });
            }
            a
        });
        let injected = |code: u16| {
            self.state().log.push(Logged {
                info: info.clone(),
                status: code,
            });
            err(code, reason_of(code), format!("injected fault {code}"))
        };
        match action {
            Some(FaultAction::Drop) => {
                self.state().log.push(Logged {
                    info: info.clone(),
                    status: 0,
                });
                Err("fake API server dropped the connection".into())
            }
            Some(FaultAction::Status(code)) => Ok(Some(injected(code))),
            Some(FaultAction::Throttle {
                retry_after_seconds,
            }) => Ok(Some(Reply {
                retry_after: Some(retry_after_seconds),
                ..injected(429)
            })),
            Some(FaultAction::DelayThenStatus(d, code)) => {
                tokio::time::sleep(d).await;
                Ok(Some(injected(code)))
            }
            Some(FaultAction::Delay(d)) => {
                tokio::time::sleep(d).await;
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Every verb but WATCH, under the state lock.
    fn serve(&self, info: &RequestInfo, body: Value) -> Reply {
        let mut st = self.state();
        let key = Key::of(info);
        match info.verb {
            Verb::Get => get(&st, info, &key),
            Verb::List => list(&st, info),
            Verb::Create => self.create(&mut st, info, key, body),
            Verb::Update => self.update(&mut st, info, &key, body),
            Verb::Patch => self.patch(&mut st, info, &key, body),
            Verb::Delete => self.delete(&mut st, info, &key, &body),
            Verb::DeleteCollection => self.delete_collection(&mut st, info, &key),
            Verb::Watch => err(500, "InternalError", "watch is served elsewhere"),
        }
    }
}

fn get(st: &State, info: &RequestInfo, key: &Key) -> Reply {
    st.objects
        .get(key)
        .map_or_else(|| not_found(info, key), |o| json_reply(200, o))
}
