//! The binlog event-header walk on arbitrary bytes: never a panic, never an endless walk;
//! a walk with a stop never sees more than one without.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_core::pitr::binlog::walk;

fuzz_target!(|data: &[u8]| {
    let stop = data.get(4..8).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let all = walk(data, None);
    if let (Ok(all), Ok(until)) = (&all, walk(data, stop)) {
        assert!(until.events <= all.events, "{data:?}");
    }
});
