//! One reader for every dump of cluster objects the offline commands take (`kubectl get …
//! -o json`, a `List`): read bounded and checked in type ([`crate::input`]), then JSON,
//! then the List's items. What each item is, each program's observe reads at its edge.

use std::path::Path;

use serde_json::Value;

use crate::input::{self, Accept, MAX_DUMP, ReadError};

/// Why a dump cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// Not a file or a pipe, too large, or unreadable: the message names the path.
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("not a List of objects (no items)")]
    NotAList,
}

/// The items of the List in the file or pipe `path`, of at most [`MAX_DUMP`] bytes.
pub fn read(path: &Path) -> Result<Vec<Value>, DumpError> {
    parse(&input::read_bounded(
        path,
        "a dump",
        MAX_DUMP,
        Accept::FileOrPipe,
    )?)
}

/// The items of a List dump's text.
pub fn parse(text: &[u8]) -> Result<Vec<Value>, DumpError> {
    match serde_json::from_slice::<Value>(text).map_err(DumpError::NotJson)? {
        Value::Object(mut list) => match list.remove("items") {
            Some(Value::Array(items)) => Ok(items),
            _ => Err(DumpError::NotAList),
        },
        _ => Err(DumpError::NotAList),
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
        assert!(matches!(parse(b"{"), Err(DumpError::NotJson(_))));
        assert!(matches!(parse(b"[]"), Err(DumpError::NotAList)));
        assert!(matches!(
            parse(br#"{"items": {}}"#),
            Err(DumpError::NotAList)
        ));
        assert!(matches!(
            parse(br#"{"kind": "Pod"}"#),
            Err(DumpError::NotAList)
        ));
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
    }
}
