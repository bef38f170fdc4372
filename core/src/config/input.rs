//! Bounds on a config file before it is parsed: a regular file, at most [`MAX_BYTES`], at
//! most [`MAX_DEPTH`] levels deep. A config is small and shallow; without the bounds,
//! `--config /dev/zero` grows until the pod is killed, a 22 MB file takes over a gigabyte,
//! and a deeply nested one takes seconds per thousand levels to be rejected.

use std::path::{Path, PathBuf};

/// The largest config file read (1 MiB); a real one is a few kilobytes.
pub const MAX_BYTES: u64 = 1024 * 1024;
/// The deepest nesting accepted (an estimate from indentation and brackets that never
/// comes out lower than the real depth). A config's deepest value (a vtbackup PVC
/// template's storage request) is about 20 by this count.
pub const MAX_DEPTH: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a regular file (a {kind})", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("{} is larger than {MAX_BYTES} bytes, the most a config file may have", path.display())]
    TooLarge { path: PathBuf },
    #[error("{} is not UTF-8 text", path.display())]
    NotText { path: PathBuf },
    #[error("line {line}: nested deeper than {MAX_DEPTH} levels, the most a config may have")]
    TooDeep { line: usize },
}

/// The text of a config file, within the bounds.
pub fn read(path: &Path) -> Result<String, InputError> {
    use crate::input::{Accept, ReadError, read_bounded};
    // A ConfigMap mount's file is a symlink to a regular file, so links are followed.
    let bytes = read_bounded(path, "a config file", MAX_BYTES, Accept::RegularFile).map_err(
        |e| match e {
            ReadError::Io { path, source } => InputError::Read { path, source },
            ReadError::NotAFile { path, kind } => InputError::NotAFile { path, kind },
            ReadError::TooLarge { path, .. } => InputError::TooLarge { path },
        },
    )?;
    let text = String::from_utf8(bytes).map_err(|_| InputError::NotText {
        path: path.to_owned(),
    })?;
    check_depth(&text)?;
    Ok(text)
}

/// Refuses text nested deeper than [`MAX_DEPTH`], in one pass and without parsing.
///
/// Block levels are counted from the indentation (each distinct indentation open counts
/// twice: a sequence may sit at its parent key's column) plus the `- ` entries that
/// open on one line; flow levels from `[` and `{` outside quotes, comments and block
/// scalars. Where the text is ambiguous the count errs high, never low.
pub fn check_depth(text: &str) -> Result<(), InputError> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    let mut quote: Option<char> = None;
    // Lines indented more than this are a block scalar's content.
    let mut scalar_above: Option<usize> = None;
    for (n, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let col = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[col..];
        if let Some(above) = scalar_above {
            if rest.is_empty() || col > above {
                continue;
            }
            scalar_above = None;
        }
        if quote.is_none() && (rest.is_empty() || rest.starts_with('#')) {
            continue;
        }
        if quote.is_none() && flow == 0 {
            while indents.last().is_some_and(|&i| i > col) {
                indents.pop();
            }
            if indents.last() != Some(&col) {
                indents.push(col);
            }
        }
        let block = 2 * indents.len();
        let scan = scan_line(rest, col, &mut flow, &mut quote);
        if block + scan.entries + scan.max_flow > MAX_DEPTH {
            return Err(InputError::TooDeep { line: n + 1 });
        }
        scalar_above = scan.block_scalar;
    }
    Ok(())
}

struct LineScan {
    /// `- ` entries opened at the start of the line.
    entries: usize,
    /// The deepest flow nesting reached on the line.
    max_flow: usize,
    /// The line ends in a block scalar header (`|`, `>-`, …): its content is indented
    /// more than this column.
    block_scalar: Option<usize>,
}

