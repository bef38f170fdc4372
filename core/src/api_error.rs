//! What a failed Kubernetes API call says to a person. hyper's own words are `client error
//! (Connect)` and `client error (SendRequest)`, without the server or the cause; the
//! cause is further down the error's `source()` chain (an `io::Error` of kind
//! `ConnectionRefused` or `TimedOut`), and the server is known to whoever built the client.

use std::error::Error;
use std::time::Duration;

use crate::cli::ApiTimeouts;

/// How a call failed on its way to the API server, read from its error's sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Refused,
    /// The TCP (or TLS) connection was not made within the connect timeout.
    ConnectTimedOut,
    /// The server sent nothing (or nothing more) within the read timeout.
    ReadTimedOut,
    /// Another I/O failure on the way: name resolution, TLS, a reset.
    Other,
}

/// `e` and every error below it (`source()`), outermost first.
pub fn chain<'a>(e: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(e), |e: &&'a (dyn Error + 'static)| (*e).source())
}

/// The transport failure somewhere in `e`'s chain; `None` when nothing in it is an I/O
/// error (an answer of the API server, a body that did not parse).
pub fn transport(e: &(dyn Error + 'static)) -> Option<Transport> {
    use std::io::ErrorKind;
    let mut found = None;
    for io in chain(e).filter_map(|e| e.downcast_ref::<std::io::Error>()) {
        let t = match io.kind() {
            ErrorKind::ConnectionRefused => Transport::Refused,
            // The connector's timeout wraps tokio's `Elapsed`; a stream's read
            // timeout is a bare `TimedOut` (hyper-timeout).
            ErrorKind::TimedOut
                if io
                    .get_ref()
                    .is_some_and(|inner| inner.is::<tokio::time::error::Elapsed>()) =>
            {
                Transport::ConnectTimedOut
            }
            ErrorKind::TimedOut => Transport::ReadTimedOut,
            _ => Transport::Other,
        };
        if t != Transport::Other {
            return Some(t);
        }
        found = Some(t);
    }
    found
}

/// `d` as `60s` (whole seconds) or `1500ms`.
fn secs(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The API server could not be reached or did not answer, said with its address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreachable {
    #[error("cannot connect to the API server at {server}: connection refused")]
    Refused { server: String },
    #[error("cannot connect to the API server at {server}: timed out after {}", secs(*after))]
    ConnectTimedOut { server: String, after: Duration },
    #[error("no answer from the API server at {server}: timed out after {} without a byte", secs(*after))]
    ReadTimedOut { server: String, after: Duration },
    /// `detail`: the chain's own words, each level once.
    #[error("cannot reach the API server at {server}: {detail}")]
    Other { server: String, detail: String },
}

impl Unreachable {
    /// What `e` says about reaching `server`, whose client was built with `timeouts`;
    /// `None` when `e` is not a transport failure.
    pub fn of(e: &(dyn Error + 'static), server: &str, timeouts: ApiTimeouts) -> Option<Self> {
        let server = server.to_owned();
        Some(match transport(e)? {
            Transport::Refused => Self::Refused { server },
            Transport::ConnectTimedOut => Self::ConnectTimedOut {
                server,
                after: timeouts.connect,
            },
            Transport::ReadTimedOut => Self::ReadTimedOut {
                server,
                after: timeouts.read,
            },
            Transport::Other => Self::Other {
                server,
                detail: words(e),
            },
        })
    }

    /// The failures a caller may put in place of the original error without losing a
    /// distinction some reader makes (a watch tells an unexpected EOF from others).
    pub const fn replaces_its_cause(&self) -> bool {
        !matches!(self, Self::Other { .. })
    }
}

/// An answer longer than the reader's bound: refused rather than buffered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the answer to {request} is larger than {limit} bytes ({} MiB), the most {reader} reads in one answer",
    limit >> 20
)]
pub struct AnswerTooLarge {
    /// `GET /api/v1/…`.
    pub request: String,
    pub limit: u64,
    /// The program, e.g. `kubectl vtsnap`.
    pub reader: &'static str,
}

/// Every level of `e`'s chain, joined by `: `, leaving out a level whose words the
/// level above already said (kube's `ServiceError: …` repeats its source).
pub fn words(e: &(dyn Error + 'static)) -> String {
    let mut out: Vec<String> = Vec::new();
    for level in chain(e) {
        let text = level.to_string();
        if out.last().is_some_and(|above| above.contains(&text)) {
            continue;
        }
        out.push(text);
    }
    out.join(": ")
}

/// The message of a failed call: an [`Unreachable`] or [`AnswerTooLarge`] found in its
/// chain (put there by a client layer that knows the server), else the error's own words.
pub fn message(e: &(dyn Error + 'static)) -> String {
    for level in chain(e) {
        if let Some(u) = level.downcast_ref::<Unreachable>() {
            return u.to_string();
        }
        if let Some(t) = level.downcast_ref::<AnswerTooLarge>() {
            return t.to_string();
        }
    }
    e.to_string()
}

/// [`message`] for a client that has no such layer: a transport failure is said with
/// `server` and the timeouts the client was built with.
pub fn describe(e: &(dyn Error + 'static), server: &str, timeouts: ApiTimeouts) -> String {
    let said = message(e);
    if said != e.to_string() {
        return said;
    }
    Unreachable::of(e, server, timeouts).map_or(said, |u| u.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const QUICK: ApiTimeouts = ApiTimeouts {
        connect: Duration::from_secs(1),
        read: Duration::from_secs(1),
        write: Duration::from_secs(1),
    };

    /// A client of `url` with `QUICK` timeouts (and no retry layer: one attempt).
    fn client(url: &str) -> kube::Client {
        let mut config = kube::Config::new(url.parse().unwrap());
        config.connect_timeout = Some(QUICK.connect);
        config.read_timeout = Some(QUICK.read);
        config.write_timeout = Some(QUICK.write);
        kube::Client::try_from(config).unwrap()
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_server_and_says_so() {
        // A port that was just free: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let e = client(&url).apiserver_version().await.unwrap_err();
        assert!(e.to_string().contains("client error"), "{e}");
        assert_eq!(transport(&e), Some(Transport::Refused), "{}", words(&e));
        let said = describe(&e, &url, QUICK);
        assert_eq!(
            said,
            format!("cannot connect to the API server at {url}: connection refused")
        );
    }

    #[tokio::test]
    async fn a_silent_server_is_a_read_timeout_with_its_length() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // Accepts, reads the request, never answers (the socket is held open).
        let held = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
            drop(socket);
        });
        let e = client(&url).apiserver_version().await.unwrap_err();
        held.abort();
        assert_eq!(
            transport(&e),
            Some(Transport::ReadTimedOut),
            "{}",
            words(&e)
        );
        assert_eq!(
            describe(&e, &url, QUICK),
            format!("no answer from the API server at {url}: timed out after 1s without a byte")
        );
    }

    #[tokio::test]
    async fn a_connect_timeout_is_told_from_a_read_timeout() {
        let elapsed = tokio::time::timeout(Duration::ZERO, std::future::pending::<()>())
            .await
            .unwrap_err();
        let connect = std::io::Error::new(std::io::ErrorKind::TimedOut, elapsed);
        assert_eq!(transport(&connect), Some(Transport::ConnectTimedOut));
        let read = std::io::Error::from(std::io::ErrorKind::TimedOut);
        assert_eq!(transport(&read), Some(Transport::ReadTimedOut));
        assert_eq!(
            Unreachable::of(&connect, "https://k:6443", QUICK)
                .unwrap()
                .to_string(),
            "cannot connect to the API server at https://k:6443: timed out after 1s"
        );
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let other = Unreachable::of(&reset, "https://k:6443", QUICK).unwrap();
        assert!(matches!(other, Unreachable::Other { .. }), "{other}");
        assert!(!other.replaces_its_cause());
        // Not an I/O failure: nothing to say about the server.
        let parse = serde_json::from_str::<u8>("x").unwrap_err();
        assert_eq!(transport(&parse), None);
        assert_eq!(describe(&parse, "https://k:6443", QUICK), parse.to_string());
    }

    #[test]
    fn a_self_describing_failure_is_found_anywhere_in_the_chain() {
        let big = AnswerTooLarge {
            request: "GET /api/v1/pods".into(),
            limit: 64 << 20,
            reader: "kubectl vtsnap",
        };
        let e = kube::Error::Service(Box::new(big.clone()));
        assert_eq!(
            message(&e),
            "the answer to GET /api/v1/pods is larger than 67108864 bytes (64 MiB), \
             the most kubectl vtsnap reads in one answer"
        );
        assert_eq!(describe(&e, "https://k", QUICK), big.to_string());
        // kube's `ServiceError: x` above `x`: said once.
        assert_eq!(words(&e), format!("ServiceError: {big}"));
    }
}
