//! The `vtsnap.io/pitr-window` reader on arbitrary text: never a panic; a record it reads
//! has ordered, disjoint spans and renders to a record that reads back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_core::pitr::record::{MAX_SPANS, WindowRecord};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(r) = WindowRecord::parse(text) {
        assert!(r.spans.len() <= MAX_SPANS, "{text:?}");
        assert!(r.spans.iter().all(|s| s.from <= s.to), "{text:?}");
        assert!(r.spans.windows(2).all(|w| w[0].to < w[1].from), "{text:?}");
        let again = WindowRecord::parse(&r.render())
            .unwrap_or_else(|e| panic!("{text:?} read, but its rendering does not: {e}"));
        assert_eq!(again, r, "{text:?}");
    }
});
