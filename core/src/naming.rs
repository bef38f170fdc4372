//! Naming facts from Vitess and vitess-operator.
//!
//! Sources: vitessio/vitess `go/vt/mysqlctl/mycnf_gen.go` (tablet directory `vt_%010d`,
//! binlog base `vt-%010d-bin`, relay-log base `vt-%010d-relay-bin`);
//! planetscale/vitess-operator `pkg/operator/vttablet/uid.go` (the UID formula; older
//! operators wrote the `planetscale.com/tablet-uid` label unpadded),
//! `pkg/operator/names/join.go` and `join_constraints.go` (object names),
//! `pkg/operator/vttablet/pod.go` (`PodName`; the data PVC has the same name).

use std::fmt;
use std::str::FromStr;

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

/// A Vitess tablet UID (`topodata.TabletAlias.uid`, a uint32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TabletUid(u32);

/// Why a string is not a tablet UID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TabletUidError {
    #[error("tablet UID is empty")]
    Empty,
    #[error("tablet UID {0:?} must contain only decimal digits")]
    NotDecimal(String),
    #[error("tablet UID {0:?} does not fit in 32 bits")]
    TooLarge(String),
}

impl TabletUid {
    pub const fn new(uid: u32) -> Self {
        Self(uid)
    }

    pub const fn get(self) -> u32 {
        self.0
    }

    /// The zero-padded form Vitess uses in paths and aliases: `%010d`.
    pub fn padded(self) -> String {
        format!("{:010}", self.0)
    }

    /// The tablet directory under VTDATAROOT: `vt_<uid %010d>`.
    pub fn tablet_dir_name(self) -> String {
        format!("vt_{:010}", self.0)
    }

    /// The prefix of this tablet's binlog and relay-log file names: `vt-<uid %010d>-`.
    pub fn log_file_prefix(self) -> String {
        format!("vt-{:010}-", self.0)
    }

    /// Parses a tablet directory name `vt_<10 digits>`; anything else is `None`.
    pub fn from_tablet_dir_name(name: &str) -> Option<Self> {
        let digits = name.strip_prefix("vt_")?;
        if digits.len() != 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse::<u32>().ok().map(Self)
    }
}

impl fmt::Display for TabletUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for TabletUid {
    type Err = TabletUidError;

    /// Accepts the padded (`0000000101`) and the unpadded (`101`) form.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(TabletUidError::Empty);
        }
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(TabletUidError::NotDecimal(s.to_owned()));
        }
        let trimmed = s.trim_start_matches('0');
        if trimmed.is_empty() {
            return Ok(Self(0));
        }
        trimmed
            .parse::<u32>()
            .map(Self)
            .map_err(|_| TabletUidError::TooLarge(s.to_owned()))
    }
}

/// A tablet alias `{cell, uid}`, printed `<cell>-<uid %010d>` (Vitess `topoproto`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TabletAlias {
    pub cell: String,
    pub uid: TabletUid,
}

impl TabletAlias {
    pub fn new(cell: impl Into<String>, uid: u32) -> Self {
        Self {
            cell: cell.into(),
            uid: TabletUid::new(uid),
        }
    }
}

impl fmt::Display for TabletAlias {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.cell, self.uid.padded())
    }
}

impl FromStr for TabletAlias {
    type Err = String;

    /// Parses `<cell>-<uid>`; the cell may itself contain `-`, the UID is after the last one.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (cell, uid) = s
            .rsplit_once('-')
            .ok_or_else(|| format!("tablet alias {s:?} has no '-'"))?;
        if cell.is_empty() {
            return Err(format!("tablet alias {s:?} has no cell"));
        }
        let uid = uid
            .parse::<TabletUid>()
            .map_err(|e| format!("tablet alias {s:?}: {e}"))?;
        Ok(Self {
            cell: cell.to_owned(),
            uid,
        })
    }
}

