//! One reader for every dump of cluster objects the offline commands take (`kubectl get …
//! -o json`, a `List`): read bounded and checked in type ([`crate::input`]), then JSON,
//! then the List's items, one at a time. What each item is, each program's observe reads
//! at its edge.

use std::fmt;
use std::path::Path;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::input::{self, Accept, MAX_DUMP, ReadError};

/// Why a dump cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// Not a file or a pipe, too large, or unreadable: the message names the path.
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// JSON, but not an object with an `items` array.
    #[error("not a List of objects (no items)")]
    NotAList,
    /// The List is whole, but this item is not a value (a number out of range, nesting
    /// deeper than serde_json's recursion limit of 128).
    #[error("item {index} of the List: {source}")]
    Item {
        index: usize,
        #[source]
        source: serde_json::Error,
    },
}

/// The bytes of the dump in the file or pipe `path`, of at most [`MAX_DUMP`] bytes, for
/// [`each_item`].
pub fn read_text(path: &Path) -> Result<Vec<u8>, DumpError> {
    Ok(input::read_bounded(
        path,
        "a dump",
        MAX_DUMP,
        Accept::FileOrPipe,
    )?)
}

/// The items of the List in the file or pipe `path`, of at most [`MAX_DUMP`] bytes.
pub fn read(path: &Path) -> Result<Vec<Value>, DumpError> {
    parse(&read_text(path)?)
}

/// The items of a List dump's text.
pub fn parse(text: &[u8]) -> Result<Vec<Value>, DumpError> {
    let mut items = Vec::new();
    each_item(text, |_, it| items.push(it))?;
    Ok(items)
}

/// Calls `f` with the index and value of each item of a List dump's text, in order. Only
/// one item is parsed into a [`Value`] at a time, so a caller that keeps less than the
/// items never holds the whole parsed dump. The whole text is checked to be a List before
/// the first call; on a [`DumpError::Item`], `f` has seen the items before it.
pub fn each_item(text: &[u8], mut f: impl FnMut(usize, Value)) -> Result<(), DumpError> {
    let List(items) = serde_json::from_slice(text).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => DumpError::NotAList,
        _ => DumpError::NotJson(e),
    })?;
    for (index, raw) in items.into_iter().enumerate() {
        let it =
            serde_json::from_str(raw.get()).map_err(|source| DumpError::Item { index, source })?;
        f(index, it);
    }
    Ok(())
}

/// An object's `items`, each left unparsed. Other fields are skipped without recursion,
/// however deep; an array (serde's sequence form of a struct) is refused.
struct List<'a>(Vec<&'a RawValue>);

impl<'de> Deserialize<'de> for List<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ListVisitor;

        impl<'de> Visitor<'de> for ListVisitor {
            type Value = List<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a List: an object with an `items` array")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                #[derive(serde::Deserialize)]
                #[serde(field_identifier, rename_all = "lowercase")]
                enum Field {
                    Items,
                    #[serde(other)]
                    Other,
                }
                let mut items = None;
                while let Some(field) = map.next_key()? {
                    match field {
                        Field::Items if items.is_some() => {
                            return Err(de::Error::duplicate_field("items"));
                        }
                        Field::Items => items = Some(map.next_value()?),
                        Field::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                items
                    .map(List)
                    .ok_or_else(|| de::Error::missing_field("items"))
            }
        }

        d.deserialize_map(ListVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_gives_its_items_and_anything_else_is_refused_by_name() {
        let items =
            parse(br#"{"kind": "List", "items": [{"kind": "Pod"}, {"kind": "VolumeSnapshot"}]}"#)
                .unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0], json!({"kind": "Pod"}));
        assert_eq!(items[1], json!({"kind": "VolumeSnapshot"}));
        for not_json in [&b"{"[..], b"", b"{\"items\": [1,]}", b"{\"items\": []} x"] {
            let e = parse(not_json).unwrap_err();
            assert!(matches!(e, DumpError::NotJson(_)), "{e}");
            assert!(e.to_string().starts_with("not JSON: "), "{e}");
        }
        for not_a_list in [
            &br#"[]"#[..],
            br#"[[{"kind": "Pod"}]]"#,
            br#"{"items": {}}"#,
            br#"{"items": null}"#,
            br#"{"kind": "Pod"}"#,
            br#"{"items": [], "items": []}"#,
            br#""items""#,
        ] {
            let e = parse(not_a_list).unwrap_err();
            assert!(matches!(e, DumpError::NotAList), "{e}");
            assert_eq!(e.to_string(), "not a List of objects (no items)");
        }
        assert!(parse(br#"{"items": []}"#).unwrap().is_empty());
    }

    #[test]
    fn items_come_one_at_a_time_and_one_that_fails_is_named_by_its_index() {
        let mut seen = Vec::new();
        each_item(br#"{"items": [{"n": 0}, "x", {"n": 2}]}"#, |i, v| {
            seen.push((i, v))
        })
        .unwrap();
        assert_eq!(
            seen,
            [(0, json!({"n": 0})), (1, json!("x")), (2, json!({"n": 2}))]
        );

        // Syntactically JSON, but no f64: the items before it were seen, none after.
        let mut seen = Vec::new();
        let e = each_item(br#"{"items": [{"n": 0}, 1e400, {"n": 2}]}"#, |i, _| {
            seen.push(i)
        })
        .unwrap_err();
        assert!(matches!(e, DumpError::Item { index: 1, .. }), "{e}");
        assert!(e.to_string().starts_with("item 1 of the List: "), "{e}");
        assert_eq!(seen, [0]);

        // A dump that is not whole is refused before any item is seen.
        let mut seen = 0;
        let e = each_item(br#"{"items": [{"n": 0}, {"n": 1}"#, |_, _| seen += 1).unwrap_err();
        assert!(matches!(e, DumpError::NotJson(_)), "{e}");
        assert_eq!(seen, 0);
    }

    #[test]
    fn deep_nesting_is_an_item_error_inside_items_and_skipped_outside() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let inside = format!(r#"{{"items": [{{}}, {}]}}"#, deep(100_000));
        let e = parse(inside.as_bytes()).unwrap_err();
        assert!(matches!(e, DumpError::Item { index: 1, .. }), "{e}");
        let outside = format!(r#"{{"other": {}, "items": [{{}}]}}"#, deep(100_000));
        assert_eq!(parse(outside.as_bytes()).unwrap(), [json!({})]);
    }

    #[test]
    fn devices_and_endless_files_are_refused_before_they_are_read() {
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert!(
            matches!(
                e,
                DumpError::Read(ReadError::NotAFile {
                    kind: "character device",
                    ..
                })
            ),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.json");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_DUMP + 1).unwrap();
        assert!(read(&big).unwrap_err().to_string().ends_with(&format!(
            "big.json is larger than {MAX_DUMP} bytes, the most a dump may have"
        )),);
        let dump = dir.path().join("dump.json");
        std::fs::write(&dump, br#"{"items": [{"kind": "Pod"}]}"#).unwrap();
        assert_eq!(read(&dump).unwrap(), [json!({"kind": "Pod"})]);
        assert_eq!(
            read_text(&dump).unwrap(),
            br#"{"items": [{"kind": "Pod"}]}"#
        );
    }
}
