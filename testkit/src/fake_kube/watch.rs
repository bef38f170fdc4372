//! WATCH: the changes since a resourceVersion (or every object as ADDED), then live ones,
//! until the timeout, [`FakeKube::drop_watches`], or the reader falls too far behind.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use serde_json::json;
use tokio::sync::broadcast;

use super::FakeKube;
use super::reply::Reply;
use super::request::RequestInfo;
use super::selector::{FieldSelector, LabelSelector};
use super::store::Event;

impl FakeKube {
    pub(super) fn watch(&self, info: &RequestInfo) -> Reply {
        let labels = LabelSelector::parse(info.param("labelSelector")).unwrap_or_default();
        let fields = FieldSelector::parse(info.param("fieldSelector")).unwrap_or_default();
        let timeout = Duration::from_secs(
            info.query
                .get("timeoutSeconds")
                .and_then(|t| t.parse().ok())
                .unwrap_or(290),
        );
        let (group, plural, ns) = (
            info.group.clone(),
            info.plural.clone(),
            info.namespace.clone(),
        );
        let matches = move |e: &Event| {
            e.group == group
                && e.plural == plural
                && ns.as_ref().is_none_or(|n| *n == e.namespace)
                && labels.matches(&e.object)
                && fields.matches(&e.object)
        };
        let mut rx = self.inner.events.subscribe();
        let mut epoch = self.inner.watch_epoch.subscribe();
        epoch.mark_unchanged();
        let st = self.state();
        let start: Option<u64> = info
            .query
            .get("resourceVersion")
            .and_then(|r| r.parse().ok())
            .filter(|r| *r > 0);
        let backlog: Vec<Event> = match start {
            Some(rv) => st
                .history
                .iter()
                .filter(|e| e.rv > rv && matches(e))
                .cloned()
                .collect(),
            None => st
                .objects
                .iter()
                .map(|(k, v)| Event {
                    rv: st.rv,
                    group: k.group.clone(),
                    plural: k.plural.clone(),
                    namespace: k.namespace.clone(),
                    kind: "ADDED",
                    object: v.clone(),
                })
                .filter(|e| matches(e))
                .collect(),
        };
        let seen = st.rv;
        drop(st);
        let line =
            |e: &Event| Bytes::from(format!("{}\n", json!({"type": e.kind, "object": e.object})));
        let first: Vec<Bytes> = backlog.iter().map(line).collect();
        let live = async_stream(move |tx| async move {
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    // Ending first: a write made after `drop_watches` returned never
                    // reaches a stream it ended, though both are ready when it next runs.
                    biased;
                    _ = epoch.changed() => return,
                    () = &mut deadline => return,
                    ev = rx.recv() => match ev {
                        Ok(e) if e.rv > seen && matches(&e) => {
                            if tx.send(line(&e)).await.is_err() { return; }
                        }
                        Ok(_) => {}
                        // Events were lost to this watcher: end the stream (as a real server
                        // ends a watch it cannot serve) so that the client resumes or relists.
                        Err(broadcast::error::RecvError::Lagged(_)) => return,
                        Err(broadcast::error::RecvError::Closed) => return,
                    }
                }
            }
        });
        let stream = futures::stream::iter(first)
            .chain(live)
            .map(|b| Ok::<_, Infallible>(http_body::Frame::data(b)));
        Reply {
            status: 200,
            body: StreamBody::new(stream).boxed_unsync(),
            retry_after: None,
        }
    }
}

/// A stream fed by a task; ends when the task returns.
fn async_stream<F, Fut>(f: F) -> impl futures::Stream<Item = Bytes> + Send + 'static
where
    F: FnOnce(tokio::sync::mpsc::Sender<Bytes>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(f(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