/// Serde in the printed form (`zone1-0000000101`) rather than the struct form, for records
/// kept as text (the node helper's hold registry): `#[serde(with = "alias_as_string")]`.
pub mod alias_as_string {
    use super::TabletAlias;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(a: &TabletAlias, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(a)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TabletAlias, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The label-safe form of a shard name as Vitess prints it (`-80` → `x-80`); a name that
/// is not a key range is kept as given (it then matches no label vtsnap wrote).
pub fn safe_shard_name(shard: &str) -> String {
    shard
        .parse::<KeyRange>()
        .map_or_else(|_| shard.to_owned(), |k| k.safe_name())
}

/// A shard key range as Vitess names shards: `-`, `-80`, `80-`, `40-80` (lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct KeyRange {
    pub start: String,
    pub end: String,
}

/// The longest label-safe shard name (`start-end`, an open bound written `x`): a Kubernetes
/// label value's limit, which the operator's `planetscale.com/shard` label on every tablet
/// Pod must meet, so no shard a cluster runs is longer (docs/design.md §2). Longer names are
/// refused before anything is compared or allocated for them.
pub const MAX_SAFE_NAME_LEN: usize = 63;

/// The length of the label-safe name of the key range `start-end`.
pub fn safe_name_len(start: &str, end: &str) -> usize {
    start.len().max(1) + 1 + end.len().max(1)
}

impl KeyRange {
    /// The operator's label-safe form: an empty bound becomes `x` (`-` → `x-x`, `-80` → `x-80`).
    pub fn safe_name(&self) -> String {
        let start = if self.start.is_empty() {
            "x"
        } else {
            &self.start
        };
        let end = if self.end.is_empty() { "x" } else { &self.end };
        format!("{start}-{end}")
    }

    /// The inverse of [`KeyRange::safe_name`]: `x-x` → `-`, `x-80` → `-80`, `80-x` → `80-`.
    /// A bare empty bound (`-80`) is refused: `safe_name` never writes one.
    pub fn from_safe_name(safe: &str) -> Result<Self, SafeNameError> {
        if safe.len() > MAX_SAFE_NAME_LEN {
            return Err(SafeNameError::TooLong(safe.len()));
        }
        let (start, end) = safe
            .split_once('-')
            .ok_or_else(|| SafeNameError::NoDash(safe.to_owned()))?;
        let bound = |b: &str| -> Result<String, SafeNameError> {
            match b {
                "" => Err(SafeNameError::EmptyBound(safe.to_owned())),
                "x" => Ok(String::new()),
                _ if b
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) =>
                {
                    Ok(b.to_owned())
                }
                _ => Err(SafeNameError::NotHex {
                    name: safe.to_owned(),
                    bound: b.to_owned(),
                }),
            }
        };
        let (start, end) = (bound(start)?, bound(end)?);
        if !start.is_empty() && !end.is_empty() && hex_cmp(&start, &end) != std::cmp::Ordering::Less
        {
            return Err(SafeNameError::NotBelow(safe.to_owned()));
        }
        Ok(Self { start, end })
    }
}

/// Why a string is not a shard SafeName.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SafeNameError {
    #[error("shard SafeName {0:?} is not <start>-<end> (x-80, 80-x, x-x)")]
    NoDash(String),
    #[error("shard SafeName {0:?} has an empty bound (an open bound is written x)")]
    EmptyBound(String),
    #[error("shard SafeName {name:?}: {bound:?} is neither x nor lowercase hex")]
    NotHex { name: String, bound: String },
    #[error("shard SafeName {0:?}: start must be below end")]
    NotBelow(String),
    #[error("shard SafeName is {0} characters long, over the {MAX_SAFE_NAME_LEN} of a label value")]
    TooLong(usize),
}

/// Why a string is not a shard key range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyRangeError {
    #[error("shard {0:?} is not a key range like -80, 80- or 40-80")]
    NoDash(String),
    #[error("shard {name:?}: {bound:?} is not lowercase hex")]
    NotHex { name: String, bound: String },
    #[error("shard {0:?}: start must be below end")]
    NotBelow(String),
    /// Only the length is named: the value itself may be megabytes.
    #[error(
        "shard key range {start_len} + {end_len} hex digits long: its label-safe name would \
         be {safe_len} characters, over the {MAX_SAFE_NAME_LEN} of a label value"
    )]
    TooLong {
        start_len: usize,
        end_len: usize,
        safe_len: usize,
    },
}

