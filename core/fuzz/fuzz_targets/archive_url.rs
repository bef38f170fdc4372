//! The archive URL reader on arbitrary text: never a panic; a URL it reads names a bucket
//! and a root that never walks, and renders to one that reads back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_core::pitr::archive_url::{ArchiveUrl, MAX_URL};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(u) = ArchiveUrl::parse(text) {
        assert!(text.len() <= MAX_URL, "{text:?}");
        assert!(!u.bucket.is_empty() && !u.bucket.contains('/'), "{text:?}");
        assert!(
            u.root.is_empty() || u.root.split('/').all(|p| !p.is_empty() && p != "." && p != ".."),
            "{text:?}"
        );
        assert!(!u.root.chars().any(char::is_control), "{text:?}");
        let rendered = u.render();
        let again = ArchiveUrl::parse(&rendered)
            .unwrap_or_else(|e| panic!("{text:?} read, but its rendering does not: {e}"));
        assert_eq!(again, u, "{text:?}");
    }
});
