//! Object ids: what a CSI name becomes, and what every request's id must be before it
//! is joined to a path.
//!
//! An id is the name the CO asked for, if that name is a plain token: an ASCII letter or
//! digit, then letters, digits, `.`, `_`, `-`, at most [`MAX_LEN`] bytes. No `/`, no NUL,
//! never `.` or `..`, so `<root>/volumes/<id>` stays one level below `<root>/volumes`.
//! The CSI spec lets a name be any Unicode string of at most 128 bytes; the sidecars send
//! `pvc-<uuid>` and `snapshot-<uuid>`, and refusing the rest keeps ids usable as
//! directory names without an encoding.

use std::fmt;

/// The spec's size limit for a string field (spec.md, "Size Limits").
pub const MAX_LEN: usize = 128;

/// Why a string is not an id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("is required")]
    Empty,
    #[error("is {len} bytes, more than {MAX_LEN}")]
    TooLong { len: usize },
    #[error("must start with an ASCII letter or digit, not {first:?}")]
    BadStart { first: char },
    #[error(
        "contains {found:?} at byte {at}: only ASCII letters, digits, '.', '_' and '-' are allowed"
    )]
    BadChar { found: char, at: usize },
}

/// A validated volume or snapshot id; safe to use as one path component.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId(String);

impl ObjectId {
    /// Checks `s`; the error says why without echoing a possibly huge input.
    pub fn parse(s: &str) -> Result<Self, IdError> {
        let Some(first) = s.chars().next() else {
            return Err(IdError::Empty);
        };
        if s.len() > MAX_LEN {
            return Err(IdError::TooLong { len: s.len() });
        }
        if !first.is_ascii_alphanumeric() {
            return Err(IdError::BadStart { first });
        }
        if let Some((at, found)) = s
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(IdError::BadChar { found, at });
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ObjectId {
    /// A record on disk is checked like a request: a tampered file cannot name a path.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The spec's limit on `NodeGetInfoResponse.node_id`, which overrides the general one.
pub const MAX_NODE_ID_LEN: usize = 256;

/// Why a string is not a node id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeIdError {
    #[error("is empty")]
    Empty,
    #[error("is {len} bytes, more than {MAX_NODE_ID_LEN}")]
    TooLong { len: usize },
    #[error("contains {found:?}: no whitespace or control characters")]
    BadChar { found: char },
}

/// This node's name, as `NodeGetInfo` reports it (kubelet records it in the CSINode
/// object; Kubernetes node names are DNS subdomains).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeId(String);

impl NodeId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for NodeId {
    type Err = NodeIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(NodeIdError::Empty);
        }
        if s.len() > MAX_NODE_ID_LEN {
            return Err(NodeIdError::TooLong { len: s.len() });
        }
        if let Some(found) = s.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(NodeIdError::BadChar { found });
        }
        Ok(Self(s.to_owned()))
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_names_are_ids() {
        for ok in [
            "pvc-6b1f0c1e-9a43-4c5e-8f0e-2b8f5a9d7c31",
            "snapshot-0d9f1c6a-1111-2222-3333-444455556666",
            "a",
            "A.b_c-9",
            "x..y",
            &"n".repeat(MAX_LEN),
        ] {
            assert_eq!(ObjectId::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn anything_that_could_leave_the_directory_is_refused() {
        let cases: [(&str, IdError); 9] = [
            ("", IdError::Empty),
            ("..", IdError::BadStart { first: '.' }),
            (".", IdError::BadStart { first: '.' }),
            ("../x", IdError::BadStart { first: '.' }),
            ("/etc", IdError::BadStart { first: '/' }),
            ("a/b", IdError::BadChar { found: '/', at: 1 }),
            ("a\0b", IdError::BadChar { found: '\0', at: 1 }),
            ("a b", IdError::BadChar { found: ' ', at: 1 }),
            ("vé", IdError::BadChar { found: 'é', at: 1 }),
        ];
        for (bad, why) in cases {
            assert_eq!(ObjectId::parse(bad), Err(why), "{bad:?}");
        }
        assert_eq!(
            ObjectId::parse(&"n".repeat(MAX_LEN + 1)),
            Err(IdError::TooLong { len: MAX_LEN + 1 })
        );
    }

    #[test]
    fn a_record_with_a_bad_id_does_not_decode() {
        let ok: ObjectId = serde_json::from_str("\"pvc-1\"").unwrap();
        assert_eq!(ok.as_str(), "pvc-1");
        assert!(serde_json::from_str::<ObjectId>("\"../x\"").is_err());
    }

    #[test]
    fn node_ids_are_bounded_printable_names() {
        for ok in [
            "node-1",
            "ip-10-0-0-1.ec2.internal",
            &"n".repeat(MAX_NODE_ID_LEN),
        ] {
            assert_eq!(ok.parse::<NodeId>().unwrap().as_str(), ok);
        }
        assert_eq!("".parse::<NodeId>(), Err(NodeIdError::Empty));
        assert_eq!(
            "n".repeat(MAX_NODE_ID_LEN + 1).parse::<NodeId>(),
            Err(NodeIdError::TooLong {
                len: MAX_NODE_ID_LEN + 1
            })
        );
        for (bad, found) in [("a b", ' '), ("a\nb", '\n'), ("a\0", '\0')] {
            assert_eq!(bad.parse::<NodeId>(), Err(NodeIdError::BadChar { found }));
        }
    }
}
