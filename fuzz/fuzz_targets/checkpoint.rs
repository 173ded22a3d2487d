//! serve's checkpoint files: decode must reject, never panic or allocate without bound.
//! Each input is tried as it is and with the CRC-32C the format ends in appended, so the
//! fuzzer also reaches the decoding behind the checksum.

#![no_main]
use ldpstream_jobs::state_codec::decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode(data, "fuzz");
    let mut sealed = data.to_vec();
    let sum = crc32c::crc32c(&sealed);
    sealed.extend_from_slice(&sum.to_le_bytes());
    let _ = decode(&sealed, "fuzz");
});
