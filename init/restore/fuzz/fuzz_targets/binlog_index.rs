//! The binlog index: the last entry is a plain file name, never a path.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_restore::binlog::last_index_entry;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(name) = last_index_entry(text) {
        assert!(!name.is_empty() && !name.contains('/') && name != "." && name != "..");
    }
});
