//! GTID sets kept (not only checked), with the one operation coverage needs: "is every
//! transaction of `a` in `b`".
//!
//! - MySQL 5.6+ (`MySQL56` positions, `@@global.gtid_purged`): per source (`uuid`, or
//!   `uuid:tag` on MySQL 8.4), a set of transaction numbers kept as sorted, disjoint,
//!   non-adjacent intervals. Text as the server prints it: elements separated by `,` and
//!   possibly a newline, `uuid:1-5:7:tag:1-3` (`mysql56_gtid_set.go` in Vitess, MySQL's
//!   `Gtid_set::to_string`).
//! - MariaDB (`MariaDB` positions, `BINLOG_GTID_POS`, `@@gtid_current_pos`): per replication
//!   domain, the last GTID `domain-server-sequence`; a domain holds every sequence up to it.

use std::collections::BTreeMap;

use crate::snapshot::{GtidError, GtidFlavor};

/// The transaction numbers of one MySQL source: sorted, disjoint, non-adjacent `[lo, hi]`.
pub type Intervals = Vec<(u64, u64)>;

/// How a set's text is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Text {
    /// As Vitess encodes a position (the snapshot's annotations): nothing but the set.
    Strict,
    /// As a server prints a set (`@@global.gtid_purged`): whitespace and newlines around
    /// elements are allowed.
    Server,
}

/// A GTID set of one flavor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GtidSet {
    /// Source (`uuid` or `uuid:tag`, lowercase) → its transactions.
    Mysql56(BTreeMap<String, Intervals>),
    /// Domain → (server id, sequence) of its last GTID.
    Mariadb(BTreeMap<u32, (u32, u64)>),
}

fn element_error(element: &str, why: &'static str) -> GtidError {
    GtidError::Element {
        element: element.to_owned(),
        why,
    }
}

fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// MySQL 8.4's GTID tag: `[a-z_][a-z0-9_]{0,31}`.
fn is_tag(s: &str) -> bool {
    let mut b = s.bytes();
    s.len() <= 32
        && b.next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == b'_')
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
}

fn interval(s: &str) -> Result<(u64, u64), &'static str> {
    let (lo, hi) = s.split_once('-').unwrap_or((s, s));
    match (number(lo), number(hi)) {
        (Some(0), _) => Err("an interval starts at 1"),
        (Some(lo), Some(hi)) if lo <= hi => Ok((lo, hi)),
        (Some(_), Some(_)) => Err("an interval ends before it starts"),
        _ => Err("an interval is N or N-M"),
    }
}

