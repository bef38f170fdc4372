//! How a debug hold ends: stdin closes, SIGTERM/SIGINT arrives, or `max-hold` passes —
//! whichever comes first. The timer is local, so the hold ends even if nothing else works.

use std::time::Duration;

use serde::Serialize;
use tokio::io::AsyncReadExt;
use tokio::signal::unix::{Signal, SignalKind, signal};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Released {
    StdinClosed,
    Signal,
    MaxHold,
}

/// The ways a hold can end, armed before the hold starts so no signal is missed.
#[derive(Debug)]
pub struct Releaser {
    term: Option<Signal>,
    int: Option<Signal>,
}

impl Releaser {
    /// Installs the signal handlers. Call before freezing anything.
    pub fn arm() -> Self {
        Self {
            term: signal(SignalKind::terminate()).ok(),
            int: signal(SignalKind::interrupt()).ok(),
        }
    }

    /// Waits for the first reason to release.
    pub async fn wait(mut self, max_hold: Duration) -> Released {
        let stdin_closed = async {
            let mut stdin = tokio::io::stdin();
            let mut buf = [0u8; 256];
            while let Ok(n) = stdin.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        };
        let signalled = async {
            match (self.term.as_mut(), self.int.as_mut()) {
                (Some(t), Some(i)) => {
                    tokio::select! {
                        _ = t.recv() => {}
                        _ = i.recv() => {}
                    }
                }
                // Without signal handlers, only stdin and the timer can end the hold.
                _ => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = stdin_closed => Released::StdinClosed,
            () = signalled => Released::Signal,
            () = tokio::time::sleep(max_hold) => Released::MaxHold,
        }
    }
}
