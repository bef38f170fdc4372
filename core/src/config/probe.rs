//! Reads one node of a YAML document, found by its path, with the document's own error
//! messages and line numbers, optionally leaving some of that node's keys out. This is
//! what lets validation read each block on its own and report every parse error.

use std::collections::BTreeSet;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess,
    SeqAccess, Visitor,
};

/// One step of a path into the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

pub type ProbeError = serde_path_to_error::Error<serde_yaml_ng::Error>;

/// The node at `path` read as `T`, without the keys in `skip`; `None` when nothing is there.
/// Error paths are full paths from the document root.
pub fn probe<T: DeserializeOwned>(
    text: &str,
    path: &[Seg],
    skip: &BTreeSet<String>,
) -> Result<Option<T>, ProbeError> {
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(
        serde_yaml_ng::Deserializer::from_str(text),
        &mut track,
    );
    let seed = At {
        path,
        skip,
        t: PhantomData::<T>,
    };
    let result = seed.deserialize(de);
    result.map_err(|e| serde_path_to_error::Error::new(track.path(), e))
}

/// Walks down `path`, ignoring every sibling on the way, then reads `T`.
struct At<'a, T> {
    path: &'a [Seg],
    skip: &'a BTreeSet<String>,
    t: PhantomData<T>,
}

impl<'a, T> At<'a, T> {
    fn rest(&self, rest: &'a [Seg]) -> Self {
        Self {
            path: rest,
            skip: self.skip,
            t: PhantomData,
        }
    }
}

impl<'de, T: de::Deserialize<'de>> DeserializeSeed<'de> for At<'_, T> {
    type Value = Option<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        if !self.path.is_empty() {
            return d.deserialize_any(self);
        }
        if self.skip.is_empty() {
            T::deserialize(d).map(Some)
        } else {
            T::deserialize(Skipping { d, skip: self.skip }).map(Some)
        }
    }
}

impl<'de, T: de::Deserialize<'de>> Visitor<'de> for At<'_, T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let want = match self.path.split_first() {
            Some((Seg::Key(k), rest)) => Some((k, rest)),
            _ => None,
        };
        let mut found = None;
        // Keys are read as strings, as the model's string-keyed maps read them (`-80`).
        while let Some(key) = map.next_key::<String>()? {
            match want {
                Some((k, rest)) if found.is_none() && key == *k => {
                    found = Some(map.next_value_seed(self.rest(rest))?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found.flatten())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<T>, A::Error> {
        let want = match self.path.split_first() {
            Some((Seg::Index(i), rest)) => Some((*i, rest)),
            _ => None,
        };
        let mut found = None;
        let mut i = 0;
        loop {
            match want {
                Some((w, rest)) if w == i => match seq.next_element_seed(self.rest(rest))? {
                    Some(v) => found = v,
                    None => break,
                },
                _ => {
                    if seq.next_element::<IgnoredAny>()?.is_none() {
                        break;
                    }
                }
            }
            i += 1;
        }
        Ok(found)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        self.deserialize(d)
    }

    // A scalar where the path goes on: nothing there (its own read reports it).
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
}

/// A deserializer whose mappings leave out the keys in `skip` (only at this level).
struct Skipping<'a, D> {
    d: D,
    skip: &'a BTreeSet<String>,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Skipping<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.d.deserialize_any(SkipVisitor { v, skip: self.skip })
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.d
            .deserialize_option(SkipVisitor { v, skip: self.skip })
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.d.deserialize_map(SkipVisitor { v, skip: self.skip })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.d
            .deserialize_struct(name, fields, SkipVisitor { v, skip: self.skip })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct enum identifier ignored_any
    }
}

/// Hands a mapping on without the skipped keys; everything else as it comes. Visits it
/// does not forward fail with the wrapped visitor's own "expected" text.
struct SkipVisitor<'a, V> {
    v: V,
    skip: &'a BTreeSet<String>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for SkipVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.v.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.v.visit_map(SkipMap {
            map,
            skip: self.skip,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.v.visit_seq(seq)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.v.visit_some(Skipping { d, skip: self.skip })
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.v.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.v.visit_unit()
    }
}

struct SkipMap<'a, A> {
    map: A,
    skip: &'a BTreeSet<String>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for SkipMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let mut seed = seed;
        loop {
            match self.map.next_key_seed(Key {
                seed,
                skip: self.skip,
            })? {
                None => return Ok(None),
                Some(Keyed::Kept(v)) => return Ok(Some(v)),
                Some(Keyed::Skipped(s)) => {
                    self.map.next_value::<IgnoredAny>()?;
                    seed = s;
                }
            }
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

enum Keyed<S, V> {
    Skipped(S),
    Kept(V),
}

/// Reads a key inside the document's own key read, so that an unknown-field error
/// still carries the key's line and column.
struct Key<'a, S> {
    seed: S,
    skip: &'a BTreeSet<String>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Key<'_, S> {
    type Value = Keyed<S, S::Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Key<'_, S> {
    type Value = Keyed<S, S::Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, k: &str) -> Result<Self::Value, E> {
        if self.skip.contains(k) {
            Ok(Keyed::Skipped(self.seed))
        } else {
            self.seed
                .deserialize(k.into_deserializer())
                .map(Keyed::Kept)
        }
    }
}