/// Sorts and merges overlapping or adjacent intervals.
pub fn normalize(mut v: Intervals) -> Intervals {
    v.sort_unstable();
    let mut out: Intervals = Vec::with_capacity(v.len());
    for (lo, hi) in v {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

impl GtidSet {
    /// The empty set of a flavor.
    pub fn empty(flavor: GtidFlavor) -> Self {
        match flavor {
            GtidFlavor::Mysql56 => Self::Mysql56(BTreeMap::new()),
            GtidFlavor::Mariadb => Self::Mariadb(BTreeMap::new()),
        }
    }

    pub fn flavor(&self) -> GtidFlavor {
        match self {
            Self::Mysql56(_) => GtidFlavor::Mysql56,
            Self::Mariadb(_) => GtidFlavor::Mariadb,
        }
    }

    /// A Vitess position, `<flavor>/<set>` (what the snapshot's annotations hold), read
    /// as `text` says.
    pub fn parse_position(s: &str, text: Text) -> Result<Self, GtidError> {
        let (prefix, set) = s.split_once('/').ok_or(GtidError::NoFlavor)?;
        let flavor = match prefix {
            "MySQL56" => GtidFlavor::Mysql56,
            "MariaDB" => GtidFlavor::Mariadb,
            other => return Err(GtidError::UnknownFlavor(other.to_owned())),
        };
        Self::parse(flavor, set, text)
    }

    /// A bare set: the empty text is the empty set (a server that executed nothing).
    pub fn parse(flavor: GtidFlavor, set: &str, text: Text) -> Result<Self, GtidError> {
        let elements: Vec<&str> = match text {
            Text::Strict if set.is_empty() => Vec::new(),
            Text::Strict => set.split(',').collect(),
            Text::Server if set.trim().is_empty() => Vec::new(),
            Text::Server => set.split(',').map(str::trim).collect(),
        };
        match flavor {
            GtidFlavor::Mysql56 => {
                let mut sources: BTreeMap<String, Intervals> = BTreeMap::new();
                for e in elements.iter().copied() {
                    let mut parts = e.split(':');
                    let uuid = parts
                        .next()
                        .filter(|u| is_uuid(u))
                        .ok_or_else(|| element_error(e, "does not start with a server UUID"))?
                        .to_ascii_lowercase();
                    let mut source = uuid.clone();
                    let mut intervals: usize = 0;
                    for p in parts {
                        if is_tag(p) {
                            source = format!("{uuid}:{p}");
                            continue;
                        }
                        let iv = interval(p).map_err(|why| element_error(e, why))?;
                        sources.entry(source.clone()).or_default().push(iv);
                        intervals += 1;
                    }
                    if intervals == 0 {
                        return Err(element_error(e, "has no interval"));
                    }
                }
                Ok(Self::Mysql56(
                    sources
                        .into_iter()
                        .map(|(k, v)| (k, normalize(v)))
                        .collect(),
                ))
            }
            GtidFlavor::Mariadb => {
                let mut domains = BTreeMap::new();
                for e in elements.iter().copied() {
                    let parts: Vec<&str> = e.split('-').collect();
                    let [d, s, q] = parts[..] else {
                        return Err(element_error(e, "is not domain-server-sequence"));
                    };
                    let small = |x: &str| number(x).and_then(|n| u32::try_from(n).ok());
                    let (Some(d), Some(s), Some(q)) = (small(d), small(s), number(q)) else {
                        return Err(element_error(
                            e,
                            "domain and server are 32-bit, sequence 64-bit decimals",
                        ));
                    };
                    if domains.insert(d, (s, q)).is_some() {
                        return Err(element_error(e, "names its domain twice"));
                    }
                }
                Ok(Self::Mariadb(domains))
            }
        }
    }

    /// What of `self` is not in `other` (same flavor), as text; empty when `self ⊆ other`.
    /// For MariaDB, a domain of `self` is missing from `other` when `other` has not reached
    /// its sequence.
    pub fn missing_from(&self, other: &GtidSet) -> Option<String> {
        match (self, other) {
            (Self::Mysql56(a), Self::Mysql56(b)) => {
                let mut out = Vec::new();
                for (source, ivs) in a {
                    let have = b.get(source).map(Vec::as_slice).unwrap_or(&[]);
                    uncovered(ivs, have, |mlo, mhi| {
                        out.push(if mlo == mhi {
                            format!("{source}:{mlo}")
                        } else {
                            format!("{source}:{mlo}-{mhi}")
                        });
                    });
                }
                Some(out.join(","))
            }
            (Self::Mariadb(a), Self::Mariadb(b)) => {
                let out: Vec<String> = a
                    .iter()
                    .filter(|(d, (_, seq))| b.get(d).is_none_or(|(_, have)| have < seq))
                    .map(|(d, (s, seq))| format!("{d}-{s}-{seq}"))
                    .collect();
                Some(out.join(","))
            }
            _ => None,
        }
    }
}

impl GtidSet {
    /// Whether every GTID of `self` is in `other` (never across flavors).
    pub fn is_subset_of(&self, other: &GtidSet) -> bool {
        self.missing_from(other).is_some_and(|m| m.is_empty())
    }

    /// Every GTID of either (MySQL sets only: a MariaDB position is not a set); `None`
    /// across flavors or for MariaDB.
    pub fn union(&self, other: &GtidSet) -> Option<GtidSet> {
        let (Self::Mysql56(a), Self::Mysql56(b)) = (self, other) else {
            return None;
        };
        let mut out = a.clone();
        for (source, ivs) in b {
            let merged = out.entry(source.clone()).or_default();
            merged.extend_from_slice(ivs);
            *merged = normalize(std::mem::take(merged));
        }
        Some(Self::Mysql56(out))
    }
}

impl std::fmt::Display for GtidSet {
    /// As a server prints it (`uuid:1-5:7,uuid2:1`; MariaDB `d-s-n,…`), sources sorted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = match self {
            Self::Mysql56(m) => m
                .iter()
                .map(|(source, ivs)| {
                    let ivs: Vec<String> = ivs
                        .iter()
                        .map(|&(lo, hi)| {
                            if lo == hi {
                                lo.to_string()
                            } else {
                                format!("{lo}-{hi}")
                            }
                        })
                        .collect();
                    format!("{source}:{}", ivs.join(":"))
                })
                .collect(),
            Self::Mariadb(m) => m.iter().map(|(d, (s, n))| format!("{d}-{s}-{n}")).collect(),
        };
        f.write_str(&parts.join(","))
    }
}

