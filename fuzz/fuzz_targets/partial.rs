//! Partial sketch files (`batch --emit-sketches`, read by `merge`): decode rejects, never
//! panics or allocates without bound. The harness appends the CRC-32C the format ends in,
//! so the fuzzer reaches the header and the sketches behind the checksum.

#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    let sum = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
    let _ = ldpstream::partials::decode(&bytes, "fuzz");
});
