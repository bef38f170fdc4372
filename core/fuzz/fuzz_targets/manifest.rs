//! The MANIFEST reader on arbitrary bytes: never a panic; an increment it reads holds
//! what the chain relies on (files to replay, `from` within `to`, its times in order).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_core::pitr::manifest::{Expected, Record, read};

fuzz_target!(|data: &[u8]| {
    let Ok(now) = "2026-12-07T10:00:00Z".parse() else {
        return;
    };
    let expected = Expected {
        backup: "2026-12-07.093512.zone1-0000000102",
        keyspace: "commerce",
        shard: "-",
    };
    if let Ok(Record::Increment(i)) = read(data, expected, now) {
        assert!(!i.files.is_empty());
        assert!(i.from.is_subset_of(&i.to), "{i:?}");
        assert!(i.first_commit <= i.last_commit, "{i:?}");
        assert!(i.files.iter().all(|f| !f.binlog.contains('/')), "{i:?}");
    }
});
