//! When a config does not parse, find every parse error rather than the first: each level,
//! block and field is read on its own, a child that does not parse is reported and left
//! out, and what did parse is still validated (with checks on the left-out fields muted).

use std::collections::{BTreeMap, BTreeSet};

use serde::de::{DeserializeOwned, IgnoredAny};

use super::model::*;
use super::probe::{ProbeError, Seg, probe};
use super::validate::Unparsed;
use super::{ConfigError, parse_error};

/// The five policy keys every level has; each is read on its own.
const BLOCKS: [&str; 5] = [
    "snapshot",
    "retention",
    "deletionPolicy",
    "restore",
    "vtbackup",
];

/// Each piece is read by parsing the whole text again, so the work grows with the size of
/// the text (or the values its aliases expand to, if more) times the number of pieces:
/// past this many bytes (or values) parsed in all, the search for further errors is given
/// up (a hostile 1 MiB file would otherwise take hours).
pub const BUDGET_BYTES: usize = 16 << 20;

/// What a config that failed strict parsing still yields.
pub struct Partial {
    pub config: Config,
    /// In document order.
    pub errors: Vec<ConfigError>,
    pub unparsed: Unparsed,
}

/// `None` when reading it piece by piece would cost more than [`BUDGET_BYTES`]. `values`:
/// how many values one read of `text` walks, its aliases expanded.
pub fn partial(text: &str, values: usize) -> Option<Partial> {
    let mut w = Walk {
        text,
        cost: text.len().max(values).max(1),
        errors: Vec::new(),
        unparsed: Vec::new(),
        spent: 0,
    };
    let mut config = Config::default();
    // A root that does not parse (bad YAML, not a mapping) hides everything below it.
    if w.lenient::<Config>(&[], &["clusters"]).is_ok() {
        let p = key(&[], "clusters");
        if let Ok(Some(items)) = w.lenient::<Vec<IgnoredAny>>(&p, &[]) {
            config.clusters = (0..items.len()).map(|i| w.cluster(&index(&p, i))).collect();
        }
    }
    if w.spent > BUDGET_BYTES {
        return None;
    }
    w.errors
        .sort_by_key(|(at, _)| at.unwrap_or((usize::MAX, usize::MAX)));
    Some(Partial {
        config,
        errors: w.errors.into_iter().map(|(_, e)| e).collect(),
        unparsed: Unparsed::new(w.unparsed),
    })
}

/// The node itself does not parse (already reported).
struct Bad;

struct Walk<'t> {
    text: &'t str,
    /// What one read of the text costs, in bytes or expanded values.
    cost: usize,
    /// With (line, column) where known, for sorting.
    errors: Vec<(Option<(usize, usize)>, ConfigError)>,
    unparsed: Vec<String>,
    /// Bytes parsed so far.
    spent: usize,
}