impl From<KeyRangeError> for String {
    fn from(e: KeyRangeError) -> Self {
        e.to_string()
    }
}

impl fmt::Display for KeyRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.start, self.end)
    }
}

impl FromStr for KeyRange {
    /// Callers print the reason; [`KeyRange::read`] gives it typed.
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::read(s).map_err(String::from)
    }
}

impl KeyRange {
    /// Parses a shard name as Vitess prints it (`-80`, `40-80`), refusing one whose
    /// label-safe name would be over [`MAX_SAFE_NAME_LEN`] before looking further.
    pub fn read(s: &str) -> Result<Self, KeyRangeError> {
        let (start, end) = s
            .split_once('-')
            .ok_or_else(|| KeyRangeError::NoDash(cut_for_message(s)))?;
        let safe_len = safe_name_len(start, end);
        if safe_len > MAX_SAFE_NAME_LEN {
            return Err(KeyRangeError::TooLong {
                start_len: start.len(),
                end_len: end.len(),
                safe_len,
            });
        }
        for b in [start, end] {
            if !b
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
            {
                return Err(KeyRangeError::NotHex {
                    name: s.to_owned(),
                    bound: b.to_owned(),
                });
            }
        }
        if !start.is_empty() && !end.is_empty() && hex_cmp(start, end) != std::cmp::Ordering::Less {
            return Err(KeyRangeError::NotBelow(s.to_owned()));
        }
        Ok(Self {
            start: start.to_owned(),
            end: end.to_owned(),
        })
    }
}

/// A string with no dash may be any length: a message shows its start and its length.
fn cut_for_message(s: &str) -> String {
    match s.char_indices().nth(MAX_SAFE_NAME_LEN) {
        None => s.to_owned(),
        Some((at, _)) => format!("{}… ({} bytes)", &s[..at], s.len()),
    }
}

/// Compares key-range bounds as byte strings (shorter is padded with zeros), digit by digit:
/// no padded copies.
fn hex_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn digits(s: &str) -> impl Iterator<Item = u8> + '_ {
        s.bytes().chain(std::iter::repeat(b'0'))
    }
    digits(a)
        .zip(digits(b))
        .take(a.len().max(b.len()))
        .map(|(x, y)| x.cmp(&y))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

