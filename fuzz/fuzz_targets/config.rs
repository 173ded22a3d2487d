//! The TOML config: parsing and validation never panic, and a config that validates gets
//! a state-memory estimate (the arithmetic on its bounds must not overflow).

#![no_main]
use ldpstream_config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = Config::from_toml_str(text, "fuzz") {
        let _ = ldpstream_jobs::state_memory::estimates(&config, None, &Default::default());
    }
});
