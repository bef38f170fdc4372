//! The config parser on arbitrary text: it must never panic, never take long, and a
//! config it accepts must resolve for any shard without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtsnap_core::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = Config::from_yaml(text) {
        for c in &config.clusters {
            let _ = config.resolve(&c.name, "commerce", "-80");
            for (ks, k) in &c.keyspaces {
                for sh in k.shards.keys() {
                    let _ = config.resolve(&c.name, ks, sh);
                }
            }
        }
    }
});