fn scan_line(rest: &str, col: usize, flow: &mut usize, quote: &mut Option<char>) -> LineScan {
    let b = rest.as_bytes();
    let mut i = 0;
    let mut entries = 0;
    if quote.is_none() && *flow == 0 {
        // Compact nesting: `- - - x`, `? key`.
        while i < b.len()
            && matches!(b[i], b'-' | b'?')
            && b.get(i + 1).is_none_or(|c| *c == b' ' || *c == b'\t')
        {
            entries += 1;
            i += 1;
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
        }
    }
    let content_col = col + i;
    let mut max_flow = *flow;
    // Where a scalar may start: a quote there opens a quoted scalar.
    let mut token_start = true;
    let mut last_token = (0, 0);
    while i < b.len() {
        let c = b[i];
        if let Some(q) = *quote {
            if q == '"' && c == b'\\' {
                i += 2;
                continue;
            }
            if c == q as u8 {
                if q == '\'' && b.get(i + 1) == Some(&b'\'') {
                    i += 2;
                    continue;
                }
                *quote = None;
                token_start = false;
            }
            i += 1;
            continue;
        }
        let after_space = i == 0 || matches!(b[i - 1], b' ' | b'\t');
        match c {
            b'#' if after_space => break,
            b'"' | b'\'' if token_start => *quote = Some(c as char),
            b'[' | b'{' if *flow > 0 || token_start || after_space => {
                *flow += 1;
                max_flow = max_flow.max(*flow);
                token_start = true;
            }
            b']' | b'}' if *flow > 0 => {
                *flow -= 1;
                token_start = false;
            }
            b',' if *flow > 0 => token_start = true,
            b':' | b'-' | b'?' if b.get(i + 1).is_none_or(|n| matches!(n, b' ' | b'\t')) => {
                token_start = true;
            }
            b' ' | b'\t' => {}
            _ => token_start = false,
        }
        if !matches!(c, b' ' | b'\t') {
            if i == 0 || matches!(b[i - 1], b' ' | b'\t') {
                last_token.0 = i;
            }
            last_token.1 = i + 1;
        }
        i += 1;
    }
    let last = &rest[last_token.0.min(last_token.1)..last_token.1];
    let block_scalar = (quote.is_none()
        && *flow == 0
        && (last.starts_with('|') || last.starts_with('>'))
        && last[1..]
            .bytes()
            .all(|c| c.is_ascii_digit() || c == b'-' || c == b'+'))
    .then_some(content_col);
    LineScan {
        entries,
        max_flow,
        block_scalar,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn too_deep(text: &str) -> bool {
        matches!(check_depth(text), Err(InputError::TooDeep { .. }))
    }

    #[test]
    fn ordinary_configs_pass() {
        let text = "clusters:\n- name: example   # a comment [[[[\n  namespace: vitess\n  snapshot: {labels: {a: \"[[[[\", b: 'x''[[['}}\n  \
                    keyspaces:\n    commerce:\n      shards:\n        \"-80\":\n          vtbackup:\n            dataVolumeClaimTemplate:\n              \
                    resources:\n                requests:\n                  storage: 10Gi\n          restore: {pools: [replica, rdonly]}\n  \
                    annotations:\n    note: |\n      [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n    k: it's [fine\n";
        assert!(check_depth(text).is_ok(), "{:?}", check_depth(text));
    }

    #[test]
    fn deep_flow_block_and_compact_nesting_are_refused() {
        let flow = format!("clusters: {}{}", "[".repeat(200), "]".repeat(200));
        assert!(too_deep(&flow));
        let mut block = String::new();
        for d in 0..60 {
            block.push_str(&format!("{}k{d}:\n", " ".repeat(d)));
        }
        assert!(too_deep(&block));
        let compact = format!("clusters:\n{}x\n", "- ".repeat(200));
        assert!(too_deep(&compact));
        // A quote that ends on a later line does not hide brackets after it.
        let split = format!("a: [\"x\n]]]\", {}\n", "[".repeat(200));
        assert!(too_deep(&split));
        // A block scalar ends where the indentation does.
        let after = format!("a: |\n  text\nb: {}\n", "[".repeat(200));
        assert!(too_deep(&after));
    }

    #[test]
    fn the_line_of_the_nesting_is_named() {
        let text = format!("a: 1\nb: {}\n", "{".repeat(150));
        assert!(matches!(
            check_depth(&text),
            Err(InputError::TooDeep { line: 2 })
        ));
    }
}
