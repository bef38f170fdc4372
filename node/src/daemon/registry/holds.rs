//! The registry's contents in memory, and as the JSON of `holds.json`: parsed entry by
//! entry (an unreadable one kept verbatim), salvaged from a damaged file up to the damage.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::entry::{Entry, HoldPart, Unreadable};
use super::thaw::{Kept, keep};

/// The registry's contents: the entries it can read, and those it cannot; and, in memory
/// only, the descriptors kept open for their freezes.
#[derive(Debug, Default)]
pub struct Holds {
    pub entries: BTreeMap<String, Entry>,
    pub unreadable: BTreeMap<String, Unreadable>,
    pub kept: BTreeMap<String, Kept>,
}

impl Holds {
    pub(super) fn parse(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        let raw: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(bytes)?;
        let mut h = Self::default();
        for (lease, raw) in raw {
            h.insert_raw(lease, raw);
        }
        Ok(h)
    }

    pub(super) fn insert_raw(&mut self, lease: String, raw: Box<RawValue>) {
        match serde_json::from_str::<Entry>(raw.get()) {
            Ok(e) => {
                self.entries.insert(lease, e);
            }
            Err(e) => {
                self.unreadable.insert(
                    lease.clone(),
                    Unreadable {
                        lease,
                        raw,
                        reason: e.to_string(),
                    },
                );
            }
        }
    }

    /// The complete entries of a damaged file, up to the first damage.
    pub(super) fn salvage(bytes: &[u8]) -> Self {
        fn skip_ws(b: &[u8]) -> &[u8] {
            let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
            &b[n..]
        }
        fn next<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Option<(T, &'a [u8])> {
            let mut it = serde_json::Deserializer::from_slice(b).into_iter::<T>();
            let v = it.next()?.ok()?;
            Some((v, &b[it.byte_offset()..]))
        }
        let mut h = Self::default();
        let Some(mut rest) = skip_ws(bytes).strip_prefix(b"{") else {
            return h;
        };
        while let Some((lease, r)) = next::<String>(rest) {
            let Some(r) = skip_ws(r).strip_prefix(b":") else {
                break;
            };
            let Some((raw, r)) = next::<Box<RawValue>>(r) else {
                break;
            };
            h.insert_raw(lease, raw);
            match skip_ws(r).strip_prefix(b",") {
                Some(r) => rest = r,
                None => break,
            }
        }
        h
    }

    /// Opens the freezer files of every freeze recorded, readable entry or not.
    pub(super) fn keep_all(&mut self) {
        for e in self.entries.values().filter(|e| e.frozen()) {
            let k = keep(&e.lease, e.cgroup.as_ref(), e.fs_frozen.as_ref());
            self.kept.insert(e.lease.clone(), k);
        }
        for u in self.unreadable.values() {
            if let Some(h) = u.hold().filter(HoldPart::frozen) {
                let k = keep(&u.lease, h.cgroup.as_ref(), h.fs_frozen.as_ref());
                self.kept.insert(u.lease.clone(), k);
            }
        }
    }

    pub(super) fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Out<'a> {
            Entry(&'a Entry),
            Verbatim(&'a RawValue),
        }
        let out: BTreeMap<&str, Out<'_>> = self
            .entries
            .iter()
            .map(|(k, e)| (k.as_str(), Out::Entry(e)))
            .chain(
                self.unreadable
                    .iter()
                    .map(|(k, u)| (k.as_str(), Out::Verbatim(&u.raw))),
            )
            .collect();
        serde_json::to_vec_pretty(&out)
    }
}
