//! What the Kubernetes API accepts as a name, a label or an annotation, checked before
//! anything is changed: a VolumeSnapshot the API rejects is found out only after the
//! tablet was fenced. The rules and limits are apimachinery's
//! (`pkg/util/validation/validation.go`, `pkg/api/validation/objectmeta.go`).

/// Longest DNS-1123 label (a namespace, a Service, a VitessCluster name).
pub const DNS_LABEL_MAX: usize = 63;
/// Longest DNS-1123 subdomain (most object names, a qualified name's prefix).
pub const DNS_SUBDOMAIN_MAX: usize = 253;
/// Longest name part of a qualified name, and longest label value.
pub const NAME_PART_MAX: usize = 63;
/// All annotations of one object together, keys and values (`TotalAnnotationSizeLimitB`).
pub const ANNOTATIONS_TOTAL_MAX: usize = 256 * 1024;

/// Why a string is not what the API wants. The messages follow apimachinery's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most {max} characters (is {len})")]
    TooLong { len: usize, max: usize },
    #[error(
        "must be a lowercase DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"
    )]
    NotDnsLabel,
    #[error(
        "must be a lowercase DNS subdomain: lowercase letters, digits, '-' and '.', each part starting and ending with a letter or digit"
    )]
    NotDnsSubdomain,
    #[error("prefix {prefix:?} (before '/'): {reason}")]
    BadPrefix {
        prefix: String,
        reason: Box<NameError>,
    },
    #[error("has more than one '/'")]
    TwoSlashes,
    #[error(
        "must consist of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    )]
    BadNameChars,
}

fn check_len(s: &str, max: usize) -> Result<(), NameError> {
    if s.len() > max {
        return Err(NameError::TooLong { len: s.len(), max });
    }
    Ok(())
}