impl TryFrom<String> for KeyRange {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<KeyRange> for String {
    fn from(k: KeyRange) -> Self {
        k.to_string()
    }
}

/// The tablet UID vitess-operator assigns: the first 4 bytes (big-endian) of the md5 of
/// `"<cell> <keyspace> <keyRange> <poolType> <index>\n"` (Go's `fmt.Fprintln`), index from 1.
pub fn tablet_uid(
    cell: &str,
    keyspace: &str,
    shard: &KeyRange,
    pool_type: &str,
    index: u32,
) -> TabletUid {
    let line = format!("{cell} {keyspace} {shard} {pool_type} {index}\n");
    let sum = Md5::digest(line.as_bytes());
    TabletUid::new(u32::from_be_bytes([sum[0], sum[1], sum[2], sum[3]]))
}

/// The operator's name hash: md5 over each part followed by a NUL byte, first 4 bytes in hex.
pub fn name_hash(parts: &[&str]) -> String {
    let mut h = Md5::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    let sum = h.finalize();
    sum[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// `names.JoinWithConstraints` with the default constraints (253 characters, lowercase
/// alphanumeric first character): parts joined by `-` plus the hash of the original parts;
/// other characters become `-`, upper case is lowered, and an over-long name is cut and
/// marked with `---` before the hash.
pub fn join_name(parts: &[&str]) -> String {
    join_with_limit(parts, 253)
}

/// [`join_name`] with another length limit (63 for labels and Services).
pub fn join_with_limit(parts: &[&str], max_len: usize) -> String {
    if parts.is_empty() {
        return String::new();
    }
    let hash = name_hash(parts);
    let mut new: Vec<String> = parts
        .iter()
        .map(|p| {
            p.chars()
                .map(|c| match c {
                    'a'..='z' | '0'..='9' | '-' => c,
                    'A'..='Z' => c.to_ascii_lowercase(),
                    _ => '-',
                })
                .collect()
        })
        .collect();
    if !new[0].starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        new[0] = format!("x{}", new[0]);
    }
    let joined = new.join("-");
    let predicted = joined.len() + 1 + hash.len();
    if predicted <= max_len {
        return format!("{joined}-{hash}");
    }
    let cut = predicted - max_len + 2;
    format!("{}---{hash}", &joined[..joined.len() - cut])
}

/// The name of a tablet's Pod, which is also the name of its data PVC.
pub fn tablet_pod_name(cluster: &str, alias: &TabletAlias) -> String {
    join_name(&[cluster, "vttablet", &alias.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_name_becomes_its_label_form_or_stays_as_given() {
        assert_eq!(safe_shard_name("-"), "x-x");
        assert_eq!(safe_shard_name("-80"), "x-80");
        assert_eq!(safe_shard_name("40-80"), "40-80");
        assert_eq!(safe_shard_name("not a range"), "not a range");
    }

    #[test]
    fn join_matches_the_operator_change_detection_vectors() {
        // pkg/operator/names/join_test.go: TestJoinHash and TestJoinSalt (salt = leading parts
        // of the hash only).
        assert_eq!(join_name(&["hello", "world"]), "hello-world-1dd41005");
        assert_eq!(name_hash(&["salt1", "salt2", "hello", "world"]), "462f1b88");
        assert_eq!(name_hash(&["salt1-salt2", "hello", "world"]), "c65378ee");
    }

    #[test]
    fn join_is_unique_where_the_operator_says_so() {
        assert_ne!(
            join_name(&["one-two", "three-four"]),
            join_name(&["one", "two-three-four"])
        );
        assert_ne!(
            join_name(&["one", "two", "three"]),
            join_name(&["one", "three", "two"])
        );
        assert!(join_name(&["one", "two", "three"]).starts_with("one-two-three-"));
    }

    #[test]
    fn join_cuts_long_names_and_fixes_characters() {
        let long = "a".repeat(300);
        let n = join_name(&[&long, "b"]);
        assert_eq!(n.len(), 253);
        assert!(n.contains("---"));
        assert_eq!(
            join_name(&["Hello_World"]),
            format!("hello-world-{}", name_hash(&["Hello_World"]))
        );
        assert!(join_name(&["-x"]).starts_with("x-x-"));
    }

    #[test]
    fn tablet_uid_follows_the_operator_formula() {
        // md5("zone1 commerce - replica 1\n"), computed independently with coreutils md5sum.
        let shard: KeyRange = "-".parse().unwrap();
        let uid = tablet_uid("zone1", "commerce", &shard, "replica", 1);
        let want = u32::from_str_radix(&EXPECTED_ZONE1_COMMERCE_REPLICA_1[..8], 16).unwrap();
        assert_eq!(uid.get(), want);
        // Every tuple element matters.
        assert_ne!(uid, tablet_uid("zone1", "commerce", &shard, "replica", 2));
        assert_ne!(uid, tablet_uid("zone1", "commerce", &shard, "rdonly", 1));
        assert_ne!(uid, tablet_uid("zone2", "commerce", &shard, "replica", 1));
    }

    /// `printf 'zone1 commerce - replica 1\n' | md5sum`
    const EXPECTED_ZONE1_COMMERCE_REPLICA_1: &str =
        include_str!("testdata/md5_zone1_commerce_replica_1.txt");

    #[test]
    fn pod_names_hash_the_alias_as_one_part() {
        let alias = TabletAlias::new("zone1", 2_548_885_007);
        let name = tablet_pod_name("example", &alias);
        assert_eq!(
            name,
            format!(
                "example-vttablet-zone1-2548885007-{}",
                name_hash(&["example", "vttablet", "zone1-2548885007"])
            )
        );
    }

    #[test]
    fn key_ranges_parse_and_render_safe_names() {
        for (s, safe) in [
            ("-", "x-x"),
            ("-80", "x-80"),
            ("80-", "80-x"),
            ("40-80", "40-80"),
        ] {
            let k: KeyRange = s.parse().unwrap();
            assert_eq!(k.to_string(), s);
            assert_eq!(k.safe_name(), safe);
        }
        assert!("80".parse::<KeyRange>().is_err());
        assert!("80-40".parse::<KeyRange>().is_err());
        assert!("-8G".parse::<KeyRange>().is_err());
        assert!("-80".parse::<KeyRange>().unwrap() < "80-".parse::<KeyRange>().unwrap());
    }

    #[test]
    fn safe_names_map_back_to_key_ranges() {
        for (s, safe) in [
            ("-", "x-x"),
            ("-80", "x-80"),
            ("80-", "80-x"),
            ("40-80", "40-80"),
            ("-0083", "x-0083"),
        ] {
            let k: KeyRange = s.parse().unwrap();
            assert_eq!(KeyRange::from_safe_name(safe), Ok(k.clone()), "{safe}");
            assert_eq!(KeyRange::from_safe_name(&k.safe_name()), Ok(k));
        }
    }

    #[test]
    fn refuses_what_safe_name_never_writes() {
        let err = |s: &str| KeyRange::from_safe_name(s).unwrap_err();
        assert_eq!(err("x80"), SafeNameError::NoDash("x80".into()));
        assert_eq!(err("-80"), SafeNameError::EmptyBound("-80".into()));
        assert_eq!(err("80-"), SafeNameError::EmptyBound("80-".into()));
        assert!(matches!(err("x-8G"), SafeNameError::NotHex { bound, .. } if bound == "8G"));
        assert!(matches!(err("X-80"), SafeNameError::NotHex { bound, .. } if bound == "X"));
        assert!(matches!(err("x-x-x"), SafeNameError::NotHex { bound, .. } if bound == "x-x"));
        assert_eq!(err("80-40"), SafeNameError::NotBelow("80-40".into()));
        assert_eq!(err("80-80"), SafeNameError::NotBelow("80-80".into()));
    }

    #[test]
    fn a_key_range_bound_of_65536_digits_is_refused_by_its_length_not_a_panic() {
        // Round three item 7: `'aa'*32768 + '-bb'` panicked in `hex_cmp` ("Formatting
        // argument out of range"), from `validate`, `schedule plan`, `doctor`, `backup`.
        let long = format!("{}-bb", "aa".repeat(32_768));
        let e = KeyRange::read(&long).unwrap_err();
        assert_eq!(
            e,
            KeyRangeError::TooLong {
                start_len: 65_536,
                end_len: 2,
                safe_len: 65_539
            }
        );
        let m = long.parse::<KeyRange>().unwrap_err();
        assert!(m.contains("65539 characters, over the 63"), "{m}");
        assert!(m.len() < 200, "the message must not echo the value: {m}");
        let safe = format!("{}-bb", "aa".repeat(32_768));
        assert_eq!(
            KeyRange::from_safe_name(&safe),
            Err(SafeNameError::TooLong(65_539))
        );
        assert_eq!(safe_shard_name(&long), long);
        let nodash = "a".repeat(100_000);
        let m = nodash.parse::<KeyRange>().unwrap_err();
        assert!(m.contains("(100000 bytes)") && m.len() < 200, "{m}");
    }

    #[test]
    fn a_safe_name_of_63_characters_is_the_longest_accepted() {
        let (a, b) = (
            format!("1{}", "0".repeat(30)),
            format!("2{}", "0".repeat(30)),
        );
        let k = KeyRange::read(&format!("{a}-{b}")).unwrap();
        assert_eq!(k.safe_name().len(), MAX_SAFE_NAME_LEN);
        assert_eq!(KeyRange::from_safe_name(&k.safe_name()), Ok(k));
        assert!(matches!(
            KeyRange::read(&format!("{a}-{b}0")),
            Err(KeyRangeError::TooLong { safe_len: 64, .. })
        ));
        assert_eq!(
            KeyRange::from_safe_name(&format!("{a}-{b}0")),
            Err(SafeNameError::TooLong(64))
        );
        // An open bound counts as its `x`.
        let open = "1".repeat(61);
        assert!(KeyRange::read(&format!("{open}-")).is_ok());
        assert!(KeyRange::read(&format!("{open}1-")).is_err());
        assert!(KeyRange::read(&format!("-{open}1")).is_err());
    }

    #[test]
    fn bounds_compare_as_zero_padded_bytes() {
        use std::cmp::Ordering::{Equal, Greater, Less};
        assert_eq!(hex_cmp("8", "80"), Equal);
        assert_eq!(hex_cmp("80", "8"), Equal);
        assert_eq!(hex_cmp("7f", "8"), Less);
        assert_eq!(hex_cmp("8", "7f"), Greater);
        assert_eq!(hex_cmp("8", "81"), Less);
        assert_eq!(hex_cmp("", "00"), Equal);
        assert_eq!(
            KeyRange::read("80-8"),
            Err(KeyRangeError::NotBelow("80-8".into()))
        );
        assert!(KeyRange::read("8-81").is_ok());
    }

    #[test]
    fn aliases_round_trip() {
        let a: TabletAlias = "us-east-1a-0000000101".parse().unwrap();
        assert_eq!(a, TabletAlias::new("us-east-1a", 101));
        assert_eq!(a.to_string(), "us-east-1a-0000000101");
        assert_eq!(
            "zone1-101".parse::<TabletAlias>().unwrap().to_string(),
            "zone1-0000000101"
        );
        assert!("0000000101".parse::<TabletAlias>().is_err());
    }

    #[test]
    fn parses_padded_and_unpadded_forms_alike() {
        assert_eq!("0000000101".parse::<TabletUid>(), Ok(TabletUid::new(101)));
        assert_eq!("101".parse::<TabletUid>(), Ok(TabletUid::new(101)));
        assert_eq!(
            "4294967295".parse::<TabletUid>(),
            Ok(TabletUid::new(u32::MAX))
        );
        assert_eq!(
            "00000000004294967295".parse::<TabletUid>(),
            Ok(TabletUid::new(u32::MAX))
        );
    }

    #[test]
    fn rejects_what_is_not_a_uid() {
        assert_eq!("".parse::<TabletUid>(), Err(TabletUidError::Empty));
        assert!(matches!(
            "-1".parse::<TabletUid>(),
            Err(TabletUidError::NotDecimal(_))
        ));
        assert!(matches!(
            "12a".parse::<TabletUid>(),
            Err(TabletUidError::NotDecimal(_))
        ));
        assert!(matches!(
            "4294967296".parse::<TabletUid>(),
            Err(TabletUidError::TooLarge(_))
        ));
    }

    #[test]
    fn renders_vitess_paths() {
        let uid = TabletUid::new(2_548_885_007);
        assert_eq!(uid.tablet_dir_name(), "vt_2548885007");
        assert_eq!(uid.log_file_prefix(), "vt-2548885007-");
        assert_eq!(TabletUid::new(7).tablet_dir_name(), "vt_0000000007");
    }

    #[test]
    fn tablet_dir_names_must_be_exactly_ten_digits() {
        assert_eq!(
            TabletUid::from_tablet_dir_name("vt_0000000101"),
            Some(TabletUid::new(101))
        );
        assert_eq!(TabletUid::from_tablet_dir_name("vt_101"), None);
        assert_eq!(TabletUid::from_tablet_dir_name("vt_00000001011"), None);
        assert_eq!(TabletUid::from_tablet_dir_name("vt_000000010x"), None);
        // 10 digits that overflow u32 are not a Vitess tablet directory either.
        assert_eq!(TabletUid::from_tablet_dir_name("vt_9999999999"), None);
    }

    #[test]
    fn an_alias_as_string_reads_and_writes_the_printed_form() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct R {
            #[serde(with = "alias_as_string")]
            a: TabletAlias,
        }
        let r = R {
            a: TabletAlias::new("zone1", 101),
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(text, r#"{"a":"zone1-0000000101"}"#);
        assert_eq!(serde_json::from_str::<R>(&text).unwrap(), r);
        assert!(serde_json::from_str::<R>(r#"{"a":"zone1"}"#).is_err());
    }
}