/// Calls `emit` with each part of the normalized `want` outside the normalized `have`, in
/// one merge walk over both: `have` is an iterator, so nothing is rescanned (100k intervals
/// a side once took 1.5 s per snapshot, rescanning `have` per interval of `want`).
fn uncovered<'a>(
    want: impl IntoIterator<Item = &'a (u64, u64)>,
    have: impl IntoIterator<Item = &'a (u64, u64)>,
    mut emit: impl FnMut(u64, u64),
) {
    let mut have = have.into_iter().peekable();
    for &(lo, hi) in want {
        let mut next = lo;
        loop {
            match have.peek() {
                // Wholly before `next`, so before every later interval of `want` too.
                Some(&&(_, hhi)) if hhi < next => {
                    have.next();
                }
                Some(&&(hlo, hhi)) if hlo <= hi => {
                    if hlo > next {
                        emit(next, hlo - 1);
                    }
                    if hhi >= hi {
                        // Covers the rest; kept, as it may cover the next interval too.
                        break;
                    }
                    next = hhi + 1;
                    have.next();
                }
                _ => {
                    emit(next, hi);
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "4f22ab58-82db-22f2-af44-d91bb0530673";

    fn my(s: &str) -> GtidSet {
        GtidSet::parse(GtidFlavor::Mysql56, s, Text::Server).unwrap()
    }

    #[test]
    fn reads_the_servers_text_with_newlines_tags_and_unsorted_intervals() {
        let s = my(&format!("{A}:7-9:1-5:6,\n{B}:3:tx:1-2"));
        let GtidSet::Mysql56(m) = &s else { panic!() };
        assert_eq!(m[A], vec![(1, 9)]);
        assert_eq!(m[B], vec![(3, 3)]);
        assert_eq!(m[&format!("{B}:tx")], vec![(1, 2)]);
        // A tag may start with `_` and go on with digits and `_`; not with a digit.
        let tags = my(&format!("{A}:_t:1:tx_9:2"));
        let GtidSet::Mysql56(m) = &tags else { panic!() };
        assert_eq!(m[&format!("{A}:_t")], vec![(1, 1)]);
        assert_eq!(m[&format!("{A}:tx_9")], vec![(2, 2)]);
        assert!(GtidSet::parse(GtidFlavor::Mysql56, &format!("{A}:9tx:1"), Text::Server).is_err());
        // Each bad interval says what is wrong with it.
        for (bad, why) in [
            ("5-3", "ends before it starts"),
            ("0-3", "starts at 1"),
            ("1-x", "N or N-M"),
        ] {
            let e = GtidSet::parse(GtidFlavor::Mysql56, &format!("{A}:{bad}"), Text::Server)
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(my(""), GtidSet::empty(GtidFlavor::Mysql56));
        assert_eq!(
            my(&format!("{}:1", A.to_uppercase())),
            my(&format!("{A}:1"))
        );
        for bad in [
            A.to_string(),
            format!("{A}:0-3"),
            format!("{A}:5-3"),
            "nope:1".to_owned(),
            // a UUID's shape, not hex; hex, not a UUID's shape
            "3e11fa47-71ca-11e1-9e33-c80aa942956z:1".to_owned(),
            "3e11fa4771ca11e19e33c80aa9429562:1".to_owned(),
            format!("{A}:1,,{B}:1"),
        ] {
            assert!(
                GtidSet::parse(GtidFlavor::Mysql56, &bad, Text::Server).is_err(),
                "{bad:?} was read"
            );
        }
    }

    #[test]
    fn a_set_prints_as_a_server_does_and_reads_back() {
        let s = my(&format!("{B}:3,{A}:7-9:1-5:6:11,{A}:tx:2"));
        assert_eq!(s.to_string(), format!("{A}:1-9:11,{A}:tx:2,{B}:3"));
        assert_eq!(my(&s.to_string()), s);
        assert_eq!(my("").to_string(), "");
        let m = GtidSet::parse(GtidFlavor::Mariadb, "1-2-30,0-1-100", Text::Strict).unwrap();
        assert_eq!(m.to_string(), "0-1-100,1-2-30");
    }

    #[test]
    fn union_and_subset_are_per_source() {
        let a = my(&format!("{A}:1-5"));
        let b = my(&format!("{A}:6-9,{B}:1"));
        let u = a.union(&b).unwrap();
        assert_eq!(u, my(&format!("{A}:1-9,{B}:1")));
        assert!(a.is_subset_of(&u) && b.is_subset_of(&u));
        assert!(!u.is_subset_of(&a));
        let m = GtidSet::parse(GtidFlavor::Mariadb, "0-1-5", Text::Strict).unwrap();
        assert_eq!(a.union(&m), None);
        assert!(!a.is_subset_of(&m) && !m.is_subset_of(&a));
    }

    #[test]
    fn mariadb_sets_are_per_domain_and_refuse_a_domain_twice() {
        let s = GtidSet::parse(GtidFlavor::Mariadb, "0-1-100, 1-2-5", Text::Server).unwrap();
        assert_eq!(
            s,
            GtidSet::Mariadb(BTreeMap::from([(0, (1, 100)), (1, (2, 5))]))
        );
        assert!(GtidSet::parse(GtidFlavor::Mariadb, "0-1-100,0-2-101", Text::Server).is_err());
        assert!(GtidSet::parse(GtidFlavor::Mariadb, "0-1", Text::Server).is_err());
        assert!(GtidSet::parse(GtidFlavor::Mariadb, "4294967296-1-1", Text::Server).is_err());
        // Only digits: Rust's own parser would take a sign.
        for signed in ["+0-1-1", "0-+1-1", "0-1-+1", "0-1-"] {
            assert!(
                GtidSet::parse(GtidFlavor::Mariadb, signed, Text::Server).is_err(),
                "{signed}"
            );
        }
        assert!(GtidSet::parse(GtidFlavor::Mysql56, &format!("{A}:+1"), Text::Server).is_err());
        let b = GtidSet::parse(GtidFlavor::Mariadb, "0-3-120", Text::Server).unwrap();
        assert_eq!(s.missing_from(&b).unwrap(), "1-2-5");
        assert_eq!(b.missing_from(&s).unwrap(), "0-3-120");
        let empty = GtidSet::empty(GtidFlavor::Mariadb);
        // The empty text is the empty set, strictly read too (a server that executed
        // nothing); the strict reading takes no blank around it.
        for flavor in [GtidFlavor::Mariadb, GtidFlavor::Mysql56] {
            assert_eq!(
                GtidSet::parse(flavor, "", Text::Strict).unwrap(),
                GtidSet::empty(flavor)
            );
            assert!(GtidSet::parse(flavor, " ", Text::Strict).is_err());
        }
        assert_eq!(empty.missing_from(&s).unwrap(), "");
        assert_eq!(s.missing_from(&my("")), None, "flavors differ");
    }

    #[test]
    fn names_exactly_what_is_missing() {
        let purged = my(&format!("{A}:1-10,{B}:1-4"));
        let executed = my(&format!("{A}:1-3:5-8,{B}:1-9"));
        assert_eq!(
            purged.missing_from(&executed).unwrap(),
            format!("{A}:4,{A}:9-10")
        );
        assert_eq!(executed.missing_from(&purged).unwrap(), format!("{B}:5-9"));
    }

    #[test]
    fn a_walk_of_100k_intervals_a_side_reads_each_once() {
        // Round three item 12: `missing_from` rescanned `have` for each interval of `want`,
        // n²/2 steps for n interleaved intervals. Counted, not timed: every interval of
        // either side is pulled once.
        let n: u64 = 100_000;
        let want: Intervals = (0..n).map(|i| (4 * i + 1, 4 * i + 2)).collect();
        let have: Intervals = (0..n).map(|i| (4 * i + 2, 4 * i + 3)).collect();
        let (mut pulled_want, mut pulled_have, mut emitted) = (0u64, 0u64, 0u64);
        uncovered(
            want.iter().inspect(|_| pulled_want += 1),
            have.iter().inspect(|_| pulled_have += 1),
            |lo, hi| {
                assert_eq!((lo % 4, lo), (1, hi));
                emitted += 1;
            },
        );
        assert_eq!((pulled_want, pulled_have, emitted), (n, n, n));
        // The same through the set: each want interval keeps its first transaction.
        let text = |v: &Intervals| {
            let ivs: Vec<String> = v.iter().map(|(l, h)| format!("{l}-{h}")).collect();
            format!("{A}:{}", ivs.join(":"))
        };
        let missing = my(&text(&want)).missing_from(&my(&text(&have))).unwrap();
        assert_eq!(missing.split(',').count(), 100_000);
        assert!(missing.starts_with(&format!("{A}:1,{A}:5,")));
    }

    #[test]
    fn one_interval_of_have_may_cover_several_of_want() {
        let mut got = Vec::new();
        uncovered(
            &[(1, 2), (4, 5), (7, 9), (20, 20)],
            &[(1, 8), (10, 30)],
            |lo, hi| got.push((lo, hi)),
        );
        assert_eq!(got, [(9, 9)]);
        got.clear();
        uncovered(
            &[(5, 30)],
            &[(1, 2), (8, 9), (12, 12), (40, 50)],
            |lo, hi| {
                got.push((lo, hi));
            },
        );
        assert_eq!(got, [(5, 7), (10, 11), (13, 30)]);
        got.clear();
        uncovered(
            &[(u64::MAX - 1, u64::MAX)],
            &[(1, u64::MAX - 1)],
            |lo, hi| {
                got.push((lo, hi));
            },
        );
        assert_eq!(got, [(u64::MAX, u64::MAX)]);
    }

    /// A set as the model sees it: every (source, transaction) pair.
    fn model(pairs: &BTreeSet<(usize, u64)>) -> String {
        let sources = [A, B];
        let mut by: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        for &(s, n) in pairs {
            by.entry(s).or_default().push(n);
        }
        by.iter()
            .map(|(s, ns)| {
                // one interval per number, in reverse: the parser must sort and merge
                let ivs: Vec<String> = ns.iter().rev().map(u64::to_string).collect();
                format!("{}:{}", sources[*s], ivs.join(":"))
            })
            .collect::<Vec<_>>()
            .join(",\n")
    }

    proptest! {
        #[test]
        fn subset_agrees_with_the_model(
            a in proptest::collection::btree_set((0usize..2, 1u64..40), 0..30),
            b in proptest::collection::btree_set((0usize..2, 1u64..40), 0..60),
        ) {
            let (sa, sb) = (my(&model(&a)), my(&model(&b)));
            let missing = sa.missing_from(&sb).unwrap();
            prop_assert_eq!(missing.is_empty(), a.is_subset(&b), "missing {:?}", missing);
            // and what it names is exactly a \ b
            let named: usize = missing
                .split(',')
                .filter(|e| !e.is_empty())
                .map(|e| {
                    let iv = e.rsplit(':').next().unwrap();
                    let (lo, hi) = iv.split_once('-').unwrap_or((iv, iv));
                    hi.parse::<usize>().unwrap() - lo.parse::<usize>().unwrap() + 1
                })
                .sum();
            prop_assert_eq!(named, a.difference(&b).count());
        }
    }
}