impl Walk<'_> {
    /// [`probe`] within the budget; nothing is found once it is spent (and the caller
    /// throws the walk away).
    fn probe<T: DeserializeOwned>(
        &mut self,
        path: &[Seg],
        skip: &BTreeSet<String>,
    ) -> Result<Option<T>, ProbeError> {
        self.spent = self.spent.saturating_add(self.cost);
        if self.spent > BUDGET_BYTES {
            return Ok(None);
        }
        probe(self.text, path, skip)
    }

    fn report(&mut self, e: ProbeError) {
        let at = e.inner().location().map(|l| (l.line(), l.column()));
        let e = parse_error(e);
        if !self.errors.iter().any(|(_, seen)| *seen == e) {
            self.errors.push((at, e));
        }
    }

    /// The node at `path` as `T`, leaving out (reporting, muting) each direct child that
    /// does not parse; `Err` when the node itself does not (reported; muting is the caller's).
    fn lenient<T: DeserializeOwned>(
        &mut self,
        path: &[Seg],
        skip: &[&str],
    ) -> Result<Option<T>, Bad> {
        let mut skip: BTreeSet<String> = skip.iter().map(|s| (*s).to_owned()).collect();
        let mut left_out = BTreeSet::new();
        loop {
            let e = match self.probe::<T>(path, &skip) {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            match child_key(path, &e) {
                Some(k) if !skip.contains(&k) => {
                    self.report(e);
                    self.unparsed.push(render(&key(path, &k)));
                    skip.insert(k.clone());
                    left_out.insert(k);
                }
                _ => {
                    // Leaving out a bad required field makes it "missing": already reported.
                    let msg = e.inner().to_string();
                    if !left_out
                        .iter()
                        .any(|k| msg.contains(&format!("missing field `{k}`")))
                    {
                        self.report(e);
                    }
                    return Err(Bad);
                }
            }
        }
    }

    /// A node that is read whole (a policy block, a level's own fields); `None` if bad.
    fn node<T: DeserializeOwned>(&mut self, path: &[Seg], skip: &[&str]) -> Option<T> {
        match self.lenient::<Option<T>>(path, skip) {
            Ok(v) => v.flatten(),
            Err(Bad) => {
                self.unparsed.push(render(path));
                None
            }
        }
    }

    fn blocks(&mut self, p: &[Seg]) -> PolicyBlocks {
        let sp = key(p, "snapshot");
        let snapshot = self
            .node::<SnapshotPolicy>(&sp, &["target"])
            .map(|s| SnapshotPolicy {
                target: self.node(&key(&sp, "target"), &[]),
                ..s
            });
        PolicyBlocks {
            snapshot,
            retention: self.node(&key(p, "retention"), &[]),
            deletion_policy: self.node(&key(p, "deletionPolicy"), &[]),
            restore: self.node(&key(p, "restore"), &[]),
            vtbackup: self.node(&key(p, "vtbackup"), &[]),
            drill: self.node(&key(p, "drill"), &[]),
            pitr: self.node(&key(p, "pitr"), &[]),
        }
    }

    /// The keys of a string-keyed map at `p`, each read on its own by `read`.
    fn entries<T>(
        &mut self,
        p: &[Seg],
        mut read: impl FnMut(&mut Self, &[Seg]) -> T,
    ) -> BTreeMap<String, T> {
        let keys = self
            .node::<BTreeMap<String, IgnoredAny>>(p, &[])
            .unwrap_or_default();
        keys.into_keys()
            .map(|k| {
                let v = read(self, &key(p, &k));
                (k, v)
            })
            .collect()
    }

    fn cluster(&mut self, p: &[Seg]) -> ClusterConfig {
        let mut skip = BLOCKS.to_vec();
        skip.push("keyspaces");
        let head = match self.lenient::<ClusterConfig>(p, &skip) {
            Ok(Some(c)) => c,
            // Keep the index so that later paths stay right; mute checks on what is unread.
            _ if !self.is_mapping(p) => {
                self.unparsed.push(render(p));
                ClusterConfig::default()
            }
            // A required field missing or bad.
            Ok(None) | Err(Bad) => ClusterConfig {
                name: self.required(p, "name"),
                namespace: self.required(p, "namespace"),
                vtctld: self
                    .node::<String>(&key(p, "vtctld"), &[])
                    .unwrap_or_else(|| "auto".to_owned()),
                ..ClusterConfig::default()
            },
        };
        let keyspaces = self.entries(&key(p, "keyspaces"), Self::keyspace);
        ClusterConfig {
            keyspaces,
            ..head.with_policy(self.blocks(p))
        }
    }

    fn is_mapping(&mut self, p: &[Seg]) -> bool {
        matches!(
            self.probe::<BTreeMap<String, IgnoredAny>>(p, &BTreeSet::new()),
            Ok(Some(_))
        )
    }

    /// A required string field of a level that did not parse whole: its value if it reads,
    /// else empty and muted (a missing one is reported here unless serde already did).
    fn required(&mut self, p: &[Seg], field: &str) -> String {
        let fp = key(p, field);
        match self.probe::<String>(&fp, &BTreeSet::new()) {
            Ok(Some(s)) => return s,
            Ok(None) => {
                let message = format!("missing field `{field}`");
                let path = render(p);
                if !self
                    .errors
                    .iter()
                    .any(|(_, e)| e.path == path && e.message.starts_with(&message))
                {
                    self.errors.push((None, ConfigError { path, message }));
                }
            }
            Err(_) => {} // reported by the level's own read
        }
        self.unparsed.push(render(&fp));
        String::new()
    }

    fn keyspace(&mut self, p: &[Seg]) -> KeyspaceConfig {
        let mut skip = BLOCKS.to_vec();
        skip.push("shards");
        let head = self.node::<KeyspaceConfig>(p, &skip).unwrap_or_default();
        let shards = self.entries(&key(p, "shards"), Self::shard);
        KeyspaceConfig {
            shards,
            ..head.with_policy(self.blocks(p))
        }
    }

    fn shard(&mut self, p: &[Seg]) -> ShardConfig {
        let head = self.node::<ShardConfig>(p, &BLOCKS).unwrap_or_default();
        head.with_policy(self.blocks(p))
    }
}

fn key(p: &[Seg], k: &str) -> Vec<Seg> {
    let mut p = p.to_vec();
    p.push(Seg::Key(k.to_owned()));
    p
}

fn index(p: &[Seg], i: usize) -> Vec<Seg> {
    let mut p = p.to_vec();
    p.push(Seg::Index(i));
    p
}

/// A path as errors print it: `clusters[0].keyspaces.commerce`.
fn render(p: &[Seg]) -> String {
    let mut s = String::new();
    for seg in p {
        match seg {
            Seg::Key(k) if s.is_empty() => s.push_str(k),
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The key of `path`'s direct child the error is under, if it is under one.
fn child_key(path: &[Seg], e: &ProbeError) -> Option<String> {
    use serde_path_to_error::Segment;
    let mut segs = e.path().iter();
    for want in path {
        let same = match (want, segs.next()?) {
            (Seg::Key(k), Segment::Map { key }) => k == key,
            (Seg::Index(i), Segment::Seq { index }) => i == index,
            _ => false,
        };
        if !same {
            return None;
        }
    }
    match segs.next()? {
        Segment::Map { key } => Some(key.clone()),
        _ => None,
    }
}