fn is_label_part(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn dns_label(s: &str) -> Result<(), NameError> {
    if s.is_empty() {
        return Err(NameError::Empty);
    }
    check_len(s, DNS_LABEL_MAX)?;
    if !is_label_part(s) {
        return Err(NameError::NotDnsLabel);
    }
    Ok(())
}

/// A DNS-1123 subdomain: labels joined by '.', at most 253 characters.
pub fn dns_subdomain(s: &str) -> Result<(), NameError> {
    if s.is_empty() {
        return Err(NameError::Empty);
    }
    check_len(s, DNS_SUBDOMAIN_MAX)?;
    if !s.split('.').all(is_label_part) {
        return Err(NameError::NotDnsSubdomain);
    }
    Ok(())
}

pub fn is_dns_label(s: &str) -> bool {
    dns_label(s).is_ok()
}

pub fn is_dns_subdomain(s: &str) -> bool {
    dns_subdomain(s).is_ok()
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`: a qualified name's name part, a label value.
fn name_part_chars(s: &str) -> Result<(), NameError> {
    let inner_ok = s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let ends_ok = s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric());
    if inner_ok && ends_ok {
        Ok(())
    } else {
        Err(NameError::BadNameChars)
    }
}

/// A label key or an annotation key: `[prefix/]name`, the prefix a DNS subdomain, the
/// name at most 63 characters of letters, digits, `-`, `_`, `.`.
pub fn qualified_name(s: &str) -> Result<(), NameError> {
    let name = match s.split_once('/') {
        None => s,
        Some((_, name)) if name.contains('/') => return Err(NameError::TwoSlashes),
        Some((prefix, name)) => {
            dns_subdomain(prefix).map_err(|reason| NameError::BadPrefix {
                prefix: prefix.to_owned(),
                reason: Box::new(reason),
            })?;
            name
        }
    };
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    check_len(name, NAME_PART_MAX)?;
    name_part_chars(name)
}

/// A label value: empty, or at most 63 characters as a qualified name's name part.
pub fn label_value(s: &str) -> Result<(), NameError> {
    if s.is_empty() {
        return Ok(());
    }
    check_len(s, NAME_PART_MAX)?;
    name_part_chars(s)
}

/// The size the API counts for a set of annotations: every key and value, in bytes.
pub fn annotations_size<'a>(annotations: impl IntoIterator<Item = (&'a str, &'a str)>) -> usize {
    annotations
        .into_iter()
        .map(|(k, v)| k.len() + v.len())
        .sum()
}

/// Longest part of an untrusted string [`Untrusted`] shows (the rest is counted, not shown).
pub const UNTRUSTED_SHOWN_MAX: usize = 256;

/// A string from an object (a name, a label, an annotation) shown in a message: quoted,
/// control characters and quotes escaped (`{:?}` of `str`), cut after
/// [`UNTRUSTED_SHOWN_MAX`] characters, so that it can reach neither a terminal nor a log
/// line as anything but text. `format!("PVC {}", untrusted(name))`.
#[derive(Debug, Clone, Copy)]
pub struct Untrusted<'a>(pub &'a str);

/// Shows `s` as [`Untrusted`].
pub fn untrusted(s: &str) -> Untrusted<'_> {
    Untrusted(s)
}

impl std::fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.char_indices().nth(UNTRUSTED_SHOWN_MAX) {
            None => write!(f, "{:?}", self.0),
            Some((cut, _)) => write!(
                f,
                "{:?}… ({} more bytes)",
                &self.0[..cut],
                self.0.len() - cut
            ),
        }
    }
}

/// The longest start of `s` of at most `max` bytes that ends on a character boundary.
pub fn cut_to_bytes(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` with every control character escaped (`\u{1b}`) and the rest as it is: for a
/// message assembled from several fields, as a last guard before it is logged or recorded.
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// What a JSON value of an object is, in the words a message names it with (the config's
/// YAML reader says "a mapping": `config::pvc_spec::json_kind`).
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_and_subdomains() {
        for ok in ["a", "example", "a-b", "0", &"a".repeat(63)] {
            assert_eq!(dns_label(ok), Ok(()), "{ok}");
            assert_eq!(dns_subdomain(ok), Ok(()), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(dns_label(bad).is_err(), "{bad}");
        }
        assert_eq!(
            dns_label(&"a".repeat(64)),
            Err(NameError::TooLong { len: 64, max: 63 })
        );
        for ok in ["a.b", "csi-hostpath.snapclass", &"a".repeat(253)] {
            assert_eq!(dns_subdomain(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "../../etc",
            "a..b",
            ".a",
            "a.",
            "a.-b",
            "a-.b",
            "A.b",
            "a/b",
            &"a".repeat(254),
        ] {
            assert!(dns_subdomain(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn qualified_names_as_the_api_checks_label_and_annotation_keys() {
        for ok in [
            "team",
            "Team_1.x",
            "example.com/team",
            "a/b",
            &format!("{}/{}", "p".repeat(253), "n".repeat(63)),
        ] {
            assert_eq!(qualified_name(ok), Ok(()), "{ok}");
        }
        assert_eq!(qualified_name(""), Err(NameError::Empty));
        assert_eq!(qualified_name("a b"), Err(NameError::BadNameChars));
        assert_eq!(qualified_name("example.com/"), Err(NameError::Empty));
        assert_eq!(qualified_name("a/b/c"), Err(NameError::TwoSlashes));
        assert_eq!(qualified_name("-a"), Err(NameError::BadNameChars));
        assert_eq!(qualified_name("a."), Err(NameError::BadNameChars));
        assert!(matches!(
            qualified_name("VTSNAP.IO/y"),
            Err(NameError::BadPrefix { ref prefix, .. }) if prefix == "VTSNAP.IO"
        ));
        assert!(matches!(
            qualified_name("/y"),
            Err(NameError::BadPrefix { .. })
        ));
        assert_eq!(
            qualified_name(&"n".repeat(64)),
            Err(NameError::TooLong { len: 64, max: 63 })
        );
        assert!(qualified_name(&format!("{}/n", "p".repeat(254))).is_err());
    }

    #[test]
    fn label_values_may_be_empty_but_not_long_or_odd() {
        for ok in ["", "a", "db", "A.b-c_d", &"v".repeat(63)] {
            assert_eq!(label_value(ok), Ok(()), "{ok:?}");
        }
        for bad in [" ", "a b", "-a", "a-", "a/b", "é", &"v".repeat(64)] {
            assert!(label_value(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn annotation_size_counts_keys_and_values() {
        assert_eq!(annotations_size([("ab", "cde"), ("f", "")]), 6);
        assert_eq!(annotations_size([]), 0);
    }

    #[test]
    fn untrusted_strings_are_shown_quoted_with_controls_escaped_and_bounded() {
        assert_eq!(untrusted("pvc-1").to_string(), "\"pvc-1\"");
        assert_eq!(
            untrusted("a\u{1b}[2Jb\n\"c").to_string(),
            "\"a\\u{1b}[2Jb\\n\\\"c\""
        );
        let at_limit = "é".repeat(UNTRUSTED_SHOWN_MAX);
        assert_eq!(untrusted(&at_limit).to_string(), format!("{at_limit:?}"));
        let over = format!("{at_limit}xyz");
        assert_eq!(
            untrusted(&over).to_string(),
            format!("{at_limit:?}… (3 more bytes)")
        );
        assert_eq!(cut_to_bytes("abc", 2), "ab");
        assert_eq!(cut_to_bytes("abc", 9), "abc");
        assert_eq!(cut_to_bytes("é", 1), "");
        assert_eq!(cut_to_bytes("aé", 2), "a");
        assert_eq!(cut_to_bytes("aé", 3), "aé");
        assert_eq!(escape_controls("plain"), "plain");
        assert!(matches!(
            escape_controls("plain"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(escape_controls("a\u{1b}[31m\tb\"é"), "a\\u{1b}[31m\\tb\"é");
    }
}
