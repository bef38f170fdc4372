//! my.cnf: parsing never panics, and a rewrite is idempotent and parses again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_core::naming::TabletUid;
use vtsnap_restore::mycnf::MyCnf;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cnf) = MyCnf::parse(text) else {
        return;
    };
    let _ = cnf.server_id();
    let (from, to) = (TabletUid::new(101), TabletUid::new(2_548_885_007));
    let Ok((once, _)) = cnf.rewrite(from, to, 4242) else {
        return;
    };
    let again = MyCnf::parse(&once).expect("a rewritten my.cnf parses");
    assert_eq!(again.server_id(), Some(4242));
    let (twice, changed) = again.rewrite(from, to, 4242).expect("rewrites again");
    assert_eq!(once, twice, "rewrite is not idempotent");
    assert!(changed.is_empty());
});
