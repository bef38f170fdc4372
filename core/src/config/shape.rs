//! The document's shape, checked before it is read into the model: no mapping holds a key
//! twice, and its aliases do not expand it past [`MAX_VALUES`].
//!
//! Why: a YAML mapping read into a map keeps the last of two equal keys without a word
//! (`keyspaces: {commerce: {…requireDrill: true}, commerce: {…}}`), and an alias is expanded
//! every time it is read, so a 200 KB file whose keyspaces alias one long list reads as
//! gigabytes. The walk counts values as it goes and stops at the bound, so a refused file
//! costs no more than an accepted one.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};

use super::{ConfigError, MAX_BYTES};

/// The most values (scalars, lists and mappings, keys included) a config may read as, its
/// aliases expanded: twice [`MAX_BYTES`]. A file of that size written out holds at most one
/// value a byte (`{a,b,…}`: a key and its empty value in two), so only aliases reach it.
pub const MAX_VALUES: usize = 2 << 20;

const _: () = assert!(MAX_VALUES as u64 == 2 * MAX_BYTES);

/// What the walk found.
#[derive(Debug, Default)]
pub struct Shape {
    /// Values walked (at most [`MAX_VALUES`] + 1).
    pub values: usize,
    /// Every key written twice in one mapping (up to where the walk stopped).
    pub duplicates: Vec<ConfigError>,
    /// The expanded document passed [`MAX_VALUES`]: the walk stopped there.
    pub too_large: Option<ConfigError>,
}

/// Walks `text`. Text that is not one YAML document is left to the parser to report.
pub fn check(text: &str) -> Shape {
    let mut w = Walk {
        path: Vec::new(),
        shape: Shape::default(),
        too_large: false,
    };
    let de = serde_yaml_ng::Deserializer::from_str(text);
    // An error here is the parser's (bad YAML) or the walk's own stop: the first the strict
    // read reports again, the second is in `too_large`.
    let _ = Node { w: &mut w }.deserialize(de);
    if w.too_large {
        w.shape.too_large = Some(ConfigError {
            path: String::new(),
            message: format!(
                "the file's aliases (*name) expand it to more than {MAX_VALUES} values, more than a config file of the largest size ({MAX_BYTES} bytes) holds written out: write the repeated parts out, or fewer of them"
            ),
        });
    }
    w.shape
}

struct Walk {
    /// Where the walk is, as errors print it: `clusters`, `[0]`, `keyspaces`, ….
    path: Vec<Seg>,
    shape: Shape,
    too_large: bool,
}

enum Seg {
    Key(String),
    Index(usize),
}

impl Walk {
    fn render(&self) -> String {
        let mut s = String::new();
        for seg in &self.path {
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

    /// Counts one value; an error (the walk's stop) past the bound.
    fn count<E: de::Error>(&mut self) -> Result<(), E> {
        self.shape.values += 1;
        if self.shape.values > MAX_VALUES {
            self.too_large = true;
            return Err(E::custom("too many values"));
        }
        Ok(())
    }
}

/// One value at the walk's path.
struct Node<'w> {
    w: &'w mut Walk,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.w.count()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.w.count()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.w.count()
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.w.count()
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.w.count()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.w.count()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.w.count()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.w.count()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.w.count()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.w.count()?;
        let mut i = 0;
        loop {
            self.w.path.push(Seg::Index(i));
            let more = seq.next_element_seed(Node { w: self.w })?;
            self.w.path.pop();
            if more.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.w.count()?;
        let mut seen = BTreeSet::new();
        while let Some(key) = map.next_key_seed(KeyOf { w: self.w })? {
            let shown = key.clone().unwrap_or_else(|| "?".to_owned());
            if let Some(k) = key
                && !seen.insert(k.clone())
            {
                self.w.path.push(Seg::Key(k.clone()));
                let path = self.w.render();
                self.w.shape.duplicates.push(ConfigError {
                    path,
                    message: format!(
                        "key {k:?} is written twice in one mapping: YAML would keep only the last, so write it once"
                    ),
                });
                self.w.path.pop();
            }
            self.w.path.push(Seg::Key(shown));
            let walked = map.next_value_seed(Node { w: self.w });
            self.w.path.pop();
            walked?;
        }
        Ok(())
    }

    // A tagged value (`!tag x`): walk what it tags.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        self.w.count()?;
        let ((), variant) = data.variant_seed(Ignored)?;
        de::VariantAccess::newtype_variant_seed(variant, Node { w: self.w })
    }
}

/// A tag's name, not looked at.
struct Ignored;

impl<'de> DeserializeSeed<'de> for Ignored {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(de::IgnoredAny).map(|_| ())
    }
}

/// A mapping's key as the model's string-keyed maps compare it: a scalar's text (`-80`,
/// `0x10` and `16` as YAML reads their values); `None` for a list or mapping used as a key
/// (no config map takes one; the strict read refuses it), which is walked and counted.
struct KeyOf<'w> {
    w: &'w mut Walk,
}

impl<'de> DeserializeSeed<'de> for KeyOf<'_> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyOf<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Option<String>, E> {
        self.w.count()?;
        Ok(Some(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<String>, E> {
        self.w.count()?;
        Ok(Some(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<String>, E> {
        self.w.count()?;
        Ok(Some(v.to_string()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Option<String>, E> {
        self.w.count()?;
        Ok(Some(v.to_string()))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Option<String>, E> {
        self.w.count()?;
        Ok(Some(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<String>, E> {
        self.w.count()?;
        Ok(Some(v.to_string()))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<String>, E> {
        self.w.count()?;
        Ok(Some(v.to_owned()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
        self.w.count()?;
        Ok(Some("~".to_owned()))
    }
    fn visit_none<E: de::Error>(self) -> Result<Option<String>, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<String>, A::Error> {
        Node { w: self.w }.visit_seq(seq).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<String>, A::Error> {
        Node { w: self.w }.visit_map(map).map(|()| None)
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Option<String>, A::Error> {
        Node { w: self.w }.visit_enum(data).map(|()| None)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A list of the list `&l` (`n` scalars) and `k - 1` aliases of it: `1 + k * (n + 1)` values.
    fn lists(k: usize, n: usize) -> String {
        format!("[&l [{}]{}]", vec!["x"; n].join(","), ", *l".repeat(k - 1))
    }

    #[test]
    fn the_bound_is_exact() {
        // 2^21 - 1 = 42799 * 49: one value below the bound's edge, then the outer list.
        let at = check(&lists(42_799, 48));
        assert_eq!((at.values, at.too_large.is_none()), (MAX_VALUES, true));
        let past = check(&lists(2_048, 1_023));
        assert_eq!(past.values, MAX_VALUES + 1);
        assert!(past.too_large.is_some());
    }

    #[test]
    fn keys_compare_as_the_string_keyed_maps_read_them() {
        let dups = |t: &str| {
            check(t)
                .duplicates
                .into_iter()
                .map(|e| e.path)
                .collect::<Vec<_>>()
        };
        assert_eq!(dups("{a: 1, b: {c: 1, c: 2}, a: 3}"), ["b.c", "a"]);
        assert_eq!(dups("{\"16\": 1, 16: 2}"), ["16"]);
        assert_eq!(dups("[{a: 1}, {a: 2}]"), Vec::<String>::new());
        // A key that is a list is walked, not compared.
        assert_eq!(dups("{[a]: 1, [a]: 2}"), Vec::<String>::new());
    }
}
