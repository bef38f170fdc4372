//! Structured logging for every vtsnap binary.
//!
//! Logs go to stderr: stdout is kept for the one JSON summary line each program prints.
//! `auto` picks human-readable text when stderr is a terminal and JSON otherwise
//! (a container's log stream). The level filter comes from `VTSNAP_LOG` (default `info`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The environment variable of `--log-format`.
pub const ENV_LOG_FORMAT: &str = "VTSNAP_LOG_FORMAT";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Text on a terminal, JSON elsewhere.
    #[default]
    Auto,
    Json,
    Text,
}

/// What the log lines look like, given the format asked for and whether stderr is a
/// terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub json: bool,
    /// Colour escapes: only for a terminal, whatever the format (a pipe or a file would
    /// get them as raw bytes).
    pub ansi: bool,
}

impl Style {
    pub fn of(format: LogFormat, terminal: bool) -> Self {
        let json = match format {
            LogFormat::Json => true,
            LogFormat::Text => false,
            LogFormat::Auto => !terminal,
        };
        Self {
            json,
            ansi: terminal && !json,
        }
    }
}

/// Installs the global subscriber. Calling it twice is harmless (the second call is ignored).
pub fn init(format: LogFormat) {
    init_with_default(format, "info");
}

/// [`init`] with another level filter when `VTSNAP_LOG` is unset: a command a person runs
/// (`kubectl vtsnap`) says what matters in its own lines and logs nothing by default.
pub fn init_with_default(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_env("VTSNAP_LOG").unwrap_or_else(|_| EnvFilter::new(default_filter));
    let style = Style::of(format, std::io::stderr().is_terminal());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(style.ansi)
        .with_writer(std::io::stderr);
    let _ = if style.json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init()
    } else {
        builder.with_target(false).try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal() {
        let style = |f, t| {
            let s = Style::of(f, t);
            (s.json, s.ansi)
        };
        assert_eq!(
            style(LogFormat::Text, false),
            (false, false),
            "text into a pipe"
        );
        assert_eq!(style(LogFormat::Text, true), (false, true));
        assert_eq!(style(LogFormat::Auto, true), (false, true));
        assert_eq!(style(LogFormat::Auto, false), (true, false));
        assert_eq!(style(LogFormat::Json, true), (true, false));
    }
}
