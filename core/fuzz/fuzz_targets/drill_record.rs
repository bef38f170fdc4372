//! The `vtsnap.io/drill` reader on arbitrary text: never a panic; a record it reads renders
//! to a record that reads back the same, and a failure always has its reason.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_core::snapshot::{DrillRecord, DrillResult};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(r) = DrillRecord::parse(text) {
        assert_eq!(r.result == DrillResult::Failed, r.reason.is_some(), "{text:?}");
        let again = DrillRecord::parse(&r.render())
            .unwrap_or_else(|e| panic!("{text:?} read, but its rendering does not: {e}"));
        assert_eq!(again, r, "{text:?}");
    }
});
