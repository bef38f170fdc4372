//! Report: what a run did (the JSON line at exit, [`Report`]) and the plan as a table for a
//! terminal. Object names and messages come from the cluster (or a dump) and may hold
//! anything: control characters are shown escaped, never sent to the terminal.

use std::fmt::Write as _;

use serde::Serialize;
use vtsnap_core::reconcile;

use crate::decide::Plan;

/// What a run did: the program's record of the JSON line (beside `errors` and `exit_code`).
#[derive(Debug, Clone, Serialize)]
pub struct StorageRun {
    pub dry_run: bool,
    pub plan: Plan,
    /// `namespace/name: action` of every step carried out.
    pub done: Vec<String>,
}

/// The JSON line at exit.
pub type Report = reconcile::Report<StorageRun>;

/// Logs every step of the plan, done or not (a dry run says it in the log too).
pub(crate) fn log(p: &Plan, dry_run: bool) {
    for s in &p.shards {
        for o in &s.objects {
            tracing::info!(shard = %s.key,
                kind = ?o.kind, name = %o.name, action = ?o.action, reason = ?o.reason, dry_run, "{}", o.message);
        }
    }
}

/// `s` with control characters and bidirectional-text overrides escaped (`\n`, `\u{1b}`):
/// what a terminal shows is what the object holds.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let hidden = c.is_control()
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if hidden {
            out.extend(c.escape_unicode());
        } else if c == '\\' {
            // So an escape written by the object cannot pass for one written here.
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    out
}

fn kebab<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// One line per step: action, kind, namespace/name, reason: message.
pub fn table(p: &Plan) -> String {
    let mut out = String::new();
    for s in &p.shards {
        for o in &s.objects {
            let _ = writeln!(
                out,
                "{:<10} {:?} {}/{}  {}: {}",
                kebab(o.action),
                o.kind,
                printable(&s.key.namespace),
                printable(&o.name),
                kebab(o.reason),
                printable(&o.message)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_text_is_kept() {
        assert_eq!(printable("pvc-1 ü ✓"), "pvc-1 ü ✓");
        assert_eq!(
            printable("a\u{1b}[31mred\nb\rc\td\u{7f}"),
            "a\\u{1b}[31mred\\u{a}b\\u{d}c\\u{9}d\\u{7f}"
        );
        assert_eq!(
            printable("x\u{202e}y\u{2066}z\u{200f}"),
            "x\\u{202e}y\\u{2066}z\\u{200f}"
        );
        assert_eq!(printable("a\\u{1b}"), "a\\\\u{1b}");
        // Neighbours of the ranges pass.
        assert_eq!(
            printable("\u{200d}\u{2029}\u{202f}\u{2065}\u{206a}"),
            "\u{200d}\u{2029}\u{202f}\u{2065}\u{206a}"
        );
    }
}
