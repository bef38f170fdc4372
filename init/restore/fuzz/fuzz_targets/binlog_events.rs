//! The binlog event reader: scanning any bytes never panics and never allocates more than
//! a checkpoint event's bound, whatever sizes the headers claim (the length given to the
//! scan may exceed the data, as a sparse file's would).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use vtsnap_restore::binlog::scan;

fuzz_target!(|data: &[u8]| {
    let Some((&extra, body)) = data.split_first() else {
        return;
    };
    let len = body.len() as u64 + u64::from(extra) * 4096;
    let _ = scan(Cursor::new(body), body.len() as u64, "fuzz", "vt-0000000101-");
    let _ = scan(Cursor::new(body), len, "fuzz", "vt-0000000101-");
});
