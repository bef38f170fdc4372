//! A readable record of what the lab did, with times relative to the lab's start.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Timeline {
    start: Instant,
    entries: Arc<Mutex<Vec<(Duration, String)>>>,
    echo: bool,
}

impl Timeline {
    /// `echo`: also print each entry on stderr as it happens (the demo does).
    pub fn new(echo: bool) -> Self {
        Self {
            start: Instant::now(),
            entries: Arc::default(),
            echo,
        }
    }

    pub fn mark(&self, what: impl Into<String>) {
        let at = self.start.elapsed();
        let what = what.into();
        if self.echo {
            eprintln!("{:>8.1}s  {what}", at.as_secs_f64());
        }
        if let Ok(mut e) = self.entries.lock() {
            e.push((at, what));
        }
    }

    pub fn entries(&self) -> Vec<(Duration, String)> {
        self.entries.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// The whole timeline, one `   12.3s  what` line per entry.
    pub fn render(&self) -> String {
        self.entries()
            .iter()
            .map(|(at, what)| format!("{:>8.1}s  {what}\n", at.as_secs_f64()))
            .collect()
    }
}
