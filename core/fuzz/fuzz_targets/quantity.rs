//! The quantity parser on arbitrary text: never a panic; a size it reads is the same when
//! written in Ki units with no remainder lost (it rounds up, so never smaller).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_core::quantity::bytes;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(b) = bytes(text) {
        let ki = b.div_ceil(1024);
        if let Ok(again) = bytes(&format!("{ki}Ki")) {
            assert!(again >= b, "{text:?}: {b} bytes, but {ki}Ki is {again}");
        }
    }
});
